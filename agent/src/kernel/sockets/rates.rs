//! Per-connection rates over an observation window: two snapshots, plus the connections
//! that closed in between, make one row per connection.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;

use serde::Serialize;

use super::{ClosedSocket, RetransStats, Socket, SocketProbes};

/// One connection over the window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SocketRow {
    /// Latest figures (at the window's end, or at close).
    #[serde(flatten)]
    pub socket: Socket,
    /// Closed during the window (`state` is then "close").
    pub closed: bool,
    /// For closed connections, the state they closed from (e.g. "last-ack").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub closed_from: Option<&'static str>,
    /// Lifetime, for connections that closed and whose opening netdoctor saw.
    pub duration_ms: Option<u64>,
    /// Data segments sent during the window.
    pub data_segs_sent: u64,
    /// Segments retransmitted during the window.
    pub retransmits: u64,
    /// Retransmissions per second.
    pub retransmits_per_s: f64,
    /// Retransmitted / sent data segments during the window (0 when nothing was sent).
    pub retrans_ratio: f64,
    /// Full-MSS segments among the retransmissions (tracepoint; 0 when unavailable).
    pub full_size_retransmits: u64,
    /// Shorter segments among the retransmissions.
    pub small_retransmits: u64,
    /// Acknowledged throughput in bits per second.
    pub throughput_bps: f64,
    /// Bytes the peer acknowledged during the window.
    pub window_bytes_acked: u64,
    /// Bytes received during the window.
    pub window_bytes_received: u64,
}

/// Totals per interface and congestion control algorithm.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CcAggregate {
    /// Egress interface index.
    pub ifindex: u32,
    /// Congestion control algorithm.
    pub cc: String,
    /// Connections.
    pub sockets: usize,
    /// Data segments sent.
    pub data_segs_sent: u64,
    /// Segments retransmitted.
    pub retransmits: u64,
    /// Retransmitted / sent.
    pub retrans_ratio: f64,
    /// Acknowledged throughput in bits per second.
    pub throughput_bps: f64,
}

/// Socket state at the start of an observation window; [`Baseline::rows`] closes it.
#[derive(Debug, Default)]
pub struct Baseline {
    sockets: Vec<Socket>,
    retrans: Vec<RetransStats>,
}

impl Baseline {
    /// Snapshots sockets and retransmission counters now.
    pub fn take(probes: &SocketProbes<'_>) -> crate::kernel::Result<Self> {
        Ok(Baseline {
            sockets: probes.snapshot()?.sockets,
            retrans: probes.retransmits()?,
        })
    }

    /// Ends the window now (`secs` after [`Baseline::take`]): drains the close events,
    /// snapshots again, and returns one row per connection leaving through `ifindex`.
    pub fn rows(
        &self,
        probes: &SocketProbes<'_>,
        ifindex: u32,
        secs: f64,
    ) -> crate::kernel::Result<Vec<SocketRow>> {
        let mut out = self.close(probes, secs)?.0;
        out.retain(|r| r.socket.ifindex == ifindex);
        Ok(out)
    }

    /// The rows so far (`secs` after [`Baseline::take`]) without ending the window: close
    /// events stay queued for [`Baseline::close`], so connections closed so far are left out.
    pub fn peek(
        &self,
        probes: &SocketProbes<'_>,
        secs: f64,
    ) -> crate::kernel::Result<Vec<SocketRow>> {
        let end = probes.snapshot()?.sockets;
        let retrans_end = probes.retransmits()?;
        Ok(rows(
            &self.sockets,
            &end,
            &[],
            &self.retrans,
            &retrans_end,
            secs,
        ))
    }

    /// Ends the window now (`secs` after [`Baseline::take`]) for every interface: one row
    /// per connection, and the baseline of the next window (taken at the same moment, so
    /// consecutive windows neither overlap nor leave gaps).
    pub fn close(
        &self,
        probes: &SocketProbes<'_>,
        secs: f64,
    ) -> crate::kernel::Result<(Vec<SocketRow>, Baseline)> {
        let closed = probes.drain_closed()?;
        let end = probes.snapshot()?.sockets;
        let retrans_end = probes.retransmits()?;
        let out = rows(
            &self.sockets,
            &end,
            &closed,
            &self.retrans,
            &retrans_end,
            secs,
        );
        Ok((
            out,
            Baseline {
                sockets: end,
                retrans: retrans_end,
            },
        ))
    }
}

fn ratio(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

type Endpoints = (SocketAddr, SocketAddr);

/// Builds one row per connection that existed at the end of the window or closed during
/// it (listening sockets excluded). `secs` is the window length.
pub fn rows(
    start: &[Socket],
    end: &[Socket],
    closed: &[ClosedSocket],
    retrans_start: &[RetransStats],
    retrans_end: &[RetransStats],
    secs: f64,
) -> Vec<SocketRow> {
    let before: HashMap<u64, &Socket> = start.iter().map(|s| (s.cookie, s)).collect();
    let retrans_before: HashMap<Endpoints, &RetransStats> = retrans_start
        .iter()
        .map(|r| ((r.local, r.remote), r))
        .collect();
    let retrans_after: HashMap<Endpoints, &RetransStats> = retrans_end
        .iter()
        .map(|r| ((r.local, r.remote), r))
        .collect();

    let latest = end
        .iter()
        .map(|s| (s, None, None))
        .chain(
            closed
                .iter()
                .map(|c| (&c.socket, Some(c.closed_from), c.duration_ms)),
        )
        .filter(|(s, _, _)| s.state != "listen");

    let mut out: Vec<SocketRow> = latest
        .map(|(s, closed_from, duration_ms)| {
            let b = before.get(&s.cookie);
            let segs = u64::from(
                s.data_segs_out
                    .wrapping_sub(b.map_or(0, |b| b.data_segs_out)),
            );
            let retrans = u64::from(
                s.total_retrans
                    .saturating_sub(b.map_or(0, |b| b.total_retrans)),
            );
            let acked = s.bytes_acked.saturating_sub(b.map_or(0, |b| b.bytes_acked));
            let received = s
                .bytes_received
                .saturating_sub(b.map_or(0, |b| b.bytes_received));
            let key = (s.local, s.remote);
            let (full, small) = match retrans_after.get(&key) {
                Some(a) => {
                    let (bf, bs) = retrans_before
                        .get(&key)
                        .map_or((0, 0), |b| (b.full_segments, b.small_segments));
                    (
                        a.full_segments.saturating_sub(bf),
                        a.small_segments.saturating_sub(bs),
                    )
                }
                None => (0, 0),
            };
            let mut socket = s.clone();
            // The kernel drops a socket's cached route at each retransmission timeout past
            // the fifth, so a stalled connection (the one worth seeing) loses its egress
            // device: fall back to where it was going before, or where it last
            // retransmitted.
            if socket.ifindex == 0 {
                socket.ifindex = b
                    .map(|b| b.ifindex)
                    .filter(|i| *i != 0)
                    .or_else(|| retrans_after.get(&key).map(|r| r.ifindex))
                    .unwrap_or(0);
            }
            if closed_from.is_some() {
                socket.state = "close";
            }
            SocketRow {
                socket,
                closed: closed_from.is_some(),
                closed_from,
                duration_ms,
                data_segs_sent: segs,
                retransmits: retrans,
                retransmits_per_s: if secs > 0.0 {
                    retrans as f64 / secs
                } else {
                    0.0
                },
                retrans_ratio: ratio(retrans, segs),
                full_size_retransmits: full,
                small_retransmits: small,
                throughput_bps: if secs > 0.0 {
                    acked as f64 * 8.0 / secs
                } else {
                    0.0
                },
                window_bytes_acked: acked,
                window_bytes_received: received,
            }
        })
        .collect();
    out.sort_by(|a, b| b.throughput_bps.total_cmp(&a.throughput_bps));
    out
}

/// Sums rows per (interface, congestion control algorithm).
pub fn by_cc(rows: &[SocketRow]) -> Vec<CcAggregate> {
    let mut groups: BTreeMap<(u32, String), CcAggregate> = BTreeMap::new();
    for r in rows {
        let g = groups
            .entry((r.socket.ifindex, r.socket.cc.clone()))
            .or_insert_with(|| CcAggregate {
                ifindex: r.socket.ifindex,
                cc: r.socket.cc.clone(),
                sockets: 0,
                data_segs_sent: 0,
                retransmits: 0,
                retrans_ratio: 0.0,
                throughput_bps: 0.0,
            });
        g.sockets += 1;
        g.data_segs_sent += r.data_segs_sent;
        g.retransmits += r.retransmits;
        g.throughput_bps += r.throughput_bps;
    }
    groups
        .into_values()
        .map(|mut g| {
            g.retrans_ratio = ratio(g.retransmits, g.data_segs_sent);
            g
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sock(cookie: u64, cc: &str, segs: u32, retrans: u32, acked: u64) -> Socket {
        Socket {
            cookie,
            local: "10.0.0.1:40000".parse().expect("addr"),
            remote: "10.0.0.2:5201".parse().expect("addr"),
            state: "established",
            ifindex: 3,
            cc: cc.into(),
            ca_state: "open",
            srtt_us: 1000,
            rttvar_us: 100,
            min_rtt_us: 900,
            cwnd: 10,
            ssthresh: 7,
            total_retrans: retrans,
            lost: 0,
            retrans_out: 0,
            segs_out: segs,
            data_segs_out: segs,
            mss: 1448,
            pmtu: 1500,
            reordering: 3,
            delivery_rate_bps: 0,
            bytes_acked: acked,
            bytes_received: 0,
            bytes_sent: acked,
            bytes_retrans: 0,
            mtu_probing: false,
            ..Socket::sample(cookie)
        }
    }

    #[test]
    fn rates_are_window_deltas() {
        let start = [sock(1, "cubic", 100, 2, 1000)];
        let end = [sock(1, "cubic", 1100, 52, 1_001_000)];
        let rows = rows(&start, &end, &[], &[], &[], 2.0);
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].data_segs_sent, 1000);
        assert_eq!(rows[0].retransmits, 50);
        assert!((rows[0].retrans_ratio - 0.05).abs() < 1e-9);
        assert!((rows[0].retransmits_per_s - 25.0).abs() < 1e-9);
        assert!((rows[0].throughput_bps - 4_000_000.0).abs() < 1e-6);
    }

    #[test]
    fn new_and_closed_connections_count_from_zero() {
        let closed = [ClosedSocket {
            socket: sock(7, "bbr", 10, 1, 5000),
            duration_ms: Some(30),
            closed_from: "last-ack",
        }];
        let end = [sock(8, "cubic", 20, 0, 100)];
        let rows = rows(&[], &end, &closed, &[], &[], 1.0);
        assert_eq!(rows.len(), 2);
        let c = rows.iter().find(|r| r.closed).expect("closed row");
        assert_eq!(
            (c.data_segs_sent, c.retransmits, c.duration_ms),
            (10, 1, Some(30))
        );
        let agg = by_cc(&rows);
        assert_eq!(agg.len(), 2);
        assert_eq!(agg.iter().map(|a| a.sockets).sum::<usize>(), 2);
    }

    #[test]
    fn a_stalled_connection_keeps_its_interface() {
        let start = [sock(1, "cubic", 10, 1, 100)];
        let mut stalled = sock(1, "cubic", 10, 9, 100);
        stalled.ifindex = 0; // route cache reset by the retransmission timer
        let rows = rows(&start, &[stalled], &[], &[], &[], 1.0);
        assert_eq!(rows[0].socket.ifindex, 3);

        let mut unseen = sock(2, "cubic", 10, 9, 100);
        unseen.ifindex = 0;
        let retrans = [RetransStats {
            local: unseen.local,
            remote: unseen.remote,
            events: 9,
            segments: 9,
            bytes: 9 * 1448,
            full_segments: 9,
            small_segments: 0,
            ifindex: 5,
            mss: 1448,
        }];
        let rows = super::rows(&[], &[unseen], &[], &[], &retrans, 1.0);
        assert_eq!(rows[0].socket.ifindex, 5);
    }

    #[test]
    fn no_data_means_zero_ratio() {
        let s = [sock(1, "bbr", 0, 0, 0)];
        let rows = rows(&s, &s, &[], &[], &[], 1.0);
        assert_eq!(rows[0].retrans_ratio, 0.0);
    }
}

//! Per-connection rates over an observation window: two snapshots, plus the connections
//! that closed in between, make one row per connection.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use serde::Serialize;

use super::limits::{self, Limits, Window};
use super::{Clock, ClosedSocket, RetransStats, Socket, SocketProbes};

mod row;

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
    /// Shorter segments among the retransmissions (tails, bare SYNs and FINs); with the
    /// full-MSS ones they add up to `retransmits` where the tracepoint passes `err`.
    pub small_retransmits: u64,
    /// Segments the peer reported received twice (DSACK, RFC 2883) during the window: each
    /// one a retransmission that was not needed, the original having arrived late.
    pub dsack_dups: u64,
    /// Reordering events the connection detected during the window.
    pub reord_seen: u64,
    /// Acknowledged throughput in bits per second.
    pub throughput_bps: f64,
    /// Bytes the peer acknowledged during the window.
    pub window_bytes_acked: u64,
    /// Bytes received during the window.
    pub window_bytes_received: u64,
    /// What limited the connection during the window.
    #[serde(flatten)]
    pub limits: Limits,
}

#[cfg(test)]
impl SocketRow {
    /// A row of `socket` with no traffic in the window and these limits, for tests to change.
    pub(crate) fn sample(socket: Socket, limits: Limits) -> SocketRow {
        SocketRow {
            socket,
            closed: false,
            closed_from: None,
            duration_ms: None,
            data_segs_sent: 0,
            retransmits: 0,
            retransmits_per_s: 0.0,
            retrans_ratio: 0.0,
            full_size_retransmits: 0,
            small_retransmits: 0,
            dsack_dups: 0,
            reord_seen: 0,
            throughput_bps: 0.0,
            window_bytes_acked: 0,
            window_bytes_received: 0,
            limits,
        }
    }
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
    clock: Option<Clock>,
}

impl Baseline {
    /// Snapshots sockets and retransmission counters now.
    pub fn take(probes: &SocketProbes<'_>) -> crate::kernel::Result<Self> {
        let snapshot = probes.snapshot()?;
        Ok(Baseline {
            sockets: snapshot.sockets,
            retrans: probes.retransmits()?,
            clock: snapshot.clock,
        })
    }

    /// The window from this baseline to `end`, `secs` long.
    fn window(&self, probes: &SocketProbes<'_>, end: Option<Clock>, secs: f64) -> Window {
        Window {
            secs,
            start: self.clock,
            hz: end.and_then(|c| probes.hz(&c)),
        }
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
        let end = probes.snapshot()?;
        let retrans_end = probes.retransmits()?;
        Ok(rows(
            &self.sockets,
            &end.sockets,
            &[],
            &self.retrans,
            &retrans_end,
            &self.window(probes, end.clock, secs),
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
        // The snapshot before the close events: a connection closing in between is then
        // in both (the snapshot's copy is dropped for its final figures), never in neither.
        let mut end = probes.snapshot()?;
        let retrans_end = probes.retransmits()?;
        let closed = probes.drain_closed()?;
        let live = without_closed(&end.sockets, &closed);
        let out = rows(
            &self.sockets,
            &live,
            &closed,
            &self.retrans,
            &retrans_end,
            &self.window(probes, end.clock, secs),
        );
        end.sockets = live;
        Ok((
            out,
            Baseline {
                sockets: end.sockets,
                retrans: retrans_end,
                clock: end.clock,
            },
        ))
    }
}

/// The sockets of `snapshot` that are not among `closed` (by cookie).
fn without_closed(snapshot: &[Socket], closed: &[ClosedSocket]) -> Vec<Socket> {
    let gone: std::collections::HashSet<u64> = closed.iter().map(|c| c.socket.cookie).collect();
    snapshot
        .iter()
        .filter(|s| !gone.contains(&s.cookie))
        .cloned()
        .collect()
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
/// it (listening sockets excluded), each with what limited it.
pub fn rows(
    start: &[Socket],
    end: &[Socket],
    closed: &[ClosedSocket],
    retrans_start: &[RetransStats],
    retrans_end: &[RetransStats],
    window: &Window,
) -> Vec<SocketRow> {
    let starts = row::Starts::new(start, retrans_start, retrans_end);
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
        .map(|(s, closed_from, duration_ms)| starts.row(s, closed_from, duration_ms, window))
        .collect();
    ceilings(&mut out);
    out.sort_by(|a, b| b.throughput_bps.total_cmp(&a.throughput_bps));
    out
}

/// Gives each window-limited row its ceiling against what the path to its host has shown,
/// and whether its receiver is a socket of this host.
fn ceilings(rows: &mut [SocketRow]) {
    let rates = limits::path_rates(
        &rows
            .iter()
            .map(|r| {
                (
                    r.socket.remote.ip(),
                    r.throughput_bps,
                    r.limits.sending_rate_bps,
                )
            })
            .collect::<Vec<_>>(),
    );
    let ends: std::collections::HashSet<Endpoints> = rows
        .iter()
        .filter(|r| !r.closed)
        .map(|r| (r.socket.local, r.socket.remote))
        .collect();
    for r in rows.iter_mut() {
        let path = rates.get(&r.socket.remote.ip()).copied().unwrap_or(0.0);
        let local = ends.contains(&(r.socket.remote, r.socket.local));
        limits::ceiling(&mut r.limits, &r.socket, path, local);
    }
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
mod tests;

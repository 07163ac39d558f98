//! The local TCP connections through an interface as facts ([`FlowFacts`]), each beside
//! what loss-based congestion control can sustain on its path and what the path delivered.
//!
//! Mathis, Semke, Mahdavi and Ott, "The macroscopic behavior of the TCP congestion
//! avoidance algorithm" (SIGCOMM CCR 27(3), 1997): a Reno-style connection losing a
//! fraction `p` of its segments at round-trip time `RTT` moves at most about
//! `MSS / RTT · C / √p` with `C = √(3/2) ≈ 1.22` (periodic loss, delayed ACKs off). CUBIC
//! halves its window less and grows it faster, but on a lossy path it too is bounded by
//! its loss rate, which BBR does not read as congestion.
//!
//! What limited each connection (`kernel::sockets::limits`) comes with it, and for a window
//! the buffer size that would give the window its path needs: the receiver's `tcp_rmem`
//! maximum (the kernel advertises only part of the buffer: `tcp_adv_win_scale`) or the
//! sender's `tcp_wmem` maximum.

use std::net::IpAddr;

use super::{FlowFacts, PeerFacts};
use crate::config::host::Host;
use crate::config::prefix::Prefix;
use crate::kernel::sockets::limits::Limit;
use crate::kernel::sockets::rates::SocketRow;

/// Buffer sizes a fix names are rounded up to this (64 KiB).
const BUFFER_STEP: f64 = 65_536.0;

/// The kernel's default `tcp_rmem` and `tcp_wmem` middle values (the default buffer),
/// which a maximum must not be set below; a remote host's own are unknown.
const RMEM_DEFAULT: i64 = 131_072;
const WMEM_DEFAULT: i64 = 16_384;

/// √(3/2): Mathis et al.'s constant for periodic loss without delayed ACKs.
const MATHIS_C: f64 = 1.224_744_871;

fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// The rate in bits per second a loss-based congestion control can sustain with segments
/// of `mss` bytes at `srtt_s` seconds of round trip and a fraction `loss` of segments lost;
/// `None` without loss or a round-trip time (nothing bounds it then).
pub fn mathis_bps(mss: u32, srtt_s: f64, loss: f64) -> Option<f64> {
    (mss > 0 && srtt_s > 0.0 && loss > 0.0)
        .then(|| f64::from(mss) * 8.0 / srtt_s * MATHIS_C / loss.sqrt())
}

/// The buffer maximum that gives a window-limited connection the window its path needs,
/// bytes, rounded up to 64 KiB; -1 for other limits or without a needed window. A receive
/// buffer is advertised in part (`host.tcp_adv_win_share`, half if unknown); a send buffer
/// holds as much data as its ceiling's window per byte of it.
pub fn needed_buffer(r: &SocketRow, host: &Host) -> i64 {
    let l = &r.limits;
    if l.needed_window_bytes <= 0 || l.window_bytes <= 0 {
        return -1;
    }
    let needed = l.needed_window_bytes as f64;
    let (bytes, floor) = match l.limit {
        Limit::ReceiverWindow => {
            let share = if host.tcp_adv_win_share > 0.0 {
                host.tcp_adv_win_share
            } else {
                0.5
            };
            let floor = if l.receiver_local {
                host.tcp_rmem_default
            } else {
                RMEM_DEFAULT
            };
            (needed / share, floor)
        }
        Limit::SendBuffer if r.socket.sndbuf > 0 => {
            let per_byte = l.window_bytes as f64 / f64::from(r.socket.sndbuf);
            (needed / per_byte, host.tcp_wmem_default.max(WMEM_DEFAULT))
        }
        _ => return -1,
    };
    let rounded = ((bytes / BUFFER_STEP).ceil() * BUFFER_STEP) as i64;
    rounded.max(floor)
}

/// The connections among `rows` leaving through interface `ifindex`, in the order of
/// `rows`; their `underlay_loss_percent` is left unknown (see [`underlay_loss`]).
pub fn flow_facts(rows: &[SocketRow], ifindex: u32, host: &Host) -> Vec<FlowFacts> {
    let mine: Vec<&SocketRow> = rows
        .iter()
        .filter(|r| r.socket.ifindex == ifindex)
        .collect();
    let to_host = |host: IpAddr| mine.iter().filter(move |r| r.socket.remote.ip() == host);
    mine.iter()
        .map(|r| {
            let remote = r.socket.remote.ip();
            let srtt_s = f64::from(r.socket.srtt_us) / 1e6;
            let spurious = r.dsack_dups.min(r.retransmits);
            let spurious_ratio = if r.data_segs_sent > 0 {
                spurious as f64 / r.data_segs_sent as f64
            } else {
                0.0
            };
            let loss_ratio = (r.retrans_ratio - spurious_ratio).max(0.0);
            FlowFacts {
                name: format!("{} -> {}", r.socket.local, r.socket.remote),
                cc: r.socket.cc.clone(),
                data_segs_sent: to_i64(r.data_segs_sent),
                retransmits: to_i64(r.retransmits),
                retrans_ratio: r.retrans_ratio,
                full_size_retransmits: to_i64(r.full_size_retransmits),
                small_retransmits: to_i64(r.small_retransmits),
                spurious_retransmits: to_i64(spurious),
                spurious_ratio,
                reord_seen: to_i64(r.reord_seen),
                reordering: i64::from(r.socket.reordering),
                pmtu: i64::from(r.socket.pmtu),
                mss: i64::from(r.socket.mss),
                srtt_ms: srtt_s * 1000.0,
                throughput_bps: r.throughput_bps,
                loss_based_limit_bps: mathis_bps(r.socket.mss, srtt_s, loss_ratio).unwrap_or(-1.0),
                host_throughput_bps: to_host(remote).map(|o| o.throughput_bps).sum(),
                host_bbr_bps: to_host(remote)
                    .filter(|o| o.socket.cc == "bbr")
                    .map(|o| o.throughput_bps)
                    .reduce(f64::max)
                    .unwrap_or(-1.0),
                remote_host: remote.to_string(),
                limit: r.limits.limit.to_string(),
                limit_share: r.limits.limit_share,
                busy_share: r.limits.busy_share,
                rwnd_limited_share: r.limits.rwnd_limited_share,
                sndbuf_limited_share: r.limits.sndbuf_limited_share,
                idle_share: r.limits.idle_share,
                window_bytes: r.limits.window_bytes,
                ceiling_bps: r.limits.ceiling_bps,
                path_rate_bps: r.limits.path_rate_bps,
                needed_window_bytes: r.limits.needed_window_bytes,
                needed_buffer_bytes: needed_buffer(r, host),
                receiver_local: r.limits.receiver_local,
                underlay_loss_percent: -1.0,
            }
        })
        .collect()
}

/// Gives each connection of `flows` (made by [`flow_facts`] from `rows` and `ifindex`) the
/// underlay loss measured for the tunnel peer that carries it: the first of `peers` whose
/// allowed IPs hold its remote address.
pub fn underlay_loss(
    flows: &mut [FlowFacts],
    rows: &[SocketRow],
    ifindex: u32,
    peers: &[PeerFacts],
) {
    let prefixes: Vec<(Vec<Prefix>, f64)> = peers
        .iter()
        .filter(|p| p.underlay_loss_percent >= 0.0)
        .map(|p| {
            let allowed = p
                .allowed_ips
                .iter()
                .filter_map(|a| a.parse().ok())
                .collect();
            (allowed, p.underlay_loss_percent)
        })
        .collect();
    let remotes = rows
        .iter()
        .filter(|r| r.socket.ifindex == ifindex)
        .map(|r| r.socket.remote.ip().to_canonical());
    for (f, remote) in flows.iter_mut().zip(remotes) {
        if let Some((_, loss)) = prefixes
            .iter()
            .find(|(allowed, _)| allowed.iter().any(|a| a.contains(remote)))
        {
            f.underlay_loss_percent = *loss;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::sockets::limits::Limits;
    use crate::kernel::sockets::Socket;

    /// A row limited by `limit` whose path needs a 256 KiB window, its window 64 KiB.
    fn limited(limit: Limit, receiver_local: bool) -> SocketRow {
        let mut socket = Socket::sample(1);
        socket.sndbuf = 131_072;
        SocketRow::sample(
            socket,
            Limits {
                limit,
                window_bytes: 65_536,
                needed_window_bytes: 262_144,
                receiver_local,
                ..Limits::default()
            },
        )
    }

    #[test]
    fn the_buffer_a_window_needs() {
        let mut host = Host {
            tcp_adv_win_share: 0.5,
            tcp_rmem_default: 1_048_576,
            tcp_wmem_default: 16_384,
            ..Host::default()
        };
        // Half of the receive buffer is advertised: 512 KiB for a 256 KiB window.
        let remote = limited(Limit::ReceiverWindow, false);
        assert_eq!(needed_buffer(&remote, &host), 524_288);
        // Three quarters (tcp_adv_win_scale 2): 341.3 KiB, rounded up to 384 KiB.
        host.tcp_adv_win_share = 0.75;
        assert_eq!(needed_buffer(&remote, &host), 393_216);
        // Never below this host's default buffer when the receiver is here.
        let local = limited(Limit::ReceiverWindow, true);
        assert_eq!(needed_buffer(&local, &host), 1_048_576);
        // A send buffer of 128 KiB holding a 64 KiB window: twice the window, 512 KiB.
        let sender = limited(Limit::SendBuffer, true);
        assert_eq!(needed_buffer(&sender, &host), 524_288);
        // No window to lift.
        assert_eq!(needed_buffer(&limited(Limit::Congestion, true), &host), -1);
        let mut unknown = limited(Limit::ReceiverWindow, false);
        unknown.limits.needed_window_bytes = -1;
        assert_eq!(needed_buffer(&unknown, &host), -1);
    }

    /// With a 1448-byte MSS: 62 ms and 4.8 % loss, about 1.0 Mbit/s; 50 ms and 1 %, 2.8
    /// Mbit/s (the seed's lab measured cubic at 3.2 there); 200 ms and 1 %, 0.7 Mbit/s.
    #[test]
    fn mathis_rates() {
        let mbit = |mss, rtt, p| mathis_bps(mss, rtt, p).map(|b| (b / 1e5).round() / 10.0);
        assert_eq!(mbit(1448, 0.062, 0.048), Some(1.0));
        assert_eq!(mbit(1448, 0.050, 0.01), Some(2.8));
        assert_eq!(mbit(1448, 0.2, 0.01), Some(0.7));
        assert_eq!(mathis_bps(1448, 0.05, 0.0), None);
        assert_eq!(mathis_bps(1448, 0.0, 0.01), None);
    }
}

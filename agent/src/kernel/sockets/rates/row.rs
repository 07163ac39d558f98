//! One connection's row over a window: its counters' growth since the window's start,
//! the egress device it was last seen leaving by, and what limited it.

use std::collections::HashMap;

use super::{ratio, Endpoints, SocketRow};
use crate::kernel::sockets::limits::{self, Traffic, Window};
use crate::kernel::sockets::{RetransStats, Socket};

/// What the window's rows are measured from: the sockets at its start, by cookie, and the
/// retransmission counters at both of its ends, by endpoints.
pub(super) struct Starts<'a> {
    before: HashMap<u64, &'a Socket>,
    retrans_before: HashMap<Endpoints, &'a RetransStats>,
    retrans_after: HashMap<Endpoints, &'a RetransStats>,
}

/// A connection's counters over the window.
struct Growth {
    segments: u64,
    retransmits: u64,
    dsack_dups: u64,
    reord_seen: u64,
    acked: u64,
    received: u64,
}

impl Growth {
    /// From `b` (the connection at the window's start, if it existed) to `s`.
    fn of(s: &Socket, b: Option<&Socket>) -> Growth {
        Growth {
            segments: u64::from(
                s.data_segs_out
                    .wrapping_sub(b.map_or(0, |b| b.data_segs_out)),
            ),
            retransmits: u64::from(
                s.total_retrans
                    .saturating_sub(b.map_or(0, |b| b.total_retrans)),
            ),
            dsack_dups: u64::from(s.dsack_dups.wrapping_sub(b.map_or(0, |b| b.dsack_dups))),
            reord_seen: u64::from(s.reord_seen.wrapping_sub(b.map_or(0, |b| b.reord_seen))),
            acked: s.bytes_acked.saturating_sub(b.map_or(0, |b| b.bytes_acked)),
            received: s
                .bytes_received
                .saturating_sub(b.map_or(0, |b| b.bytes_received)),
        }
    }
}

impl<'a> Starts<'a> {
    pub(super) fn new(
        start: &'a [Socket],
        retrans_start: &'a [RetransStats],
        retrans_end: &'a [RetransStats],
    ) -> Self {
        Starts {
            before: start.iter().map(|s| (s.cookie, s)).collect(),
            retrans_before: retrans_start
                .iter()
                .map(|r| ((r.local, r.remote), r))
                .collect(),
            retrans_after: retrans_end
                .iter()
                .map(|r| ((r.local, r.remote), r))
                .collect(),
        }
    }

    /// The row of connection `s`; `closed_from` and `duration_ms` for one that closed
    /// during the window.
    pub(super) fn row(
        &self,
        s: &Socket,
        closed_from: Option<&'static str>,
        duration_ms: Option<u64>,
        window: &Window,
    ) -> SocketRow {
        let secs = window.secs;
        let b = self.before.get(&s.cookie).copied();
        let g = Growth::of(s, b);
        let (full, small) = self.retransmit_sizes(s);
        let throughput_bps = if secs > 0.0 {
            g.acked as f64 * 8.0 / secs
        } else {
            0.0
        };
        let mut limits = limits::shares(b, s, window);
        limits::dominant(
            &mut limits,
            &Traffic {
                socket: s,
                start: b,
                closed: closed_from.is_some(),
                acked: g.acked,
                segments: g.segments,
                retransmits: g.retransmits,
                throughput_bps,
            },
        );
        SocketRow {
            socket: self.located(s, b, closed_from.is_some()),
            closed: closed_from.is_some(),
            closed_from,
            duration_ms,
            data_segs_sent: g.segments,
            retransmits: g.retransmits,
            retransmits_per_s: if secs > 0.0 {
                g.retransmits as f64 / secs
            } else {
                0.0
            },
            retrans_ratio: ratio(g.retransmits, g.segments),
            full_size_retransmits: full,
            small_retransmits: small,
            dsack_dups: g.dsack_dups,
            reord_seen: g.reord_seen,
            throughput_bps,
            window_bytes_acked: g.acked,
            window_bytes_received: g.received,
            limits,
        }
    }

    /// The window's (full-size, smaller) retransmitted segments of `s`.
    fn retransmit_sizes(&self, s: &Socket) -> (u64, u64) {
        let key = (s.local, s.remote);
        match self.retrans_after.get(&key) {
            Some(a) => {
                let (bf, bs) = self
                    .retrans_before
                    .get(&key)
                    .map_or((0, 0), |b| (b.full_segments, b.small_segments));
                (
                    a.full_segments.saturating_sub(bf),
                    a.small_segments.saturating_sub(bs),
                )
            }
            None => (0, 0),
        }
    }

    /// `s` with the egress device it was last seen leaving by, and "close" as its state
    /// if it closed.
    fn located(&self, s: &Socket, b: Option<&Socket>, closed: bool) -> Socket {
        let mut socket = s.clone();
        // The kernel drops a socket's cached route at each retransmission timeout past
        // the fifth, so a stalled connection (the one worth seeing) loses its egress
        // device: fall back to where it was going before, or where it last
        // retransmitted.
        if socket.ifindex == 0 {
            socket.ifindex = b
                .map(|b| b.ifindex)
                .filter(|i| *i != 0)
                .or_else(|| {
                    self.retrans_after
                        .get(&(s.local, s.remote))
                        .map(|r| r.ifindex)
                })
                .unwrap_or(0);
        }
        if closed {
            socket.state = "close";
        }
        socket
    }
}

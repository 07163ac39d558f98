//! The WireGuard path of each peer, from what the data plane measured on the underlay
//! ([`crate::kernel::packet::wg_path`]): the loss of what the peer sent (its sessions'
//! counters), the round trip of its latest handshake, and handshakes left unanswered.
//!
//! A session belongs to the peer its messages come from: the peer's endpoint, or for
//! Tailscale any address tailscaled knows for it; else the peer this host sent the session's
//! handshake to (the index is this host's, chosen in that handshake). Loss of what a peer
//! sends is measured where it arrives: this host sees its inbound direction.

use std::net::SocketAddr;

use crate::facts::PeerFacts;
use crate::kernel::packet::flows::Flow;
use crate::kernel::packet::wg_path::{Role, WgHandshake, WgSession};
use crate::kernel::packet::Snapshot;
use crate::kernel::views::Direction;

/// How far back unanswered handshakes are looked for: six of WireGuard's retries (one every
/// 5 s, REKEY_TIMEOUT), so that a path failing one way shows in every window of the agent.
const LOOKBACK_NS: u64 = 30_000_000_000;
/// A handshake younger than this at the end of the observation may still be answered.
const ANSWER_GRACE_NS: u64 = 1_000_000_000;

fn canonical(a: SocketAddr) -> SocketAddr {
    SocketAddr::new(a.ip().to_canonical(), a.port())
}

/// Marks every path fact of `p` unknown.
pub(super) fn unknown(p: &mut PeerFacts) {
    p.underlay_expected = -1;
    p.underlay_received = -1;
    p.underlay_lost = -1;
    p.underlay_loss_percent = -1.0;
    p.rx_counter = -1;
    p.tx_data_packets = -1;
    p.rtt_ms = -1.0;
    p.rtt_age_s = -1;
}

/// What the data plane saw of the WireGuard path: the window's sessions and flows on the
/// watched underlays, and the handshakes this host sent.
pub(super) struct PathWindow<'a> {
    pub window: &'a Snapshot,
    /// Indexes of the watched underlay interfaces.
    pub underlays: Vec<u32>,
    /// The tunnel's flows on those underlays.
    pub outer: &'a [&'a Flow],
}

impl PathWindow<'_> {
    /// Fills the path facts of `p`, whose addresses (endpoint, Tailscale's candidates) are
    /// `addrs`.
    pub(super) fn apply(&self, p: &mut PeerFacts, addrs: &[SocketAddr]) {
        let addrs: Vec<SocketAddr> = addrs.iter().copied().map(canonical).collect();
        let w = self.window;
        let hs: Vec<&WgHandshake> = w
            .wg_handshakes
            .iter()
            .filter(|h| addrs.contains(&canonical(h.peer)))
            .collect();
        let sessions: Vec<&WgSession> = w
            .wg_sessions
            .iter()
            .filter(|s| self.underlays.contains(&s.ifindex))
            .filter(|s| {
                addrs.contains(&canonical(s.source)) || hs.iter().any(|h| h.index == s.index)
            })
            .collect();
        let expected: u64 = sessions.iter().map(|s| s.expected).sum();
        let lost: u64 = sessions.iter().map(|s| s.lost()).sum();
        p.underlay_expected = to_i64(expected);
        p.underlay_received = to_i64(sessions.iter().map(|s| s.received).sum());
        p.underlay_lost = to_i64(lost);
        p.underlay_loss_percent = if expected > 0 {
            lost as f64 * 100.0 / expected as f64
        } else {
            -1.0
        };
        p.rx_sessions = sessions.len() as i64;
        p.rx_counter = sessions
            .iter()
            .max_by_key(|s| s.last_seen_mono_ns)
            .map_or(-1, |s| to_i64(s.high));
        p.tx_data_packets = self
            .outer
            .iter()
            .filter(|f| f.direction == Direction::Egress)
            .filter(|f| addrs.contains(&canonical(SocketAddr::new(f.dst, f.dst_port))))
            .map(|f| i64::from(f.wireguard.data))
            .sum();
        if let Some((rtt, at)) = hs
            .iter()
            .filter_map(|h| Some((h.rtt_ns()?, h.answered_mono_ns?)))
            .max_by_key(|(_, at)| *at)
        {
            p.rtt_ms = rtt as f64 / 1e6;
            p.rtt_age_s = to_i64(w.mono_ns.saturating_sub(at) / 1_000_000_000);
        }
        let from = w.mono_ns.saturating_sub(LOOKBACK_NS).max(w.since_mono_ns);
        let judged = w.mono_ns.saturating_sub(ANSWER_GRACE_NS);
        let recent = hs.iter().filter(|h| h.sent_mono_ns >= from);
        let unanswered = |role| {
            recent
                .clone()
                .filter(|h| h.role == role && h.answered_mono_ns.is_none())
                .filter(|h| h.sent_mono_ns <= judged)
                .count() as i64
        };
        p.initiations_unanswered = unanswered(Role::Initiator);
        p.responses_unconfirmed = unanswered(Role::Responder);
        p.handshakes_answered = recent
            .clone()
            .filter(|h| h.answered_mono_ns.is_some())
            .count() as i64;
    }
}

fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    fn session(index: u32, source: &str, expected: u64, received: u64) -> WgSession {
        WgSession {
            ifindex: 2,
            index,
            source: source.parse().expect("source"),
            high: expected,
            low: 0,
            expected,
            received,
            duplicates: 0,
            last_seen_mono_ns: 100 * S + u64::from(index),
        }
    }

    fn hs(index: u32, role: Role, sent: u64, answered: Option<u64>) -> WgHandshake {
        WgHandshake {
            index,
            ifindex: 2,
            role,
            peer: "192.0.2.2:51820".parse().expect("peer"),
            sent_mono_ns: sent,
            answered_mono_ns: answered,
        }
    }

    fn facts(window: &Snapshot, underlays: Vec<u32>) -> PeerFacts {
        let path = PathWindow {
            window,
            underlays,
            outer: &[],
        };
        let mut p = PeerFacts::default();
        unknown(&mut p);
        path.apply(
            &mut p,
            &["[::ffff:192.0.2.2]:51820".parse().expect("mapped address")],
        );
        p
    }

    #[test]
    fn sessions_add_up_per_peer_and_the_latest_handshake_gives_the_rtt() {
        let window = Snapshot {
            wg_sessions: vec![
                session(1, "192.0.2.2:51820", 1000, 950),
                // A rekey: the peer's next session, from the same endpoint.
                session(2, "192.0.2.2:51820", 1000, 1000),
                // From another address, but the index of a handshake sent to the peer.
                session(3, "198.51.100.7:4000", 100, 50),
                // Another peer's.
                session(4, "192.0.2.3:51820", 1000, 0),
            ],
            wg_handshakes: vec![
                hs(3, Role::Initiator, 60 * S, Some(60 * S + 50_000_000)),
                hs(5, Role::Responder, 90 * S, Some(90 * S + 48_000_000)),
                // Unanswered: three within the last 30 s (one too young to judge), two older.
                hs(6, Role::Initiator, 92 * S, None),
                hs(7, Role::Initiator, 95 * S, None),
                hs(8, Role::Initiator, 119 * S + S / 2, None),
                hs(9, Role::Responder, 80 * S, None),
                hs(10, Role::Responder, 91 * S, None),
            ],
            mono_ns: 120 * S,
            since_mono_ns: 10 * S,
            ..Snapshot::default()
        };
        let p = facts(&window, vec![2]);
        assert_eq!(
            (p.underlay_expected, p.underlay_received, p.underlay_lost),
            (2100, 2000, 100)
        );
        assert!((p.underlay_loss_percent - 100.0 * 100.0 / 2100.0).abs() < 1e-9);
        assert_eq!((p.rx_sessions, p.rx_counter), (3, 100));
        assert_eq!((p.rtt_ms, p.rtt_age_s), (48.0, 29));
        assert_eq!(
            (
                p.initiations_unanswered,
                p.responses_unconfirmed,
                p.handshakes_answered
            ),
            (2, 1, 1)
        );
        // Sessions on an interface that is not a watched underlay do not count.
        let p = facts(&window, vec![3]);
        assert_eq!((p.underlay_expected, p.underlay_loss_percent), (0, -1.0));
    }
}

//! Per-peer WireGuard series: handshake ages, and the path series: the underlay loss of what each peer sent this host, the
//! messages it sent, and the latest handshake's round trip (facts of the last window,
//! `peer.underlay_*`, `peer.rtt_ms`). A fleet's agents together give the mesh's loss
//! matrix: each measures its inbound direction.
//!
//! Bounded by `--max-path-peers` per interface: beyond it the lossiest peers (then the
//! busiest) keep their series and the rest are counted in
//! `netdoctor_wireguard_path_peers_omitted`.

use std::cmp::Ordering;

use super::out::Out;
use crate::daemon::state::View;
use crate::facts::PeerFacts;

/// Puts the path series of every watched interface's measured peers, at most `cap` each.
pub(super) fn peer_paths(out: &mut Out, view: &View, cap: usize) {
    for v in view.interfaces.values().filter(|v| v.watched) {
        let Some(facts) = &v.facts else { continue };
        let iface = v.name.as_str();
        let mut measured: Vec<&PeerFacts> = facts
            .peers
            .iter()
            .filter(|p| p.underlay_expected >= 0)
            .collect();
        if measured.is_empty() {
            continue;
        }
        measured.sort_by(|a, b| worst_first(a, b));
        let omitted = measured.len().saturating_sub(cap);
        out.put(
            "netdoctor_wireguard_path_peers_omitted",
            &[iface],
            omitted as f64,
        );
        for p in measured.into_iter().take(cap) {
            let labels = [iface, p.name.as_str()];
            out.put(
                "netdoctor_wireguard_peer_underlay_messages",
                &labels,
                p.underlay_expected as f64,
            );
            if p.underlay_loss_percent >= 0.0 {
                out.put(
                    "netdoctor_wireguard_peer_underlay_loss_ratio",
                    &labels,
                    p.underlay_loss_percent / 100.0,
                );
            }
            if p.rtt_ms >= 0.0 {
                out.put(
                    "netdoctor_wireguard_peer_handshake_rtt_seconds",
                    &labels,
                    p.rtt_ms / 1000.0,
                );
            }
        }
    }
}

/// The highest loss first, then the most messages, then by key (a stable order).
pub(crate) fn worst_first(a: &PeerFacts, b: &PeerFacts) -> Ordering {
    b.underlay_loss_percent
        .total_cmp(&a.underlay_loss_percent)
        .then(b.underlay_expected.cmp(&a.underlay_expected))
        .then(a.name.cmp(&b.name))
}

/// Puts each interface's peer count and handshake ages (per peer only while the interface has
/// at most `max_peer_labels` peers); a peer never handshaken counts from the agent's start.
pub(super) fn handshakes(out: &mut Out, view: &View, uptime_s: i64, max_peer_labels: usize) {
    for (iface, peers) in &view.handshakes {
        out.put("netdoctor_wireguard_peers", &[iface], peers.len() as f64);
        // A peer that never completed a handshake is as stale as the agent is old.
        let age = |a: i64| if a < 0 { uptime_s } else { a };
        if let Some(max) = peers.iter().map(|(_, a)| age(*a)).max() {
            out.put(
                "netdoctor_wireguard_handshake_age_max_seconds",
                &[iface],
                max as f64,
            );
        }
        if peers.len() <= max_peer_labels {
            for (peer, a) in peers {
                out.put(
                    "netdoctor_wireguard_handshake_age_seconds",
                    &[iface, peer],
                    age(*a) as f64,
                );
            }
        }
    }
}

//! The WireGuard peers' paths a window's sample keeps in the history: every peer whose path
//! the underlay measured, the lossiest first, at most `--max-path-peers` (as the metrics).

use crate::daemon::metrics::wg_path::worst_first;
use crate::daemon::store::PeerPathSample;
use crate::facts::PeerFacts;

/// The measured paths among `peers`, the lossiest first, at most `cap`.
pub(super) fn peer_paths(peers: &[PeerFacts], cap: usize) -> Vec<PeerPathSample> {
    let mut measured: Vec<&PeerFacts> = peers.iter().filter(|p| p.underlay_expected >= 0).collect();
    measured.sort_by(|a, b| worst_first(a, b));
    measured
        .into_iter()
        .take(cap)
        .map(|p| PeerPathSample {
            peer: p.name.clone(),
            endpoint: p.endpoint.clone(),
            expected: p.underlay_expected,
            lost: p.underlay_lost,
            loss_percent: p.underlay_loss_percent,
            rtt_ms: p.rtt_ms,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(name: &str, expected: i64, lost: i64) -> PeerFacts {
        PeerFacts {
            name: name.into(),
            endpoint: "192.0.2.2:51820".into(),
            underlay_expected: expected,
            underlay_lost: lost,
            underlay_loss_percent: if expected > 0 {
                lost as f64 * 100.0 / expected as f64
            } else {
                -1.0
            },
            rtt_ms: 12.5,
            ..PeerFacts::default()
        }
    }

    #[test]
    fn measured_paths_are_kept_lossiest_first_up_to_the_cap() {
        let peers = [
            peer("clean=", 1000, 0),
            peer("lossy=", 1000, 50),
            peer("unmeasured=", -1, 0),
            peer("quiet=", 0, 0),
        ];
        let kept = peer_paths(&peers, 2);
        let names: Vec<&str> = kept.iter().map(|p| p.peer.as_str()).collect();
        assert_eq!(names, ["lossy=", "clean="]);
        assert_eq!(
            kept[0],
            PeerPathSample {
                peer: "lossy=".into(),
                endpoint: "192.0.2.2:51820".into(),
                expected: 1000,
                lost: 50,
                loss_percent: 5.0,
                rtt_ms: 12.5,
            }
        );
        assert_eq!(peer_paths(&peers, 256).len(), 3);
        assert!(peer_paths(&peers, 0).is_empty());
    }
}

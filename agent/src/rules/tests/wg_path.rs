//! The WireGuard path's rules: `wireguard.underlay_loss` (warning from 1 %, critical from
//! 5 %), `wireguard.one_way_path` (both directions), and `tcp.cubic_on_lossy_path` citing
//! the measured underlay loss; each beside the twins that must stay quiet.

use super::healthy;
use crate::facts::{Facts, PeerFacts};
use crate::rules::finding::{Finding, Severity};
use crate::rules::{evaluate, RuleSet};

/// A peer whose path the data plane measured: 10,000 messages expected, `lost` of them lost.
fn measured(lost: i64) -> PeerFacts {
    let p = &healthy().peers[0];
    PeerFacts {
        underlay_expected: 10_000,
        underlay_received: 10_000 - lost,
        underlay_lost: lost,
        underlay_loss_percent: lost as f64 / 100.0,
        rx_sessions: 1,
        rx_counter: 123_456,
        tx_data_packets: 500,
        rtt_ms: 48.2,
        rtt_age_s: 12,
        handshakes_answered: 1,
        ..p.clone()
    }
}

fn with_peer(p: PeerFacts) -> Facts {
    let mut f = healthy();
    f.traffic.duration_s = 5.0;
    f.peers = vec![p];
    f
}

fn findings(f: &Facts, id: &str) -> Vec<Finding> {
    let rules = RuleSet::builtin().expect("built-in rules load");
    evaluate(&rules, &f.to_json())
        .into_iter()
        .filter(|x| x.id == id)
        .collect()
}

#[test]
fn underlay_loss_is_a_warning_from_1_percent_and_critical_from_5() {
    let id = "wireguard.underlay_loss";
    for (lost, severity) in [
        (100, Some(Severity::Warning)),
        (499, Some(Severity::Warning)),
        (500, Some(Severity::Critical)),
        (2000, Some(Severity::Critical)),
        (99, None),
        (0, None),
    ] {
        let found = findings(&with_peer(measured(lost)), id);
        assert_eq!(
            found.first().map(|x| x.severity),
            severity,
            "{lost} of 10,000 lost: {found:?}"
        );
    }
    let f = &findings(&with_peer(measured(510)), id)[0];
    assert_eq!(f.evidence["loss_percent"], serde_json::json!(5.1));
    assert_eq!(f.evidence["expected"], serde_json::json!(10_000));
    assert_eq!(f.evidence["received"], serde_json::json!(9_490));
    assert_eq!(f.evidence["peer"], serde_json::json!("peerkey="));
    assert_eq!(f.evidence["endpoint"], serde_json::json!("192.0.2.2:51820"));
    assert!(f.summary.contains("5.1 %") && f.summary.contains("9,490 of 10,000"));

    // Twins: too few messages lost to tell, not measured, another tunnel.
    let few = PeerFacts {
        underlay_expected: 400,
        underlay_received: 391,
        underlay_lost: 9,
        underlay_loss_percent: 2.25,
        ..measured(0)
    };
    assert!(findings(&with_peer(few), id).is_empty());
    let unknown = PeerFacts {
        underlay_expected: -1,
        underlay_received: -1,
        underlay_lost: -1,
        underlay_loss_percent: -1.0,
        ..measured(0)
    };
    assert!(findings(&with_peer(unknown), id).is_empty());
    let mut vxlan = with_peer(measured(1000));
    vxlan.tunnel.kind = "vxlan".into();
    assert!(findings(&vxlan, id).is_empty());
}

#[test]
fn one_way_paths_in_either_direction() {
    let id = "wireguard.one_way_path";
    // This host answers the peer's initiations; no data ever follows.
    let outbound = PeerFacts {
        responses_unconfirmed: 3,
        handshakes_answered: 0,
        ..measured(0)
    };
    let f = findings(&with_peer(outbound.clone()), id);
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0].severity, Severity::Critical);
    assert_eq!(
        f[0].evidence["broken_direction"],
        serde_json::json!("outbound")
    );
    // This host keeps sending; nothing comes back and its initiations go unanswered.
    let inbound = PeerFacts {
        initiations_unanswered: 2,
        handshakes_answered: 0,
        underlay_expected: 0,
        underlay_received: 0,
        underlay_lost: 0,
        underlay_loss_percent: -1.0,
        handshake_age_s: 40,
        ..measured(0)
    };
    let f = findings(&with_peer(inbound.clone()), id);
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(
        f[0].evidence["broken_direction"],
        serde_json::json!("inbound")
    );
    assert!(
        f[0].summary.contains("500 data messages"),
        "{}",
        f[0].summary
    );

    // Twins: one unanswered handshake, a handshake answered meanwhile, data arriving, a
    // session already expired (wireguard.handshake_stale's case), nothing sent.
    for (what, p) in [
        (
            "one response",
            PeerFacts {
                responses_unconfirmed: 1,
                ..outbound.clone()
            },
        ),
        (
            "answered too",
            PeerFacts {
                handshakes_answered: 1,
                ..outbound.clone()
            },
        ),
        (
            "one initiation",
            PeerFacts {
                initiations_unanswered: 1,
                ..inbound.clone()
            },
        ),
        (
            "data arrives",
            PeerFacts {
                underlay_received: 30,
                ..inbound.clone()
            },
        ),
        (
            "expired session",
            PeerFacts {
                handshake_age_s: 200,
                ..inbound.clone()
            },
        ),
        (
            "nothing sent",
            PeerFacts {
                tx_data_packets: 0,
                ..inbound.clone()
            },
        ),
        ("healthy", measured(0)),
    ] {
        let f = findings(&with_peer(p), id);
        assert!(f.is_empty(), "{what}: {f:?}");
    }
}

#[test]
fn cubic_on_a_lossy_path_cites_the_measured_underlay_loss() {
    let id = "tcp.cubic_on_lossy_path";
    let mut f = healthy();
    f.flows[0].cc = "cubic".into();
    f.flows[0].retrans_ratio = 0.05;
    f.flows[0].retransmits = 250;
    f.flows[0].srtt_ms = 50.0;
    f.flows[0].underlay_loss_percent = -1.0;
    let plain = findings(&f, id);
    assert_eq!(plain.len(), 1);
    assert!(
        !plain[0].summary.contains("underlay"),
        "{}",
        plain[0].summary
    );
    assert_eq!(
        plain[0].evidence["underlay_loss_percent"],
        serde_json::json!(-1.0)
    );
    f.flows[0].underlay_loss_percent = 4.83;
    let cited = &findings(&f, id)[0];
    assert!(
        cited
            .summary
            .contains("underlay loses 4.8 % of what the WireGuard peer")
            && cited.fix.contains("the tunnel underlay itself loses 4.8 %"),
        "{cited:?}"
    );
}

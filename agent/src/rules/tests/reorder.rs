//! `tcp.reordering` against loss (issue 32): retransmissions the receivers reported as
//! needless (DSACK) or reordering the connections detected make `tcp.reordering`, which names
//! the per-packet balancing on the interface (a balance-rr bond, a multipath route), and
//! `tcp.high_retransmits` and `tcp.cubic_on_lossy_path` count only the loss; the same
//! retransmissions without DSACKs stay loss.

use super::{healthy, ids};
use crate::facts::Facts;
use crate::rules::finding::Finding;
use crate::rules::{evaluate, RuleSet};

const ID: &str = "tcp.reordering";

fn finding(facts: &Facts, id: &str) -> Option<Finding> {
    let rules = RuleSet::builtin().expect("rules");
    evaluate(&rules, &facts.to_json())
        .into_iter()
        .find(|f| f.id == id)
}

/// A cubic bulk transfer retransmitting 6 % of its segments on a plain veth; `spurious` of
/// every ten retransmissions its receiver reported as needless, and with any, the reordering
/// the connection detected.
fn retransmitting(spurious: i64) -> Facts {
    let mut f = healthy();
    f.iface.name = "veth0".into();
    f.iface.kind = "veth".into();
    f.iface.mtu = 1500;
    f.iface.is_tunnel = false;
    f.tunnel = Default::default();
    f.peers.clear();
    f.host.cc_default = "cubic".into();
    let (retrans, reord, metric) = (600, if spurious > 0 { 25 } else { 0 }, 3 + spurious * 3);
    let t = &mut f.traffic;
    t.tcp_segments = 10_000;
    t.tcp_retransmits = retrans;
    t.tcp_retrans_ratio = 0.06;
    t.tcp_spurious_retransmits = retrans * spurious / 10;
    t.tcp_spurious_ratio = t.tcp_spurious_retransmits as f64 / 10_000.0;
    t.tcp_spurious_percent = spurious as f64 * 10.0;
    t.tcp_reord_seen = reord;
    t.tcp_reordering_connections = i64::from(reord > 0);
    t.tcp_reordering_max = metric;
    let flow = &mut f.flows[0];
    flow.cc = "cubic".into();
    flow.data_segs_sent = 10_000;
    flow.retransmits = retrans;
    flow.retrans_ratio = 0.06;
    flow.spurious_retransmits = retrans * spurious / 10;
    flow.spurious_ratio = flow.spurious_retransmits as f64 / 10_000.0;
    flow.reord_seen = reord;
    flow.reordering = metric;
    flow.srtt_ms = 10.0;
    f
}

#[test]
fn spurious_retransmissions_are_reordering_not_loss() {
    let facts = retransmitting(9);
    assert_eq!(ids(&facts), vec![ID.to_owned()]);
    let f = finding(&facts, ID).expect("reordering finding");
    assert!(
        f.summary
            .contains("540 of its 600 retransmissions (90.0 %) were needless")
            && f.summary.contains("detected reordering 25 times")
            && f.summary.contains("up to 30 segments out of order")
            && f.summary
                .contains("Nothing on this host spreads one connection"),
        "{}",
        f.summary
    );
    assert_eq!(f.evidence["spurious_percent"], serde_json::json!(90.0));
    assert_eq!(f.evidence["loss_percent"], serde_json::json!(0.6));
    assert_eq!(f.evidence["reordering_metric"], serde_json::json!(30));
    assert!(f.fix.contains("per-flow hashing"), "{}", f.fix);

    // Healthy twin: the same retransmissions without a DSACK are loss.
    let lossy = retransmitting(0);
    let found = ids(&lossy);
    assert!(!found.contains(&ID.to_owned()), "{found:?}");
    assert!(
        found.contains(&"tcp.high_retransmits".to_owned())
            && found.contains(&"tcp.cubic_on_lossy_path".to_owned()),
        "{found:?}"
    );
    // Half of them needless, the rest (3 %) lost: loss is still loss, and not mostly spurious.
    let half = retransmitting(5);
    let found = ids(&half);
    assert!(!found.contains(&ID.to_owned()), "{found:?}");
    assert!(
        found.contains(&"tcp.high_retransmits".to_owned()),
        "{found:?}"
    );
    let f = finding(&half, "tcp.high_retransmits").expect("loss finding");
    assert!(
        f.summary.contains("300 of the 600 needlessly") && f.summary.contains("3.0 % were lost"),
        "{}",
        f.summary
    );
    assert_eq!(f.evidence["loss_percent"], serde_json::json!(3.0));
}

#[test]
fn reordering_without_retransmissions_is_named() {
    let mut facts = retransmitting(0);
    let t = &mut facts.traffic;
    (
        t.tcp_retransmits,
        t.tcp_retrans_ratio,
        t.tcp_spurious_percent,
    ) = (0, 0.0, -1.0);
    (
        t.tcp_reord_seen,
        t.tcp_reordering_connections,
        t.tcp_reordering_max,
    ) = (40, 2, 12);
    (facts.flows[0].retransmits, facts.flows[0].retrans_ratio) = (0, 0.0);
    assert_eq!(ids(&facts), vec![ID.to_owned()]);
    let f = finding(&facts, ID).expect("reordering finding");
    assert!(
        f.summary
            .contains("nothing was retransmitted; 2 local connection(s)"),
        "{}",
        f.summary
    );
    // Twins: a few reordering events, or some beside heavy loss, are not this finding.
    facts.traffic.tcp_reord_seen = 4;
    assert!(ids(&facts).is_empty(), "{:?}", ids(&facts));
    let mut lossy = retransmitting(0);
    lossy.traffic.tcp_reord_seen = 40;
    lossy.traffic.tcp_reordering_max = 12;
    assert!(!ids(&lossy).contains(&ID.to_owned()));
}

#[test]
fn reordering_names_the_balance_rr_bond_or_the_multipath_route() {
    let mut bond = retransmitting(9);
    bond.iface.name = "bond0".into();
    bond.iface.kind = "bond".into();
    bond.iface.bond_mode = "balance-rr".into();
    bond.iface.bond_members = vec!["eth0".into(), "eth1".into()];
    let f = finding(&bond, ID).expect("reordering finding");
    assert!(
        f.summary
            .contains("bond0 is a bond in balance-rr over 2 links: it sends consecutive packets"),
        "{}",
        f.summary
    );
    assert!(
        f.fix
            .contains("ip link set dev bond0 type bond mode balance-xor xmit_hash_policy layer3+4"),
        "{}",
        f.fix
    );
    assert_eq!(
        f.evidence["bond_members"],
        serde_json::json!(["eth0", "eth1"])
    );
    // Twin: the same bond in active-backup, no DSACK, is not reordering.
    let mut backup = retransmitting(0);
    backup.iface.bond_mode = "active-backup".into();
    assert!(!ids(&backup).contains(&ID.to_owned()));

    let mut ecmp = retransmitting(9);
    ecmp.ecmp.present = true;
    ecmp.ecmp.route = "10.9.0.0/24".into();
    ecmp.ecmp.family = "ipv4".into();
    ecmp.ecmp.nexthops = vec!["wg0".into(), "wg1".into()];
    ecmp.ecmp.hash_policy = 0;
    let f = finding(&ecmp, ID).expect("reordering finding");
    assert!(
        f.summary.contains(
            "The multipath route 10.9.0.0/24 spreads it over 2 nexthops \
             (net.ipv4.fib_multipath_hash_policy = 0)"
        ),
        "{}",
        f.summary
    );
    assert!(
        f.fix
            .contains("sysctl -w net.ipv4.fib_multipath_hash_policy=1"),
        "{}",
        f.fix
    );
}

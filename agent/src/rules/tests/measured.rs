//! The rules decided from what the data plane and the link counters measured, and from a
//! gateway's configuration: bonds' members, multipath routes, source NAT (issue 16).

use super::healthy;
use crate::facts::Facts;
use crate::rules::finding::Severity;
use crate::rules::{evaluate, RuleSet};

/// A balance-xor bond of two members that sent 400 Mbit/s, `busiest` percent on one.
pub(super) fn bond_carrying(f: &mut Facts, policy: &str, busiest: f64) {
    f.tunnel.underlay_iface = "bond0".into();
    f.tunnel.underlay_bond_mode = "balance-xor".into();
    f.tunnel.underlay_bond_policy = policy.into();
    f.tunnel.underlay_bond_members = ["m0", "m1"]
        .map(|name| crate::config::bond::MemberTraffic {
            name: name.into(),
            ..Default::default()
        })
        .to_vec();
    f.tunnel.underlay_bond_tx_bytes = 150_000_000;
    f.tunnel.underlay_bond_busiest = "m1".into();
    f.tunnel.underlay_bond_busiest_percent = busiest;
    f.tunnel.underlay_bond_rate_mbps = 400.0;
}

/// An ECMP route over wg0 and wg1 with hash policy `policy`, 8 flows, `busiest` percent of
/// the bytes on wg0.
pub(super) fn ecmp(policy: i64, busiest: f64) -> crate::facts::ecmp::EcmpFacts {
    crate::facts::ecmp::EcmpFacts {
        present: true,
        route: "10.99.0.0/24".into(),
        family: "ipv4".into(),
        nexthops: vec!["wg0".into(), "wg1".into()],
        hash_policy: policy,
        l4_hashing: policy == 1,
        bytes: 8_000_000,
        flows: 8,
        busiest: "wg0".into(),
        busiest_percent: busiest,
        busiest_weight_percent: 50.0,
        ..Default::default()
    }
}

/// A road-warrior gateway's uplink eth1 where `leaked` flows from 10.250.0.0/24 left
/// untranslated and `answered` of them got replies.
pub(super) fn nat(leaked: i64, answered: i64) -> crate::facts::nat::NatFacts {
    crate::facts::nat::NatFacts {
        uplink: "eth1".into(),
        sources: vec!["10.250.0.0/24".into()],
        private_sources: vec!["10.250.0.0/24".into()],
        uncovered_source: "10.250.0.0/24".into(),
        leaked_packets: leaked * 5,
        leaked_flows: leaked,
        answered_flows: answered,
        leaked_source: if leaked > 0 {
            "10.250.0.0/24".into()
        } else {
            String::new()
        },
        leaked_family: if leaked > 0 {
            "ipv4".into()
        } else {
            String::new()
        },
        ..Default::default()
    }
}

#[test]
fn the_bond_finding_says_what_each_member_carried_or_that_it_measured_none() {
    let rules = RuleSet::builtin().expect("rules");
    let bond = |facts: &Facts| {
        evaluate(&rules, &facts.to_json())
            .into_iter()
            .find(|f| f.id == "bond.single_link_hash")
    };
    let mut measured = healthy();
    bond_carrying(&mut measured, "layer2+3", 99.7);
    let f = bond(&measured).expect("finding from the measured spread");
    assert!(
        f.summary.contains("member m1 carried 99.7 % of 400 Mbit/s"),
        "{}",
        f.summary
    );
    assert_eq!(
        f.evidence.get("busiest_member"),
        Some(&serde_json::json!("m1"))
    );
    let members = f.evidence.get("members").and_then(|m| m.as_array());
    assert_eq!(members.map(Vec::len), Some(2));
    // No traffic: the policy decides, and the summary says so.
    let mut idle = healthy();
    bond_carrying(&mut idle, "layer2", 0.0);
    idle.tunnel.underlay_bond_tx_bytes = 0;
    let f = bond(&idle).expect("finding from the policy");
    assert!(
        f.summary.contains("decided from the hash policy"),
        "{}",
        f.summary
    );
    // Traffic spread over both members beats a layer2 policy.
    let mut spread = healthy();
    bond_carrying(&mut spread, "layer2", 52.0);
    assert!(bond(&spread).is_none());
    // A layer3+4 bond already hashes ports: one tunnel on one member is one UDP flow, not
    // the bond's doing.
    let mut one_flow = healthy();
    bond_carrying(&mut one_flow, "layer3+4", 99.7);
    assert!(bond(&one_flow).is_none());
}

#[test]
fn the_nat_finding_names_the_uplink_and_gives_both_fixes() {
    let mut facts = healthy();
    facts.nat = nat(2, 0);
    let rules = RuleSet::builtin().expect("rules");
    let found = evaluate(&rules, &facts.to_json());
    let f = found
        .iter()
        .find(|f| f.id == "nat.masquerade_missing")
        .expect("finding");
    assert_eq!(f.severity, Severity::Critical);
    assert!(f.summary.contains("uplink eth1"), "{}", f.summary);
    assert!(
        f.fix.contains(
            "nft add rule ip nat postrouting ip saddr 10.250.0.0/24 oifname \"eth1\" masquerade"
        ) && f
            .fix
            .contains("iptables -t nat -A POSTROUTING -s 10.250.0.0/24 -o eth1 -j MASQUERADE"),
        "{}",
        f.fix
    );
}

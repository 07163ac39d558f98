//! The evaluation budget: rules whose comprehensions multiply are refused when loaded if the
//! lists written in them already cost too much, and stopped at the budget, naming the rule,
//! when the facts make them too costly; rules as people write them, and the built-in ones on
//! a busy host, stay well within it.

use std::time::{Duration, Instant};

use super::healthy;
use super::{load, rule_file};
use crate::facts::{Facts, FlowFacts, PeerFacts};
use crate::rules::rule::Rule;
use crate::rules::{evaluate_partial, RuleSet, MAX_TIME};

/// A host with `flows` connections over `peers` tunnel peers.
fn busy(flows: usize, peers: usize) -> Facts {
    let mut f = healthy();
    f.flows = (0..flows)
        .map(|i| FlowFacts {
            name: format!(
                "10.0.{}.{}:{} -> 10.1.0.1:443",
                i / 250,
                i % 250,
                40000 + i % 20000
            ),
            cc: if i % 2 == 0 { "cubic" } else { "bbr" }.into(),
            data_segs_sent: 5000,
            retransmits: 2,
            retrans_ratio: 0.0004,
            pmtu: 1440,
            mss: 1388,
            throughput_bps: 5e7,
            ..FlowFacts::default()
        })
        .collect();
    f.peers = (0..peers)
        .map(|i| PeerFacts {
            name: format!("peer{i}="),
            endpoint: format!("192.0.2.{}:51820", i % 250),
            family: "ipv4".into(),
            handshake_age_s: 30,
            tx_bytes_delta: 10_000,
            rx_bytes_delta: 10_000,
            path_mtu: 1500,
            ..PeerFacts::default()
        })
        .collect();
    f
}

/// The errors of checking the rule (`scope`, `condition`) against `facts`, and how long it
/// took.
fn check(scope: &str, condition: &str, facts: &Facts) -> (Vec<String>, Duration) {
    let set = load(&[("x.toml", rule_file("site.costly", scope, condition))]).expect("loads");
    let started = Instant::now();
    let errors = set.check(&facts.to_json());
    (
        errors.into_iter().map(|e| e.to_string()).collect(),
        started.elapsed(),
    )
}

/// `[0, 1, ..., 9]`.
const TEN: &str = "[0,1,2,3,4,5,6,7,8,9]";

#[test]
fn comprehensions_over_written_lists_past_the_budget_are_refused_when_loaded() {
    // 160 characters, a million elements: 10.7 s and 600 MB per evaluation, unchecked.
    let mut nested = "a".to_owned();
    for v in ["f", "e", "d", "c", "b", "a"] {
        nested = format!("{TEN}.map({v},{nested})");
    }
    let condition = format!("{nested}.size() > 0");
    let e = Rule::parse("x.toml", &rule_file("site.costly", "interface", &condition))
        .expect_err("refused");
    assert!(
        e.message.contains("takes at least")
            && e.message
                .contains("more than the 1,000,000 a rule may (its evaluation budget"),
        "{e}"
    );
    // Its healthy twin: three levels, a thousand elements.
    let mut small = "a".to_owned();
    for v in ["c", "b", "a"] {
        small = format!("{TEN}.map({v},{small})");
    }
    let (errors, _) = check("interface", &format!("{small}.size() > 0"), &healthy());
    assert!(errors.is_empty(), "{errors:?}");
}

#[test]
fn comprehensions_past_the_budget_on_the_facts_are_stopped_naming_the_rule() {
    // Every pair of 400 flows: 160,000 steps of a dozen operations. Which limit comes first
    // depends on the machine: each step copies a connection, whose cost varies several-fold
    // between machines (docs/rules.md).
    let pairs = "flows.exists(a, flows.exists(b, a.name == b.name && a.cc != b.cc))";
    let (errors, took) = check("interface", pairs, &busy(400, 1));
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        [
            "more than 1,000,000 operations",
            "more than 1000 ms of CPU time"
        ]
        .iter()
        .any(|limit| errors[0].contains(&format!(
            "rule site.costly exceeds its evaluation budget ({limit}"
        ))),
        "{errors:?}"
    );
    assert!(took < MAX_TIME * 2, "stopped after {took:?}");

    // Copies of the facts it builds: two of each of 5,000 flows of about 30 cells.
    let (errors, _) = check(
        "interface",
        "flows.map(f, [f, f]).size() > 0",
        &busy(5_000, 1),
    );
    assert!(
        errors.len() == 1 && errors[0].contains("values of more than 200,000 cells"),
        "{errors:?}"
    );

    // Per flow, the budget covers every item: 300 flows of 300 steps.
    let per_flow = "flows.exists(g, g.name == flow.name && g.cc != flow.cc)";
    let (errors, _) = check("flow", per_flow, &busy(600, 1));
    assert!(
        errors.len() == 1 && errors[0].contains("rule site.costly exceeds its evaluation budget"),
        "{errors:?}"
    );
}

/// The agent and `diagnose` skip a rule past its budget (logged with its id) and keep
/// every other rule's findings.
#[test]
fn a_rule_past_its_budget_leaves_the_other_rules_findings() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let pairs = "flows.exists(a, flows.exists(b, a.name == b.name && a.cc != b.cc))";
    std::fs::write(
        dir.path().join("x.toml"),
        rule_file("site.costly", "interface", pairs),
    )
    .expect("write");
    let rules = RuleSet::with_user_dir(dir.path()).expect("rules load");
    let mut facts = busy(400, 1);
    facts.iface.mtu = 1480; // mtu.tunnel_exceeds_underlay
    let e = evaluate_partial(&rules, &facts.to_json(), &[]);
    let ids: Vec<&str> = e.findings.iter().map(|f| f.id.as_str()).collect();
    assert_eq!(ids, ["mtu.tunnel_exceeds_underlay"], "{e:?}");
}

/// Rules people write stay within the budget on a busy host: every peer against every
/// flow, every pair of a few hundred flows, each flow against the others. (Each step copies
/// its connection: 50 peers against 1,000 of them, 50,000 copies, took 0.6-1.1 s of CPU on
/// a 2-vCPU Intel Xeon, debug and release alike; docs/rules.md gives the scale.)
#[test]
fn nested_comprehensions_over_a_busy_host_stay_within_the_budget() {
    let facts = busy(1_000, 20);
    for (scope, condition) in [
        (
            "interface",
            "peers.exists(p, flows.exists(f, f.name.endsWith(p.endpoint)))",
        ),
        (
            "interface",
            "peers.all(p, flows.filter(f, f.cc == 'bbr').size() < 10000)",
        ),
        ("tunnel", "flows.exists(f, f.name.contains(peer.name))"),
        (
            "interface",
            "flows.map(f, f.throughput_bps).exists(t, t > 1e9)",
        ),
    ] {
        let (errors, _) = check(scope, condition, &facts);
        assert!(errors.is_empty(), "{condition}: {errors:?}");
    }
    let pairs = "flows.exists(a, flows.exists(b, a.name == b.name && a.cc != b.cc))";
    let (errors, _) = check("interface", pairs, &busy(200, 1));
    assert!(errors.is_empty(), "{errors:?}");
    let per_flow = "flows.exists(g, g.name == flow.name && g.cc != flow.cc)";
    let (errors, _) = check("flow", per_flow, &busy(200, 1));
    assert!(errors.is_empty(), "{errors:?}");
}

/// The built-in rules on 5,000 connections and 200 peers: nowhere near the budget.
#[test]
fn builtin_rules_stay_within_the_budget_on_a_busy_host() {
    let rules = RuleSet::builtin().expect("built-in rules");
    let mut facts = busy(5_000, 200);
    // Every flow stalled and lossy: the rules that filter flows keep them all.
    for f in &mut facts.flows {
        f.full_size_retransmits = 10;
        f.retrans_ratio = 0.2;
        f.throughput_bps = 1000.0;
    }
    facts.probe.ran = false;
    let errors = rules.check(&facts.to_json());
    assert!(errors.is_empty(), "{errors:?}");
    let found = crate::rules::evaluate(&rules, &facts.to_json());
    let stalled = found
        .iter()
        .find(|f| f.id == "pmtu.blackhole")
        .map(|f| f.evidence["stalled_connections"].clone());
    assert_eq!(stalled, Some(serde_json::json!(5000)), "{found:?}");
}

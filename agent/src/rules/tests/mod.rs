//! The built-in rules against crafted facts: each fires on its situation and stays quiet
//! on a healthy twin.

use crate::facts::{Facts, FlowFacts, PeerFacts};
use crate::rules::finding::Severity;
use crate::rules::{evaluate, RuleError, RuleSet};

mod blackhole_family;
mod budget;
mod charging;
mod critical_when;
mod daemon_cpu;
mod documented;
mod files;
mod layer2;
mod limits;
mod measured;
mod reorder;
mod throughput;
mod units;
mod wg_path;

use measured::{bond_carrying, ecmp, nat};

/// A healthy WireGuard tunnel over a 1500-byte IPv4 underlay at the optimal MTU.
pub(super) fn healthy() -> Facts {
    let mut f = Facts::default();
    f.iface.name = "wg0".into();
    f.iface.kind = "wireguard".into();
    f.iface.mtu = 1440;
    f.iface.is_tunnel = true;
    f.iface.lan_mtu = 1500;
    f.tunnel.present = true;
    f.tunnel.kind = "wireguard".into();
    f.tunnel.family = "ipv4".into();
    f.tunnel.overhead_expected = 60;
    f.tunnel.overhead_measured = 60;
    f.tunnel.underlay_iface = "eth0".into();
    f.tunnel.underlay_mtu = 1500;
    f.tunnel.path_mtu = 1500;
    f.tunnel.effective_underlay_mtu = 1500;
    f.tunnel.max_mtu = 1440;
    f.peers = vec![PeerFacts {
        name: "peerkey=".into(),
        endpoint: "192.0.2.2:51820".into(),
        family: "ipv4".into(),
        handshake_age_s: 30,
        tx_bytes_delta: 10_000,
        rx_bytes_delta: 10_000,
        path_mtu: 1500,
        ..PeerFacts::default()
    }];
    f.host.cc_default = "bbr".into();
    f.host.cc_available = vec!["reno".into(), "cubic".into(), "bbr".into()];
    f.host.bbr_available = true;
    f.host.ip_forward = true;
    f.host.mss_clamping = true;
    f.host.mss_clamp_covers = true;
    f.host.mss_clamp_rule =
        "nftables inet mssfix forward (forward): oifname \"wg0\" -> clamp mss to path mtu".into();
    f.traffic.mss_limit = 1400;
    f.traffic.tcp_segments = 10_000;
    f.flows = vec![FlowFacts {
        name: "10.0.0.1:40000 -> 10.0.0.2:443".into(),
        cc: "bbr".into(),
        data_segs_sent: 5000,
        retransmits: 2,
        retrans_ratio: 0.0004,
        pmtu: 1440,
        mss: 1388,
        throughput_bps: 5e7,
        remote_host: "10.0.0.2".into(),
        limit: "congestion".into(),
        limit_share: 0.9,
        busy_share: 0.9,
        idle_share: 0.1,
        path_rate_bps: 5e7,
        window_bytes: -1,
        ceiling_bps: -1.0,
        needed_window_bytes: -1,
        needed_buffer_bytes: -1,
        ..FlowFacts::default()
    }];
    f.probe.ran = true;
    f.probe.target = "192.0.2.2".into();
    f.probe.path_mtu = 1500;
    f
}

pub(super) fn ids(facts: &Facts) -> Vec<String> {
    let rules = RuleSet::builtin().expect("built-in rules load");
    evaluate(&rules, &facts.to_json())
        .into_iter()
        .map(|f| f.id)
        .collect()
}

/// A rule file whose condition is `condition`.
pub(super) fn rule_file(id: &str, scope: &str, condition: &str) -> String {
    format!(
        "id = \"{id}\"\nseverity = \"warning\"\nscope = \"{scope}\"\ncondition = {}\n\
         summary = \"s\"\nfix = \"f\"\n",
        toml::Value::String(condition.to_owned())
    )
}

/// The rules of `files` (name, text), loaded from a directory of their own.
pub(super) fn load(files: &[(&str, String)]) -> Result<RuleSet, Vec<RuleError>> {
    let dir = tempfile::tempdir().expect("temporary directory");
    for (name, text) in files {
        std::fs::write(dir.path().join(name), text).expect("write rule");
    }
    RuleSet::load_dir(dir.path())
}

fn fires(id: &str, change: impl FnOnce(&mut Facts)) {
    let mut facts = healthy();
    change(&mut facts);
    let found = ids(&facts);
    assert!(
        found.contains(&id.to_owned()),
        "{id} should fire, got {found:?}"
    );
}

#[test]
fn builtin_rules_are_valid() {
    let rules = RuleSet::builtin().expect("built-in rules load");
    assert!(rules.rules().len() >= 11);
    let errors = rules.check(&Facts::sample().to_json());
    assert!(errors.is_empty(), "{errors:?}");
}

#[test]
fn healthy_tunnel_has_no_findings() {
    assert_eq!(ids(&healthy()), Vec::<String>::new());
}

#[test]
fn each_rule_fires_on_its_situation() {
    fires("mtu.tunnel_exceeds_underlay", |f| f.iface.mtu = 1480);
    fires("mtu.tunnel_exceeds_underlay", |f| {
        // IPv6 endpoint: 80 bytes of overhead, so 1440 is 20 bytes too many.
        f.tunnel.family = "ipv6".into();
        f.tunnel.overhead_expected = 80;
        f.tunnel.max_mtu = 1420;
    });
    fires("mtu.tunnel_undersized", |f| {
        f.tunnel.effective_underlay_mtu = 9000;
        f.tunnel.max_mtu = 8940;
    });
    fires("mtu.tunnel_undersized", |f| f.iface.mtu = 1280);
    fires("mtu.underlay_fragmentation", |f| {
        f.tunnel.underlay_fragments = 12
    });
    fires("pmtu.blackhole", |f| {
        f.probe.blackhole = true;
        f.probe.path_mtu = 1400;
    });
    fires("pmtu.blackhole", |f| {
        f.probe.ran = false;
        f.flows[0].full_size_retransmits = 5;
        f.flows[0].retrans_ratio = 0.5;
        f.flows[0].throughput_bps = 300.0;
    });
    // From the configuration alone: no rule covers the tunnel, no SYN seen.
    fires("mss.clamp_missing", |f| {
        f.host.mss_clamping = false;
        f.host.mss_clamp_covers = false;
    });
    // A clamping rule for another interface does not help this one.
    fires("mss.clamp_missing", |f| {
        f.host.mss_clamp_covers = false;
        f.host.mss_clamp_rule.clear();
    });
    // A rule that seems to cover the tunnel but lets oversized SYNs through.
    fires("mss.clamp_missing", |f| {
        f.traffic.syn_mss_max = 1460;
        f.traffic.syn_mss_over_limit = 1;
    });
    fires("tcp.cubic_on_lossy_path", |f| {
        f.flows[0].cc = "cubic".into();
        f.flows[0].retrans_ratio = 0.03;
    });
    fires("tcp.high_retransmits", |f| {
        f.traffic.tcp_retransmits = 500;
        f.traffic.tcp_retrans_ratio = 0.05;
    });
    fires("forwarding.disabled", |f| {
        f.host.ip_forward = false;
        f.drops.forwarding = 7;
    });
    fires("rpfilter.drops", |f| {
        f.host.rp_filter = 1;
        f.drops.rpfilter = 3;
    });
    fires("wireguard.handshake_stale", |f| {
        f.peers[0].handshake_age_s = 600
    });
    fires("wireguard.handshake_stale", |f| {
        f.peers[0].initiations_sent = 3;
        f.peers[0].responses_received = 0;
    });
    fires("flows.table_evictions", |f| {
        f.traffic.rx_segments = 1000;
        f.traffic.flow_evictions = 5000;
        f.traffic.flow_table_capacity = 65_536;
    });
    fires("bond.single_link_hash", |f| {
        f.tunnel.underlay_bond_mode = "802.3ad".into();
        f.tunnel.underlay_bond_policy = "layer2".into();
    });
    // Measured: one member carried it all under a hash without ports.
    fires("bond.single_link_hash", |f| {
        bond_carrying(f, "layer2+3", 99.7);
    });
    fires("ecmp.single_path_hash", |f| f.ecmp = ecmp(0, 99.5));
    fires("nat.masquerade_missing", |f| f.nat = nat(3, 0));
}

#[test]
fn healthy_twins_stay_quiet() {
    // Situations that look alike but are fine.
    let quiet = |change: &dyn Fn(&mut Facts)| {
        let mut facts = healthy();
        change(&mut facts);
        let found = ids(&facts);
        assert!(found.is_empty(), "expected no findings, got {found:?}");
    };
    quiet(&|f| f.iface.mtu = 1420); // wg-quick's default: 20 bytes below the optimum
    quiet(&|f| f.iface.mtu = 1400); // 40 bytes, 2.8 %: not "far below"
    quiet(&|f| {
        f.flows[0].cc = "cubic".into(); // cubic without loss is fine
    });
    quiet(&|f| {
        f.flows[0].full_size_retransmits = 5; // loss, not a blackhole: data moves, probe says fine
        f.flows[0].retrans_ratio = 0.005;
    });
    quiet(&|f| {
        f.peers[0].handshake_age_s = -1; // never handshaken, but nothing to send
        f.peers[0].tx_bytes_delta = 0;
    });
    quiet(&|f| {
        f.peers[0].handshake_age_s = 900; // idle peer: old handshake, no traffic
        f.peers[0].tx_bytes_delta = 0;
    });
    quiet(&|f| {
        f.host.ip_forward = false; // a host, not a gateway: no drops, no finding
    });
    quiet(&|f| {
        f.traffic.syn_mss_max = 1380; // clamped: forwarded SYNs fit the tunnel
    });
    quiet(&|f| {
        f.host.mss_clamp_covers = false; // no clamp, but the LAN's MTU is the tunnel's
        f.iface.lan_mtu = 1440;
    });
    quiet(&|f| {
        f.tunnel.underlay_bond_mode = "802.3ad".into();
        f.tunnel.underlay_bond_policy = "layer3+4".into();
    });
    // Measured spread beats the policy: layer2, yet both members carry the traffic.
    quiet(&|f| bond_carrying(f, "layer2", 52.0));
    quiet(&|f| f.ecmp = ecmp(1, 55.0)); // layer 4 hashing spreads the flows
    quiet(&|f| f.ecmp = ecmp(0, 51.0)); // layer 3, but the flows spread (IPv6 flow labels)
    quiet(&|f| {
        f.ecmp = ecmp(0, 100.0); // one flow on one path: nothing to spread
        f.ecmp.flows = 1;
    });
    quiet(&|f| f.nat = nat(3, 3)); // site to site: the far side routes the range back
    quiet(&|f| f.nat = nat(0, 0)); // translated: nothing leaves with the tunnel's addresses
    quiet(&|f| {
        // A busy, full table that evicted nothing: every flow's figures are whole.
        f.traffic.rx_segments = 1000;
        f.traffic.flow_table_capacity = 65_536;
    });
    quiet(&|f| {
        // Evictions while this interface was idle: nothing of it was lost.
        f.traffic.flow_evictions = 5000;
        f.traffic.flow_table_capacity = 65_536;
    });
}

#[test]
fn findings_carry_evidence_and_a_rendered_fix() {
    let mut facts = healthy();
    facts.iface.mtu = 1480;
    let rules = RuleSet::builtin().expect("rules");
    let findings = evaluate(&rules, &facts.to_json());
    let f = findings
        .iter()
        .find(|f| f.id == "mtu.tunnel_exceeds_underlay")
        .expect("finding");
    assert_eq!(f.severity, Severity::Critical);
    assert!(f.fix.contains("ip link set dev wg0 mtu 1440"), "{}", f.fix);
    assert_eq!(f.evidence.get("tunnel_mtu"), Some(&serde_json::json!(1480)));
    assert!(
        f.summary.contains("1480") && f.summary.contains("60"),
        "{}",
        f.summary
    );
}

#[test]
fn user_rules_override_and_extend() {
    let dir = std::env::temp_dir().join(format!("nd-rules-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    std::fs::write(
        dir.join("custom.toml"),
        "id = \"site.small_mtu\"\nseverity = \"info\"\nscope = \"interface\"\n\
         condition = \"iface.mtu < 1500\"\nsummary = \"{{ iface.name }} is below 1500\"\nfix = \"nothing\"\n",
    )
    .expect("write");
    let rules = RuleSet::with_user_dir(&dir).expect("rules");
    let found: Vec<String> = evaluate(&rules, &healthy().to_json())
        .into_iter()
        .map(|f| f.summary)
        .collect();
    assert_eq!(found, vec!["wg0 is below 1500".to_owned()]);
    std::fs::remove_dir_all(&dir).expect("cleanup");
}

/// Facts a kernel without the packet data plane or drop reasons cannot give: the MTU rule
/// (configuration only) still fires; rules that need the missing facts are listed as not
/// evaluated with those facts named, not passed; rules decided before reaching them count.
#[test]
fn missing_facts_leave_rules_not_evaluated() {
    use crate::rules::evaluate_partial;
    let mut f = healthy();
    f.iface.mtu = 1500; // over a 1500 underlay: critical from configuration alone
    f.host.ip_forward = false; // forwarding.disabled then needs drops.forwarding
    let missing: Vec<String> = [
        "traffic",
        "drops.forwarding",
        "drops.rpfilter",
        "peer.initiations_sent",
        "peer.responses_received",
    ]
    .map(String::from)
    .to_vec();
    let rules = RuleSet::builtin().expect("built-in rules");
    let e = evaluate_partial(&rules, &f.to_json(), &missing);
    let found: Vec<&str> = e.findings.iter().map(|f| f.id.as_str()).collect();
    assert_eq!(found, ["mtu.tunnel_exceeds_underlay"], "{e:?}");
    let not: Vec<(&str, Vec<String>)> = e
        .not_evaluated
        .iter()
        .map(|n| (n.rule.as_str(), n.missing.clone()))
        .collect();
    assert!(
        not.contains(&("forwarding.disabled", vec!["drops.forwarding".to_owned()])),
        "{not:?}"
    );
    assert!(
        not.contains(&("rpfilter.drops", vec!["drops.rpfilter".to_owned()])),
        "{not:?}"
    );
    // Reads traffic.* in its first alternative.
    assert!(
        not.iter().any(|(r, _)| *r == "tcp.high_retransmits"),
        "{not:?}"
    );
    // Decided from configuration: the peer's handshake is fresh and it got traffic, so the
    // first alternative is false and the second needs the data plane.
    assert!(
        not.iter().any(|(r, m)| *r == "wireguard.handshake_stale"
            && m.contains(&"peer.initiations_sent".to_owned())),
        "{not:?}"
    );
    // With forwarding on, forwarding.disabled is decided (false) without drop reasons.
    f.host.ip_forward = true;
    let e = evaluate_partial(&rules, &f.to_json(), &missing);
    assert!(
        !e.not_evaluated
            .iter()
            .any(|n| n.rule == "forwarding.disabled"),
        "{:?}",
        e.not_evaluated
    );
    // Nothing missing: the same as evaluate().
    let all = evaluate_partial(&rules, &f.to_json(), &[]);
    assert!(all.not_evaluated.is_empty());
    assert_eq!(
        all.findings.iter().map(|f| &f.id).collect::<Vec<_>>(),
        evaluate(&rules, &f.to_json())
            .iter()
            .map(|f| &f.id)
            .collect::<Vec<_>>()
    );
}

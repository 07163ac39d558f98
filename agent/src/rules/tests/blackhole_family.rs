//! `pmtu.blackhole` names the too-big message of the probed path's IP version: ICMPv6
//! packet-too-big (and the nft rule for it) on IPv6, ICMP frag-needed on IPv4, both when
//! no probe named the version.

use super::healthy;
use crate::facts::Facts;
use crate::rules::{evaluate, finding::Finding, RuleSet};

/// The blackhole the probe found toward `target` (`family`) with path MTU `mtu`.
fn blackhole(target: &str, family: &str, mtu: i64) -> Finding {
    let mut f: Facts = healthy();
    f.probe.target = target.into();
    f.probe.family = family.into();
    f.probe.path_mtu = mtu;
    f.probe.blackhole = true;
    let rules = RuleSet::builtin().expect("built-in rules");
    evaluate(&rules, &f.to_json())
        .into_iter()
        .find(|x| x.id == "pmtu.blackhole")
        .expect("pmtu.blackhole fires on a probed blackhole")
}

#[test]
fn an_ipv6_blackhole_names_icmpv6_packet_too_big() {
    let f = blackhole("2001:db8::2", "ipv6", 1280);
    assert!(
        f.fix.contains("ICMPv6 packet-too-big")
            && f.fix
                .contains("nft insert rule inet filter forward icmpv6 type packet-too-big accept")
            && !f.fix.contains("frag-needed")
            && !f.fix.contains("type 3 code 4"),
        "{}",
        f.fix
    );
    assert!(
        f.summary.contains("1280 bytes toward 2001:db8::2")
            && f.summary.contains("without any ICMPv6 packet-too-big"),
        "{}",
        f.summary
    );
    assert_eq!(
        f.evidence.get("probe_family"),
        Some(&serde_json::json!("ipv6"))
    );
}

/// Twins: IPv4 names frag-needed only; with no family, both messages.
#[test]
fn an_ipv4_blackhole_names_frag_needed_and_an_unknown_one_both() {
    let f = blackhole("192.0.2.2", "ipv4", 1400);
    assert!(
        f.fix.contains("ICMP fragmentation-needed (type 3 code 4)")
            && f.fix
                .contains("icmp type destination-unreachable icmp code frag-needed accept")
            && !f.fix.contains("icmpv6")
            && !f.fix.contains("ICMPv6"),
        "{}",
        f.fix
    );
    assert!(
        f.summary.contains("without any ICMP fragmentation-needed"),
        "{}",
        f.summary
    );
    let f = blackhole("", "", -1);
    assert!(
        f.fix.contains("frag-needed") && f.fix.contains("icmpv6 type packet-too-big"),
        "{}",
        f.fix
    );
}

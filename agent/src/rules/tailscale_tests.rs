//! `tailscale.relayed` against crafted facts: it needs tailscaled's word (the peer's path
//! is DERP) and the underlay's (more bytes over TCP with the DERP servers than WireGuard
//! over UDP with the peer), and traffic in the window; and the MTU fix on Tailscale.

use super::tests::{healthy, ids};
use crate::facts::Facts;
use crate::rules::{evaluate, evaluate_partial, RuleSet};

const ID: &str = "tailscale.relayed";

/// tailscale0 at its usual 1280, one peer relayed by DERP region "lab" with traffic.
fn relayed() -> Facts {
    let mut f = healthy();
    f.iface.name = "tailscale0".into();
    f.iface.mtu = 1280;
    f.tunnel.daemon = "tailscaled".into();
    f.tunnel.port = 41641;
    f.tunnel.usual_mtu = 1280;
    let p = &mut f.peers[0];
    p.endpoint = String::new();
    p.host = "node-b".into();
    p.path = "derp".into();
    p.derp_region = "lab".into();
    p.derp_servers = vec!["10.200.3.2:443".into()];
    p.derp_bytes = 84_000_000;
    p.udp_bytes = 0;
    p.online = Some(true);
    f
}

fn has(f: &Facts) -> bool {
    ids(f).contains(&ID.to_owned())
}

#[test]
fn a_relayed_peer_with_traffic_is_reported_with_both_sides_evidence() {
    let f = relayed();
    assert!(has(&f), "{:?}", ids(&f));
    let rules = RuleSet::builtin().expect("rules");
    let found = evaluate(&rules, &f.to_json());
    let r = found.iter().find(|x| x.id == ID).expect("finding");
    assert_eq!(r.severity, crate::rules::finding::Severity::Warning);
    assert_eq!(r.evidence["path"], "derp");
    assert_eq!(r.evidence["derp_tcp_bytes"], 84_000_000);
    assert_eq!(r.evidence["udp_wireguard_bytes"], 0);
    assert!(
        r.summary.contains("node-b") && r.summary.contains("DERP region lab"),
        "{}",
        r.summary
    );
    assert!(
        r.summary
            .contains("84000000 bytes over TCP with the DERP server 10.200.3.2:443"),
        "{}",
        r.summary
    );
    for words in [
        "UDP 41641 in and out",
        "NAT",
        "UPnP, NAT-PMP or PCP",
        "tailscale netcheck",
    ] {
        assert!(r.fix.contains(words), "{words:?} not in {}", r.fix);
    }
    // No DERP address known: tailscaled's word is taken, the evidence says -1.
    let mut f = relayed();
    f.peers[0].derp_bytes = -1;
    f.peers[0].derp_servers.clear();
    assert!(has(&f), "{:?}", ids(&f));
}

#[test]
fn quiet_when_either_side_disagrees_or_nothing_flows() {
    let quiet = |change: &dyn Fn(&mut Facts)| {
        let mut f = relayed();
        change(&mut f);
        assert!(!has(&f), "{:?}", ids(&f));
    };
    quiet(&|f| {
        // The healthy twin: a direct path.
        f.peers[0].path = "direct".into();
        f.peers[0].endpoint = "10.200.2.2:41641".into();
        f.peers[0].udp_bytes = 90_000_000;
        f.peers[0].derp_bytes = 900;
    });
    quiet(&|f| {
        f.peers[0].tx_bytes_delta = 0; // relayed but idle
        f.peers[0].rx_bytes_delta = 0;
    });
    quiet(&|f| f.peers[0].derp_bytes = 0); // the underlay saw no DERP traffic
    quiet(&|f| f.peers[0].udp_bytes = 90_000_000); // the underlay saw it go direct
    quiet(&|f| f.peers[0].path = "peer_relay".into()); // relayed, but not by DERP
    quiet(&|f| f.tunnel.daemon = String::new()); // not Tailscale
}

#[test]
fn without_the_data_plane_it_is_not_evaluated() {
    let missing: Vec<String> = ["traffic", "peer.derp_bytes", "peer.udp_bytes"]
        .map(String::from)
        .to_vec();
    let rules = RuleSet::builtin().expect("rules");
    let e = evaluate_partial(&rules, &relayed().to_json(), &missing);
    assert!(!e.findings.iter().any(|f| f.id == ID), "{:?}", e.findings);
    assert!(
        e.not_evaluated
            .iter()
            .any(|n| n.rule == ID && n.missing.contains(&"peer.derp_bytes".to_owned())),
        "{:?}",
        e.not_evaluated
    );
}

#[test]
fn the_mtu_fix_on_tailscale_names_its_setting() {
    let rules = RuleSet::builtin().expect("rules");
    let found = evaluate(&rules, &relayed().to_json());
    let f = found
        .iter()
        .find(|x| x.id == "mtu.tunnel_undersized")
        .expect("1280 on a 1500 underlay is undersized");
    assert!(
        f.fix.starts_with("ip link set dev tailscale0 mtu 1440"),
        "{}",
        f.fix
    );
    assert!(f.fix.contains("TS_DEBUG_MTU=1440"), "{}", f.fix);
    assert!(f.fix.contains("creates tailscale0 with 1280"), "{}", f.fix);
    let mut wg = healthy();
    wg.iface.mtu = 1280;
    let found = evaluate(&rules, &wg.to_json());
    let f = found
        .iter()
        .find(|x| x.id == "mtu.tunnel_undersized")
        .expect("finding");
    assert!(
        f.fix.ends_with("persist it in the tunnel's configuration"),
        "{}",
        f.fix
    );
}

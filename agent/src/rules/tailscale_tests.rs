//! `tailscale.relayed` against crafted facts: it needs tailscaled's word (the peer's path
//! is DERP) and the underlay's (more bytes over TCP with the DERP servers than WireGuard
//! over UDP with the peer), and traffic in the window; and tailscaled's default MTU 1280:
//! a trade-off stated as info (`mtu.tailscale_default`), a warning with Tailscale's fix
//! (`mtu.tunnel_undersized`) only when the traffic measurably pays for it.

use super::tests::{healthy, ids};
use crate::facts::Facts;
use crate::rules::finding::{Finding, Severity};
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
            .contains("80.1 MiB over TCP with the DERP server 10.200.3.2:443"),
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

/// tailscale0 at 1280 with a direct path probed at 1500, during a bulk transfer: 40,000
/// full-size segments in 4 s, 95 % of the segments sent.
fn paying() -> Facts {
    let mut f = relayed();
    let p = &mut f.peers[0];
    p.path = "direct".into();
    p.endpoint = "192.0.2.2:41641".into();
    p.udp_bytes = 90_000_000;
    p.derp_bytes = 0;
    f.traffic.duration_s = 4.0;
    f.traffic.full_size_segments = 40_000;
    f.traffic.full_size_share = 0.95;
    f
}

fn finding(f: &Facts, id: &str) -> Option<Finding> {
    let rules = RuleSet::builtin().expect("rules");
    evaluate(&rules, &f.to_json())
        .into_iter()
        .find(|x| x.id == id)
}

const DEFAULT: &str = "mtu.tailscale_default";
const UNDERSIZED: &str = "mtu.tunnel_undersized";

#[test]
fn tailscales_default_mtu_is_a_trade_off_stated_as_info() {
    // A default node with a direct path and light traffic: info, exit 0, the trade-off.
    let mut light = paying();
    light.traffic.full_size_segments = 12;
    light.traffic.full_size_share = 0.01;
    assert_eq!(ids(&light), [DEFAULT]);
    let f = finding(&light, DEFAULT).expect("the info finding");
    assert_eq!(f.severity, Severity::Info);
    for words in [
        "tailscale0 runs at tailscaled's default MTU 1280 where 1440 would fit",
        "a trade-off, not a fault",
        "160 bytes less (12 % more packets",
        "without path-MTU discovery",
        "did not pay much for it: 12 full-size segments (1.0 % of one direction's) in 4 s",
    ] {
        assert!(f.summary.contains(words), "{words:?} not in {}", f.summary);
    }
    assert!(
        f.fix
            .starts_with("Nothing to do while the traffic is light")
            && f.fix.contains("TS_DEBUG_MTU=1440"),
        "{}",
        f.fix
    );
    assert_eq!(f.evidence["full_size_segments"], 12);
    // Not probed (a relayed peer, --no-probe): a larger MTU is not known to fit, whatever
    // the traffic.
    let mut unprobed = paying();
    unprobed.tunnel.path_mtu = -1;
    assert_eq!(ids(&unprobed), [DEFAULT]);
    let f = finding(&unprobed, DEFAULT).expect("info");
    assert!(f.summary.contains("was not probed"), "{}", f.summary);
    assert_eq!(ids(&relayed()), [ID, DEFAULT]); // most severe first
}

#[test]
fn traffic_that_pays_for_1280_on_a_path_that_fits_more_is_warned() {
    let f = paying();
    assert_eq!(ids(&f), [UNDERSIZED]);
    let w = finding(&f, UNDERSIZED).expect("warning");
    assert_eq!(w.severity, Severity::Warning);
    assert!(
        w.summary.contains(
            "the traffic pays for tailscaled's default: 40,000 full-size segments \
             (95.0 % of one direction's) in 4 s, over a path probed at 1500 bytes"
        ),
        "{}",
        w.summary
    );
    // Each part of the measure is needed: mostly small segments, too few a second, or a
    // path not known to fit more leave the info.
    let info_when = |change: &dyn Fn(&mut Facts)| {
        let mut f = paying();
        change(&mut f);
        assert_eq!(ids(&f), [DEFAULT]);
    };
    info_when(&|f| f.traffic.full_size_share = 0.4);
    info_when(&|f| f.traffic.full_size_segments = 3_999); // < 1,000 a second over 4 s
    info_when(&|f| f.tunnel.path_mtu = -1);
    // A path probed at 1340 fits nothing larger than 1280: neither.
    let mut small_path = paying();
    small_path.tunnel.path_mtu = 1340;
    small_path.tunnel.effective_underlay_mtu = 1340;
    small_path.tunnel.max_mtu = 1280;
    assert_eq!(ids(&small_path), Vec::<String>::new());
}

#[test]
fn other_undersized_tunnels_keep_the_warning_whatever_their_traffic() {
    // A plain WireGuard tunnel at 1380 over a 1500 path, idle.
    let mut wg = healthy();
    wg.iface.mtu = 1380;
    assert_eq!(ids(&wg), [UNDERSIZED]);
    // Tailscale at an MTU someone chose (not tailscaled's default): the usual rule.
    let mut chosen = relayed();
    chosen.iface.mtu = 1300;
    assert!(ids(&chosen).contains(&UNDERSIZED.to_owned()));
    assert!(!ids(&chosen).contains(&DEFAULT.to_owned()));
}

/// Without the data plane the measure is missing: with a probed path neither rule is
/// decided (both listed as not evaluated), without one the info is decided from
/// configuration.
#[test]
fn without_the_data_plane_the_trade_off_is_not_decided_on_a_probed_path() {
    let rules = RuleSet::builtin().expect("rules");
    let missing = vec!["traffic".to_owned()];
    let e = evaluate_partial(&rules, &paying().to_json(), &missing);
    assert!(
        !e.findings
            .iter()
            .any(|f| f.id == DEFAULT || f.id == UNDERSIZED),
        "{:?}",
        e.findings
    );
    for id in [DEFAULT, UNDERSIZED] {
        assert!(
            e.not_evaluated.iter().any(|n| n.rule == id),
            "{id}: {:?}",
            e.not_evaluated
        );
    }
    let mut unprobed = paying();
    unprobed.tunnel.path_mtu = -1;
    let e = evaluate_partial(&rules, &unprobed.to_json(), &missing);
    assert!(e.findings.iter().any(|f| f.id == DEFAULT), "{e:?}");
}

#[test]
fn the_mtu_fix_on_tailscale_names_its_setting() {
    let rules = RuleSet::builtin().expect("rules");
    let found = evaluate(&rules, &paying().to_json());
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

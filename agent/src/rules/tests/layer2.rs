//! Layer-2 meshes and stacked tunnels: `mtu.bridge_port_mismatch` on a bridge whose ports'
//! MTUs differ (and its twin whose ports agree), and `mtu.tunnel_exceeds_underlay` naming a
//! chain of tunnels.

use super::healthy;
use crate::facts::bridge::{BridgeFacts, PortFacts};
use crate::facts::Facts;
use crate::rules::finding::{Finding, Severity};
use crate::rules::{evaluate, RuleSet};

const BRIDGE: &str = "mtu.bridge_port_mismatch";

fn found(f: &Facts, id: &str) -> Option<Finding> {
    let rules = RuleSet::builtin().expect("built-in rules");
    evaluate(&rules, &f.to_json())
        .into_iter()
        .find(|x| x.id == id)
}

fn port(name: &str, kind: &str, mtu: i64) -> PortFacts {
    PortFacts {
        name: name.into(),
        kind: kind.into(),
        mtu,
        is_tunnel: kind != "veth",
        oversize_segments: 0,
        max_segment: 0,
        oversize_drops: 0,
    }
}

/// vx0 (the diagnosed VXLAN port, 1450) bridged on br0 with the veth of a guest at
/// `guest_mtu`; `segments` above 1450 entered through the guest's port, `drops` frames too
/// large for vx0 were dropped.
fn bridged(guest_mtu: i64, segments: i64, drops: i64) -> Facts {
    let mut f = healthy();
    f.iface.name = "vx0".into();
    f.iface.kind = "vxlan".into();
    f.iface.mtu = 1450;
    f.tunnel.kind = "vxlan".into();
    f.tunnel.overhead_expected = 50;
    f.tunnel.overhead_measured = 50;
    f.tunnel.max_mtu = 1450;
    let mut vx = port("vx0", "vxlan", 1450);
    vx.oversize_drops = drops;
    let mut gv = port("gv0", "veth", guest_mtu);
    gv.oversize_segments = segments;
    gv.max_segment = if segments > 0 { 1500 } else { 1450 };
    let min = guest_mtu.min(1450);
    f.bridge = BridgeFacts {
        present: true,
        name: "br0".into(),
        mtu: min,
        ports_text: format!("vx0 (vxlan) 1450, gv0 (veth) {guest_mtu}"),
        min_mtu: min,
        max_mtu: guest_mtu.max(1450),
        smallest_ports: "vx0".into(),
        larger_ports: if guest_mtu > 1450 {
            "gv0".into()
        } else {
            String::new()
        },
        oversize_segments: segments,
        max_segment: gv.max_segment,
        oversize_drops: drops,
        ports: vec![vx, gv],
    };
    f
}

#[test]
fn a_bridge_with_ports_of_different_mtus_is_named_with_its_ports() {
    let f = found(&bridged(1500, 0, 0), BRIDGE).expect("fires on a 1450/1500 bridge");
    assert_eq!(f.severity, Severity::Warning, "nothing seen lost: {f:?}");
    assert!(
        f.summary.starts_with(
            "br0 bridges ports of different MTUs (vx0 (vxlan) 1450, gv0 (veth) 1500): frames \
             larger than 1450 bytes cannot cross from gv0 to vx0"
        ),
        "{}",
        f.summary
    );
    assert!(
        f.fix.starts_with(
            "for port in /sys/class/net/br0/brif/*; do ip link set dev \"${port##*/}\" mtu \
             1450; done"
        ) && f
            .fix
            .contains("ether type ip tcp flags syn tcp option maxseg size set 1410"),
        "{}",
        f.fix
    );

    // Frames dropped on the tunnel port: being lost now, critical, with the evidence.
    let f = found(&bridged(1500, 1234, 17), BRIDGE).expect("fires");
    assert_eq!(f.severity, Severity::Critical, "{f:?}");
    assert!(
        f.summary.contains(
            "; 1,234 segments above 1450 bytes (up to 1500) entered through gv0; the kernel \
             dropped 17 frames too large for vx0"
        ),
        "{}",
        f.summary
    );
    assert_eq!(f.evidence["oversize_drops"], 17);
    // Segments above the MTU alone (guest-to-guest on the same host is fine) are evidence,
    // not loss.
    let f = found(&bridged(1500, 1234, 0), BRIDGE).expect("fires");
    assert_eq!(f.severity, Severity::Warning, "{f:?}");
    // Without the data plane and the drop probe the figures are unknown: still a warning.
    let f = found(&bridged(1500, -1, -1), BRIDGE).expect("fires");
    assert_eq!(f.severity, Severity::Warning, "{f:?}");
}

#[test]
fn a_bridge_whose_ports_agree_and_no_bridge_stay_quiet() {
    assert_eq!(found(&bridged(1450, 0, 0), BRIDGE), None);
    assert_eq!(found(&healthy(), BRIDGE), None);
    // A bridge without ports that are up.
    let mut f = healthy();
    f.bridge = BridgeFacts {
        present: true,
        name: "br0".into(),
        min_mtu: -1,
        max_mtu: -1,
        ..BridgeFacts::default()
    };
    assert_eq!(found(&f, BRIDGE), None);
}

/// VXLAN (50) at `mtu` inside a 1420 WireGuard over a 1500 veth.
fn stacked(mtu: i64) -> Facts {
    let mut f = healthy();
    f.iface.name = "vx0".into();
    f.iface.kind = "vxlan".into();
    f.iface.mtu = mtu;
    f.tunnel.kind = "vxlan".into();
    f.tunnel.overhead_expected = 50;
    f.tunnel.overhead_measured = -1;
    f.tunnel.underlay_iface = "wg0".into();
    f.tunnel.underlay_mtu = 1420;
    f.tunnel.underlay_chain = "wg0 (wireguard, 60 bytes, MTU 1420) over eth0 (MTU 1500)".into();
    f.tunnel.path_mtu = -1;
    f.tunnel.effective_underlay_mtu = 1420;
    f.tunnel.max_mtu = 1370;
    f.peers.clear();
    f
}

#[test]
fn a_tunnel_inside_a_tunnel_is_named_with_its_chain() {
    let f = found(&stacked(1450), "mtu.tunnel_exceeds_underlay").expect("finding");
    assert!(
        f.summary.contains(
            "adds 50 bytes and the underlay wg0 (wireguard, 60 bytes, MTU 1420) over eth0 \
             (MTU 1500) carries at most 1420"
        ),
        "{}",
        f.summary
    );
    assert!(f.fix.contains("mtu 1370"), "{}", f.fix);
    assert!(found(&stacked(1370), "mtu.tunnel_exceeds_underlay").is_none());
    // Without a chain the summary names the underlay interface as before.
    let plain = found(
        &{
            let mut f = healthy();
            f.iface.mtu = 1480;
            f
        },
        "mtu.tunnel_exceeds_underlay",
    )
    .expect("finding");
    assert!(
        plain
            .summary
            .contains("the underlay eth0 carries at most 1500"),
        "{}",
        plain.summary
    );
}

//! A tunnel inside a tunnel: VXLAN carried over wireguard-go over a 1500 veth. The VXLAN's
//! underlay is the WireGuard device, whose own 60 bytes add to VXLAN's 50: the largest
//! VXLAN MTU that fits a 1420 WireGuard is 1370, and the finding names the whole chain. A
//! WireGuard left at 1500 carries only 1440 unfragmented, whatever its MTU says.

use std::time::Duration;

use anyhow::{ensure, Context, Result};
use netdoctor_lab::wireguard::{wg_over_pair, WgConfig, WgTunnel};
use netdoctor_lab::{lab_guard, traffic, PairTopology};

use crate::diagnose_mtu::report::{diagnose_idle, expect_evidence, expect_fix, str_or, MtuChecks};

/// VXLAN 43 between the WireGuard tunnel's addresses (routed through it, not pinned), MTU
/// `mtu` on side a, inside a wireguard-go tunnel of `wg_mtu` over a 1500 veth.
fn vxlan_over_wireguard(wg_mtu: u32, mtu: u32) -> Result<(PairTopology, WgTunnel)> {
    let (pair, wg) = wg_over_pair(1500, wg_mtu)?;
    for (ns, local, remote, addr) in [
        (&pair.a, wg.a.ip(), wg.b.ip(), "10.251.1.1/24"),
        (&pair.b, wg.b.ip(), wg.a.ip(), "10.251.1.2/24"),
    ] {
        ns.ip(&[
            "link", "add", "vx0", "type", "vxlan", "id", "43", "local", local, "remote", remote,
            "dstport", "4789",
        ])?;
        ns.set_mtu("vx0", mtu)?;
        ns.add_addr("vx0", addr)?;
        ns.set_up("vx0")?;
    }
    traffic::wait_for_ping(&pair.a, "10.251.1.2", Duration::from_secs(5))
        .context("ping across VXLAN over WireGuard")?;
    Ok((pair, wg))
}

#[test]
fn vxlan_1450_inside_a_1420_wireguard_names_the_chain_and_1370_fits() -> Result<()> {
    lab_guard!("wireguard-go", "wg", "ping");
    let (pair, wg) = vxlan_over_wireguard(1420, 1450)?;
    let d = diagnose_idle(&pair.a, "vx0")?;
    let chain = format!(
        "{} (wireguard, 60 bytes, MTU 1420) over {} (MTU 1500)",
        wg.a.ifname(),
        PairTopology::IFNAME
    );
    ensure!(
        d.fact("tunnel.underlay_chain") == &serde_json::Value::from(chain.clone()),
        "tunnel.underlay_chain is {}, expected {chain:?}\n{}",
        d.fact("tunnel.underlay_chain"),
        d.describe()
    );
    let f = d.expect("mtu.tunnel_exceeds_underlay", "critical")?;
    let summary = str_or(&f["summary"]);
    ensure!(
        summary.contains("vx0 has MTU 1450")
            && summary.contains(&format!(
                "adds 50 bytes and the underlay {chain} carries at most 1420"
            )),
        "the summary should name the chain: {summary}\n{}",
        d.describe()
    );
    expect_evidence(&d, f, "largest_fitting_mtu", &1370.into())?;
    expect_fix(&d, f, "ip link set dev vx0 mtu 1370")?;
    drop(wg);
    drop(pair);

    // Twin: 1370 fits the 1420 WireGuard; nothing to report.
    let (pair, wg) = vxlan_over_wireguard(1420, 1370)?;
    let d = diagnose_idle(&pair.a, "vx0")?;
    ensure!(
        d.fact_i64("tunnel.max_mtu")? == 1370,
        "twin: max_mtu should be 1370\n{}",
        d.describe()
    );
    d.expect_healthy()?;
    drop(wg);
    drop(pair);
    Ok(())
}

/// The WireGuard's own MTU is no limit when it is too large itself: left at 1500 over a
/// 1500 veth it carries 1440 unfragmented, so a VXLAN at 1450 inside (1500 on the WireGuard
/// device, which accepts it) does not fit, and 1390 does.
#[test]
fn vxlan_inside_a_wireguard_left_at_1500_fits_only_what_the_wireguard_carries() -> Result<()> {
    lab_guard!("wireguard-go", "wg", "ping");
    let (pair, wg) = vxlan_over_wireguard(1500, 1450)?;
    let d = diagnose_idle(&pair.a, "vx0")?;
    let f = d.expect("mtu.tunnel_exceeds_underlay", "critical")?;
    expect_evidence(&d, f, "largest_fitting_mtu", &1390.into())?;
    ensure!(
        d.fact_i64("tunnel.effective_underlay_mtu")? == 1440,
        "the chain carries 1440\n{}",
        d.describe()
    );
    drop(wg);
    drop(pair);
    let (pair, wg) = vxlan_over_wireguard(1500, 1390)?;
    let d = diagnose_idle(&pair.a, "vx0")?;
    d.assert_none_of(&["mtu.tunnel_exceeds_underlay"])?;
    drop(wg);
    drop(pair);
    Ok(())
}

/// WireGuard at `mtu` inside a 1420 WireGuard (both wireguard-go) over a 1500 veth.
fn wireguard_over_wireguard(mtu: u32) -> Result<(PairTopology, WgTunnel, WgTunnel)> {
    let (pair, outer) = wg_over_pair(1500, 1420)?;
    let inner = WgTunnel::new(
        &pair.a,
        outer.a.ip(),
        &pair.b,
        outer.b.ip(),
        &WgConfig {
            mtu,
            a_addr: "10.252.0.1/24".into(),
            b_addr: "10.252.0.2/24".into(),
            listen_port: 51821,
            ..WgConfig::default()
        },
    )?;
    Ok((pair, outer, inner))
}

/// WireGuard over WireGuard: the inner one's 60 bytes come on top of the outer's, so 1420
/// inside a 1420 tunnel does not fit and 1360 does.
#[test]
fn wireguard_1420_inside_a_1420_wireguard_names_the_chain_and_1360_fits() -> Result<()> {
    lab_guard!("wireguard-go", "wg", "ping");
    let (pair, outer, inner) = wireguard_over_wireguard(1420)?;
    let d = diagnose_idle(&pair.a, inner.a.ifname())?;
    let chain = format!(
        "{} (wireguard, 60 bytes, MTU 1420) over {} (MTU 1500)",
        outer.a.ifname(),
        PairTopology::IFNAME
    );
    let f = d.expect("mtu.tunnel_exceeds_underlay", "critical")?;
    let summary = str_or(&f["summary"]);
    ensure!(
        summary.contains(&format!("the underlay {chain} carries at most 1420")),
        "the summary should name the chain: {summary}\n{}",
        d.describe()
    );
    expect_evidence(&d, f, "largest_fitting_mtu", &1360.into())?;
    drop((inner, outer, pair));

    let (pair, outer, inner) = wireguard_over_wireguard(1360)?;
    let d = diagnose_idle(&pair.a, inner.a.ifname())?;
    d.expect_healthy()?;
    drop((inner, outer, pair));
    Ok(())
}

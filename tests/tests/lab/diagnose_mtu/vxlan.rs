//! VXLAN over a veth underlay: 1500 on a 1500 underlay exceeds it, the 1450 twin fits.

use std::time::Duration;

use anyhow::{ensure, Context, Result};
use netdoctor_lab::{lab_guard, traffic, Iperf3Server, PairTopology};
use serde_json::Value;

use crate::diagnose_mtu::report::{
    diagnose_idle, diagnose_with, expect_evidence, expect_fix, iperf3, MtuChecks, TWIN_RATE,
};

/// VXLAN 42 between the pair's ends, pinned to eth0 (`dev eth0`), with `mtu` on side
/// a's device. The kernel refuses a VXLAN MTU above lower MTU - 50 while the device is
/// pinned, so a too-big MTU is set while eth0 is temporarily larger (what happens when an
/// underlay's MTU is lowered later).
pub(crate) fn vxlan_pair(mtu: u32) -> Result<PairTopology> {
    let pair = PairTopology::new(1500)?;
    for (ns, local, remote, addr) in [
        (
            &pair.a,
            PairTopology::A_IP,
            PairTopology::B_IP,
            "10.250.1.1/24",
        ),
        (
            &pair.b,
            PairTopology::B_IP,
            PairTopology::A_IP,
            "10.250.1.2/24",
        ),
    ] {
        ns.ip(&[
            "link", "add", "vx0", "type", "vxlan", "id", "42", "local", local, "remote", remote,
            "dstport", "4789", "dev", "eth0",
        ])?;
        ns.add_addr("vx0", addr)?;
        ns.set_up("vx0")?;
    }
    if mtu > 1450 {
        pair.a.set_mtu(PairTopology::IFNAME, mtu + 50)?;
        pair.a.set_mtu("vx0", mtu)?;
        pair.a.set_mtu(PairTopology::IFNAME, 1500)?;
    } else {
        pair.a.set_mtu("vx0", mtu)?;
    }
    ensure!(
        pair.a.mtu("vx0")? == mtu && pair.a.mtu(PairTopology::IFNAME)? == 1500,
        "vx0 should have MTU {mtu} over a 1500 eth0"
    );
    traffic::wait_for_ping(&pair.a, "10.250.1.2", Duration::from_secs(5))
        .context("ping across VXLAN")?;
    Ok(pair)
}

#[test]
fn vxlan_1500_on_1500_exceeds_and_1450_fits() -> Result<()> {
    lab_guard!("ping");
    let pair = vxlan_pair(1500)?;
    let d = diagnose_idle(&pair.a, "vx0")?;
    let checks: [(&str, Value); 6] = [
        ("iface.kind", "vxlan".into()),
        ("tunnel.kind", "vxlan".into()),
        ("tunnel.overhead_expected", 50.into()),
        ("tunnel.underlay_iface", PairTopology::IFNAME.into()),
        ("tunnel.port", 4789.into()),
        (
            "tunnel.endpoints",
            serde_json::json!([format!("{}:4789", PairTopology::B_IP)]),
        ),
    ];
    for (path, expected) in &checks {
        ensure!(
            d.fact(path) == expected,
            "facts.{path} is {}, expected {expected}\n{}",
            d.fact(path),
            d.describe()
        );
    }
    let f = d.expect("mtu.tunnel_exceeds_underlay", "critical")?;
    d.expect_code(2)?;
    expect_evidence(&d, f, "tunnel_mtu", &1500.into())?;
    expect_evidence(&d, f, "overhead_expected", &50.into())?;
    expect_evidence(&d, f, "largest_fitting_mtu", &1450.into())?;
    expect_fix(&d, f, "ip link set dev vx0 mtu 1450")?;
    drop(pair);

    // Twin, under load: the data plane measures the same 50 bytes.
    let pair = vxlan_pair(1450)?;
    let _server = Iperf3Server::start(&pair.b, 5201)?;
    let (d, report) = diagnose_with(&pair.a, "vx0", &[], || {
        iperf3(&pair.a, "10.250.1.2", 5201, TWIN_RATE)
    })?;
    ensure!(
        report.received_bytes > 0
            && d.fact_i64("tunnel.overhead_measured")? == 50
            && d.fact_i64("tunnel.underlay_fragments")? == 0,
        "twin: iperf3 over VXLAN should show 50 bytes of measured overhead, no fragments\n{}",
        d.describe()
    );
    for (path, expected) in &checks {
        ensure!(
            d.fact(path) == expected,
            "twin: facts.{path} is {}, expected {expected}\n{}",
            d.fact(path),
            d.describe()
        );
    }
    d.expect_healthy()
}

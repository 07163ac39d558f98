//! A bridge on each side of a VXLAN pair joining the VXLAN port (1450) with a guest's veth:
//! guests at 1500 lose their full-size frames at the bridge, which drops them without an
//! ICMP, and TCP between them stalls: `mtu.bridge_port_mismatch` on the VXLAN port and on
//! the bridge, critical with the drops; the fix's bridge-family MSS clamp gets TCP through.
//! The twin, guests at 1450, has nothing to report.

use std::time::Duration;

use anyhow::{ensure, Context, Result};
use netdoctor_lab::bridge::GuestBridge;
use netdoctor_lab::diagnosis::Diagnosis;
use netdoctor_lab::{lab_guard, traffic, Iperf3Server, PairTopology};
use serde_json::Value;

use crate::diagnose_mtu::report::{diagnose_with, expect_evidence, str_or, MtuChecks, TWIN_RATE};
use crate::diagnose_mtu::vxlan::vxlan_pair;

const GUEST_A: &str = "10.99.0.1";
const GUEST_B: &str = "10.99.0.2";
const ID: &str = "mtu.bridge_port_mismatch";

/// The VXLAN pair with a guest bridged onto vx0 on each side, both guests at `guest_mtu`.
struct BridgedVxlan {
    // Declared first: the guests go before the pair's namespaces.
    a: GuestBridge,
    b: GuestBridge,
    pair: PairTopology,
}

impl BridgedVxlan {
    fn new(guest_mtu: u32) -> Result<BridgedVxlan> {
        let pair = vxlan_pair(1450)?;
        let a = GuestBridge::new(&pair.a, "vx0", &format!("{GUEST_A}/24"), guest_mtu)?;
        let b = GuestBridge::new(&pair.b, "vx0", &format!("{GUEST_B}/24"), guest_mtu)?;
        traffic::wait_for_ping(&a.guest, GUEST_B, Duration::from_secs(10))
            .context("ping between the bridged guests")?;
        Ok(BridgedVxlan { a, b, pair })
    }

    /// `diagnose IFACE` on side a while guest a sends to guest b over TCP.
    fn diagnose(&self, iface: &str, port: u16, rate: Option<&str>) -> Result<Diagnosis> {
        let _server = Iperf3Server::start(&self.b.guest, port)?;
        let (d, report) = diagnose_with(&self.pair.a, iface, &[], || {
            Ok(self.a.tcp_to(GUEST_B, port, 3, rate))
        })?;
        match report {
            Ok(r) => println!(
                "{iface}: guests' TCP {:.1} Mbit/s during the diagnosis",
                r.received_bits_per_second / 1e6
            ),
            Err(e) => println!("{iface}: guests' TCP failed during the diagnosis: {e:#}"),
        }
        Ok(d)
    }
}

/// The finding names both ports with their MTUs and the frames that cannot cross, and
/// the kernel's drops of the frames too large for vx0 make it critical.
fn expect_mismatch(d: &Diagnosis) -> Result<()> {
    let f = d.expect(ID, "critical")?;
    let summary = str_or(&f["summary"]);
    ensure!(
        summary.contains("br0 bridges ports of different MTUs (vx0 (vxlan) 1450, gv0 (veth) 1500)")
            && summary.contains("frames larger than 1450 bytes cannot cross from gv0 to vx0"),
        "summary: {summary}\n{}",
        d.describe()
    );
    expect_evidence(d, f, "smallest_mtu", &1450.into())?;
    expect_evidence(d, f, "largest_mtu", &1500.into())?;
    let drops = f["evidence"]["oversize_drops"].as_i64().unwrap_or(-1);
    let segments = f["evidence"]["oversize_segments"].as_i64().unwrap_or(-1);
    ensure!(
        drops > 0 && segments > 0 && f["evidence"]["largest_segment"] == 1500,
        "the guest's 1500-byte segments entering gv0 and their drops on vx0 should be \
         evidence: {f}\n{}",
        d.describe()
    );
    Ok(())
}

#[test]
fn guests_at_1500_bridged_onto_vxlan_1450_are_named_and_the_clamp_fixes_tcp() -> Result<()> {
    lab_guard!("ping", "iperf3", "nft");
    let lab = BridgedVxlan::new(1500)?;
    let port = lab.diagnose("vx0", 5201, None)?;
    expect_mismatch(&port)?;
    ensure!(
        port.fact("bridge.name") == &Value::from("br0")
            && port.fact("bridge.smallest_ports") == &Value::from("vx0"),
        "bridge facts on the port\n{}",
        port.describe()
    );
    let bridge = lab.diagnose("br0", 5202, None)?;
    expect_mismatch(&bridge)?;

    // The fix's second remedy as printed: an MSS clamp in the bridge family, on side a
    // only (it clamps the SYN and the SYN-ACK crossing its bridge).
    let fix = str_or(&port.finding(ID)?["fix"]).to_owned();
    let clamp = fix
        .split_once("bridge family): ")
        .map(|(_, nft)| nft)
        .context("the fix names no bridge-family clamp")?;
    lab.pair.a.run(&["sh", "-c", clamp])?;
    let _server = Iperf3Server::start(&lab.b.guest, 5203)?;
    let report = lab.a.tcp_to(GUEST_B, 5203, 3, None)?;
    println!(
        "with `{clamp}`: {:.1} Mbit/s",
        report.received_bits_per_second / 1e6
    );
    ensure!(
        report.received_bytes > 1_000_000,
        "TCP between the guests still stalls with the fix's clamp {clamp:?}: {report:?}"
    );
    Ok(())
}

#[test]
fn guests_at_1450_bridged_onto_vxlan_1450_have_nothing_to_report() -> Result<()> {
    lab_guard!("ping", "iperf3");
    let lab = BridgedVxlan::new(1450)?;
    for (iface, port) in [("vx0", 5201), ("br0", 5202)] {
        let d = lab.diagnose(iface, port, Some(TWIN_RATE))?;
        ensure!(
            d.fact("bridge.present") == &Value::Bool(true)
                && d.fact_i64("bridge.min_mtu")? == 1450
                && d.fact_i64("bridge.max_mtu")? == 1450
                && d.fact_i64("bridge.oversize_drops")? == 0,
            "{iface}: a bridge of 1450-byte ports\n{}",
            d.describe()
        );
        d.expect_absent(ID)?;
        d.expect_healthy()?;
    }
    Ok(())
}

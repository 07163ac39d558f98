//! A fastd TAP mesh at the MTU that fits (1434) with a guest bridged onto the TAP port on
//! each side, the report's layer-2 mesh: guests at 1500 lose their full-size frames at the
//! bridge (`mtu.bridge_port_mismatch` on the TAP port and on the bridge, critical with the
//! drops); guests at 1434 have nothing to report.

use std::time::Duration;

use anyhow::{ensure, Context, Result};
use netdoctor_lab::bridge::GuestBridge;
use netdoctor_lab::diagnosis::Diagnosis;
use netdoctor_lab::{lab_guard, observe, traffic, Iperf3Server};
use serde_json::Value;

use crate::diagnose_tap_mesh::config::{FASTD_TOOLS, UNDERLAY_MTU, WINDOW};
use crate::diagnose_tap_mesh::fastd::{FASTD_METHOD, FASTD_TAP_OVERHEAD};
use crate::diagnose_tap_mesh::mesh::{unique_ifname, Daemon, TapMesh};

const GUEST_A: &str = "10.99.0.1";
const GUEST_B: &str = "10.99.0.2";
const ID: &str = "mtu.bridge_port_mismatch";
/// The TAP's MTU: what fits the 1500 underlay with fastd's 66 bytes.
const TAP_MTU: i64 = UNDERLAY_MTU - FASTD_TAP_OVERHEAD;

/// The fastd mesh with a guest at `guest_mtu` bridged onto its TAP on each side.
struct BridgedMesh {
    // Declared first: the guests go before the mesh's daemons and namespaces.
    a: GuestBridge,
    b: GuestBridge,
    mesh: TapMesh,
}

impl BridgedMesh {
    fn new(guest_mtu: u32) -> Result<BridgedMesh> {
        let mesh = TapMesh::new(
            Daemon::Fastd(FASTD_METHOD),
            TAP_MTU as u32,
            &unique_ifname(),
        )?;
        let tap = mesh.ifname.clone();
        let a = GuestBridge::new(&mesh.pair.a, &tap, &format!("{GUEST_A}/24"), guest_mtu)?;
        let b = GuestBridge::new(&mesh.pair.b, &tap, &format!("{GUEST_B}/24"), guest_mtu)?;
        traffic::wait_for_ping(&a.guest, GUEST_B, Duration::from_secs(20)).with_context(|| {
            format!(
                "no ping between the guests bridged onto fastd; {}",
                mesh.logs()
            )
        })?;
        Ok(BridgedMesh { a, b, mesh })
    }

    /// `diagnose IFACE` on side a while guest a sends to guest b over TCP (at `rate`).
    fn diagnose(&self, iface: &str, port: u16, rate: Option<&str>) -> Result<Diagnosis> {
        let _server = Iperf3Server::start(&self.b.guest, port)?;
        let window = observe::window(WINDOW)?;
        let (d, report) = observe::diagnose_during(&self.mesh.pair.a, iface, window, &[], || {
            Ok(self.a.tcp_to(GUEST_B, port, 4, rate))
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

#[test]
fn guests_at_1500_bridged_onto_a_fastd_tap_are_named() -> Result<()> {
    lab_guard!(tools = FASTD_TOOLS);
    let lab = BridgedMesh::new(1500)?;
    let tap = lab.mesh.ifname.clone();
    for (iface, port) in [(tap.as_str(), 5201), ("br0", 5202)] {
        let d = lab.diagnose(iface, port, None)?;
        let f = d.expect_finding(ID, "critical")?;
        let summary = f["summary"].as_str().unwrap_or_default();
        ensure!(
            summary.contains(&format!(
                "br0 bridges ports of different MTUs ({tap} (tap) {TAP_MTU}, gv0 (veth) 1500): \
                 frames larger than {TAP_MTU} bytes cannot cross from gv0 to {tap}"
            )) && f["evidence"]["oversize_drops"].as_i64().unwrap_or(-1) > 0,
            "{iface}: {f}\n{}",
            d.describe()
        );
        ensure!(
            f["fix"]
                .as_str()
                .unwrap_or_default()
                .contains(&format!("mtu {TAP_MTU}; done")),
            "{iface}: the fix sets the ports to {TAP_MTU}: {f}"
        );
    }
    Ok(())
}

#[test]
fn guests_at_the_taps_mtu_have_nothing_to_report() -> Result<()> {
    lab_guard!(tools = FASTD_TOOLS);
    let lab = BridgedMesh::new(TAP_MTU as u32)?;
    let tap = lab.mesh.ifname.clone();
    for (iface, port) in [(tap.as_str(), 5201), ("br0", 5202)] {
        let d = lab.diagnose(iface, port, Some("20M"))?;
        ensure!(
            d.fact("bridge.present") == &Value::Bool(true)
                && d.fact("bridge.min_mtu") == &Value::from(TAP_MTU)
                && d.fact("bridge.max_mtu") == &Value::from(TAP_MTU),
            "{iface}: a bridge of {TAP_MTU}-byte ports\n{}",
            d.describe()
        );
        d.expect_healthy()?;
    }
    Ok(())
}

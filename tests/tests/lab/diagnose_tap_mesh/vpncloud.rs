//! VpnCloud 2.3.0 (`type: tap`), the field report's third mesh: identification, the MTU
//! verdict at 1500 (left as it is) and at the largest MTU that fits, and the `plain`
//! algorithm's smaller overhead, each checked against the sizes on the wire.

use anyhow::{ensure, Context, Result};
use netdoctor_lab::lab_guard;
use serde_json::Value;

use crate::common_mesh::MTU_FINDINGS;
use crate::diagnose_tap_mesh::config::{UNDERLAY_MTU, VPNCLOUD_TOOLS};
use crate::diagnose_tap_mesh::mesh::{unique_ifname, Daemon, TapMesh};
use crate::diagnose_tap_mesh::verdicts::{
    assert_exceeds, assert_fits_on_the_wire, assert_identified,
};

/// VpnCloud's overhead in TAP mode over IPv4 with any of its AEADs: 28 + 1 message type
/// + 8 key id and nonce + 16 tag + 14 (VpnCloud 2.3.0 src/crypto/core.rs, common.rs).
const VPNCLOUD_TAP_OVERHEAD: i64 = 67;
/// With only `plain` allowed: 28 + 1 + 14.
const VPNCLOUD_PLAIN_TAP_OVERHEAD: i64 = 43;

fn methods(d: &netdoctor_lab::diagnosis::Diagnosis) -> Result<Vec<String>> {
    Ok(d.at("/facts/tunnel/methods")?
        .as_array()
        .context("tunnel.methods is not a list")?
        .iter()
        .filter_map(Value::as_str)
        .map(str::to_owned)
        .collect())
}

#[test]
fn vpncloud_tap_mesh_left_at_1500_exceeds_the_underlay() -> Result<()> {
    lab_guard!(tools = VPNCLOUD_TOOLS);
    let mesh = TapMesh::new(Daemon::VpnCloud(&[]), 1500, &unique_ifname())?;
    let (d, report, _) = mesh.diagnose_under_load()?;
    ensure!(
        report.received_bytes > 0,
        "nothing crossed the VpnCloud mesh: {}",
        mesh.logs()
    );
    assert_identified(&d, &mesh)?;
    let max_mtu = assert_exceeds(&d, &mesh)?;
    ensure!(
        max_mtu == UNDERLAY_MTU - VPNCLOUD_TAP_OVERHEAD,
        "max_mtu {max_mtu}, VpnCloud TAP fits {}: {}",
        UNDERLAY_MTU - VPNCLOUD_TAP_OVERHEAD,
        d.describe()
    );
    Ok(())
}

#[test]
fn vpncloud_tap_mesh_at_the_mtu_that_fits_has_no_mtu_finding() -> Result<()> {
    lab_guard!(tools = VPNCLOUD_TOOLS);
    let mtu = (UNDERLAY_MTU - VPNCLOUD_TAP_OVERHEAD) as u32;
    let mesh = TapMesh::new(Daemon::VpnCloud(&[]), mtu, &unique_ifname())?;
    let (d, _, wire) = mesh.diagnose_under_load()?;
    assert_identified(&d, &mesh)?;
    d.assert_none_of(MTU_FINDINGS)?;
    let on_wire = assert_fits_on_the_wire(&d, &wire, i64::from(mtu))?;
    let measured = d.i64("/facts/tunnel/overhead_measured")?;
    let expected = d.i64("/facts/tunnel/overhead_expected")?;
    println!(
        "VpnCloud TAP at MTU {mtu}: {on_wire} bytes of overhead on the wire, netdoctor \
         measured {measured}, expects {expected}"
    );
    ensure!(
        on_wire == VPNCLOUD_TAP_OVERHEAD && measured == on_wire && expected == on_wire,
        "overhead: wire {on_wire}, netdoctor measured {measured}, expected {expected}: {}",
        d.describe()
    );
    // No algorithms configured: VpnCloud's defaults, all encrypting.
    ensure!(methods(&d)?.is_empty(), "methods: {}", d.describe());
    Ok(())
}

/// With only `plain` allowed VpnCloud adds 1 byte, not 25: a mesh at 1500 - 43 = 1457 fits,
/// and netdoctor, reading the configuration, must not call it oversized.
#[test]
fn vpncloud_plain_at_the_largest_mtu_that_fits_is_not_flagged() -> Result<()> {
    lab_guard!(tools = VPNCLOUD_TOOLS);
    let mtu = UNDERLAY_MTU - VPNCLOUD_PLAIN_TAP_OVERHEAD;
    let mesh = TapMesh::new(Daemon::VpnCloud(&["plain"]), mtu as u32, &unique_ifname())?;
    let (d, _, wire) = mesh.diagnose_under_load()?;
    assert_identified(&d, &mesh)?;
    let on_wire = assert_fits_on_the_wire(&d, &wire, mtu)?;
    let expected = d.i64("/facts/tunnel/overhead_expected")?;
    ensure!(
        on_wire == VPNCLOUD_PLAIN_TAP_OVERHEAD && expected == on_wire && methods(&d)? == ["plain"],
        "VpnCloud plain at MTU {mtu}: {on_wire} bytes of overhead on the wire, netdoctor \
         expects {expected}: {}",
        d.describe()
    );
    d.assert_none_of(MTU_FINDINGS)
}

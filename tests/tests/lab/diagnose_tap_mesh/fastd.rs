//! fastd (`mode tap`): identification, the MTU verdict at an oversized and a fitting MTU,
//! and the `null` method's smaller overhead.

use anyhow::{ensure, Context, Result};
use netdoctor_lab::lab_guard;

use crate::common_mesh::MTU_FINDINGS;
use crate::diagnose_tap_mesh::config::{FASTD_TOOLS, UNDERLAY_MTU};
use crate::diagnose_tap_mesh::mesh::{unique_ifname, Daemon, TapMesh};
use crate::diagnose_tap_mesh::verdicts::{
    assert_exceeds, assert_fits_on_the_wire, assert_identified,
};

pub(crate) const FASTD_METHOD: &str = "salsa2012+umac";
/// fastd's documented overhead in TAP mode over IPv4: 28 + 24 + 14 (manual, mtu.rst).
pub(crate) const FASTD_TAP_OVERHEAD: i64 = 66;

#[test]
fn fastd_tap_mesh_is_identified_and_oversized_mtu_flagged() -> Result<()> {
    lab_guard!(tools = FASTD_TOOLS);
    let mesh = TapMesh::new(Daemon::Fastd(FASTD_METHOD), 1500, &unique_ifname())?;
    let (d, report, wire) = mesh.diagnose_under_load()?;
    ensure!(
        report.received_bytes > 0,
        "nothing crossed the fastd mesh: {}",
        mesh.logs()
    );
    assert_identified(&d, &mesh)?;
    let max_mtu = assert_exceeds(&d, &mesh)?;
    ensure!(
        max_mtu == UNDERLAY_MTU - FASTD_TAP_OVERHEAD,
        "max_mtu {max_mtu}, fastd TAP fits {}: {}",
        UNDERLAY_MTU - FASTD_TAP_OVERHEAD,
        d.describe()
    );
    // fastd leaves DF off: its oversized datagrams are fragmented on the underlay, and
    // netdoctor's fragment count must say so as the wire does.
    let fragments = d.i64("/facts/tunnel/underlay_fragments")?;
    ensure!(
        wire.fragments > 0 && fragments > 0,
        "fragments: wire {}, netdoctor {fragments}: {}",
        wire.fragments,
        d.describe()
    );
    d.finding("mtu.underlay_fragmentation")?;
    Ok(())
}

#[test]
fn fastd_tap_mesh_at_fitting_mtu_has_no_mtu_finding() -> Result<()> {
    lab_guard!(tools = FASTD_TOOLS);
    let mtu = (UNDERLAY_MTU - FASTD_TAP_OVERHEAD) as u32;
    let mesh = TapMesh::new(Daemon::Fastd(FASTD_METHOD), mtu, &unique_ifname())?;
    let (d, _, wire) = mesh.diagnose_under_load()?;
    assert_identified(&d, &mesh)?;
    d.assert_none_of(MTU_FINDINGS)?;
    let on_wire = assert_fits_on_the_wire(&d, &wire, i64::from(mtu))?;
    let measured = d.i64("/facts/tunnel/overhead_measured")?;
    let expected = d.i64("/facts/tunnel/overhead_expected")?;
    println!(
        "fastd {FASTD_METHOD} TAP at MTU {mtu}: {on_wire} bytes of overhead on the wire, \
         netdoctor measured {measured}, expects {expected}"
    );
    ensure!(
        on_wire == FASTD_TAP_OVERHEAD && measured == on_wire && expected == on_wire,
        "overhead: wire {on_wire}, netdoctor measured {measured}, expected {expected}: {}",
        d.describe()
    );
    Ok(())
}

/// fastd's `null` method adds 1 byte, not 24 (fastd manual, mtu.rst; notes): a TAP mesh
/// at 1500 - 28 - 1 - 14 = 1457 fits, and netdoctor must not call it oversized.
#[test]
fn fastd_null_at_the_largest_mtu_that_fits_is_not_flagged() -> Result<()> {
    lab_guard!(tools = FASTD_TOOLS);
    let mtu = UNDERLAY_MTU - 28 - 1 - 14;
    let mesh = TapMesh::new(Daemon::Fastd("null"), mtu as u32, &unique_ifname())?;
    let (d, _, wire) = mesh.diagnose_under_load()?;
    assert_identified(&d, &mesh)?;
    let on_wire = assert_fits_on_the_wire(&d, &wire, mtu)?;
    ensure!(
        on_wire + mtu == UNDERLAY_MTU,
        "fastd null at MTU {mtu}: {on_wire} bytes of overhead on the wire ({})",
        wire.describe()
    );
    let expected = d.i64("/facts/tunnel/overhead_expected")?;
    println!(
        "fastd null TAP at MTU {mtu}: {on_wire} bytes of overhead on the wire; netdoctor \
         expects {expected}, advises {}",
        d.i64("/facts/tunnel/max_mtu")?
    );
    d.assert_none_of(&["mtu.tunnel_exceeds_underlay"])
        .with_context(|| format!("fastd null fits at MTU {mtu} ({on_wire} bytes of overhead on the wire), netdoctor expects {expected}"))?;
    Ok(())
}

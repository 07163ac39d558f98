//! Checks the tests share: the daemon identified, the oversized-MTU verdict, and a fitting
//! MTU confirmed on the wire.

use anyhow::{ensure, Context, Result};
use netdoctor_lab::PairTopology;
use serde_json::Value;

use crate::common_mesh::{mtu_fix, Diagnosis};
use crate::diagnose_tap_mesh::config::UNDERLAY_MTU;
use crate::diagnose_tap_mesh::mesh::TapMesh;
use crate::diagnose_tap_mesh::wire::WireCount;

/// netdoctor recognised the daemon, its port, learnt the endpoint from the traffic and
/// picked the right underlay.
pub(crate) fn assert_identified(d: &Diagnosis, mesh: &TapMesh) -> Result<()> {
    let daemon = mesh.daemon;
    let ctx = || d.describe();
    ensure!(
        d.str("/kind")? == "tap",
        "kind {} is not tap: {}",
        d.str("/kind")?,
        ctx()
    );
    ensure!(
        d.bool("/facts/tunnel/present")?,
        "tunnel not recognised: {}",
        ctx()
    );
    ensure!(
        d.str("/facts/tunnel/kind")? == daemon.kind(),
        "tunnel kind {:?}, expected {:?}: {}",
        d.str("/facts/tunnel/kind")?,
        daemon.kind(),
        ctx()
    );
    ensure!(
        d.str("/facts/tunnel/daemon")? == daemon.command(),
        "daemon {:?}, expected {:?}: {}",
        d.str("/facts/tunnel/daemon")?,
        daemon.command(),
        ctx()
    );
    ensure!(
        d.i64("/facts/tunnel/port")? == i64::from(daemon.port()),
        "port {}, expected {}: {}",
        d.i64("/facts/tunnel/port")?,
        daemon.port(),
        ctx()
    );
    let endpoints: Vec<&str> = d
        .at("/facts/tunnel/endpoints")?
        .as_array()
        .context("endpoints is not an array")?
        .iter()
        .filter_map(Value::as_str)
        .collect();
    ensure!(
        endpoints == [mesh.b_endpoint().as_str()],
        "endpoints learnt from the traffic {endpoints:?}, expected [{}]: {}",
        mesh.b_endpoint(),
        ctx()
    );
    ensure!(
        d.str("/facts/tunnel/underlay_iface")? == PairTopology::IFNAME,
        "underlay {:?}, expected {}: {}",
        d.str("/facts/tunnel/underlay_iface")?,
        PairTopology::IFNAME,
        ctx()
    );
    ensure!(
        d.i64("/facts/tunnel/underlay_mtu")? == UNDERLAY_MTU,
        "underlay MTU {}, expected {UNDERLAY_MTU}: {}",
        d.i64("/facts/tunnel/underlay_mtu")?,
        ctx()
    );
    let peers = d.at("/facts/peers")?.as_array().context("peers")?;
    ensure!(
        peers
            .iter()
            .any(|p| p.get("endpoint").and_then(Value::as_str) == Some(&mesh.b_endpoint())),
        "no peer with endpoint {}: {}",
        mesh.b_endpoint(),
        ctx()
    );
    Ok(())
}

/// The oversized-MTU verdict: mtu.tunnel_exceeds_underlay, critical, whose fix sets the
/// largest fitting MTU computed from the underlay and the expected overhead. Returns that
/// MTU.
pub(crate) fn assert_exceeds(d: &Diagnosis, mesh: &TapMesh) -> Result<i64> {
    let f = d.finding("mtu.tunnel_exceeds_underlay")?;
    ensure!(
        f.get("severity").and_then(Value::as_str) == Some("critical"),
        "severity of {f}"
    );
    let overhead = d.i64("/facts/tunnel/overhead_expected")?;
    let underlay = d.i64("/facts/tunnel/effective_underlay_mtu")?;
    let max_mtu = d.i64("/facts/tunnel/max_mtu")?;
    ensure!(
        underlay == UNDERLAY_MTU && max_mtu == underlay - overhead && max_mtu < UNDERLAY_MTU,
        "max_mtu {max_mtu} is not the underlay {underlay} minus the overhead {overhead}: {}",
        d.describe()
    );
    let fix = f.get("fix").and_then(Value::as_str).unwrap_or_default();
    ensure!(
        fix.contains(&mtu_fix(&mesh.ifname, max_mtu)),
        "fix {fix:?} does not set {} to {max_mtu}",
        mesh.ifname
    );
    Ok(max_mtu)
}

/// Full-size inner packets crossed the underlay as single datagrams: the MTU fits.
pub(crate) fn assert_fits_on_the_wire(d: &Diagnosis, wire: &WireCount, mtu: i64) -> Result<i64> {
    ensure!(
        wire.fragments == 0,
        "{} fragments on the underlay at MTU {mtu}: {}",
        wire.fragments,
        wire.describe()
    );
    let inner = d.i64("/facts/traffic/max_segment_out")?;
    ensure!(
        inner == mtu,
        "largest inner packet {inner}, expected full-size {mtu} packets: {}",
        d.describe()
    );
    let outer = wire
        .dominant_outer()
        .with_context(|| format!("no tunnel datagram on the wire: {}", wire.describe()))?;
    ensure!(
        wire.by_len.get(&outer).copied().unwrap_or(0) >= 100,
        "too few full-size datagrams to measure: {}",
        wire.describe()
    );
    Ok(outer - mtu)
}

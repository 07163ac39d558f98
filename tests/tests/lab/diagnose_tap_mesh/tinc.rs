//! tinc (`Mode = switch`): identification, the MTU verdict at an oversized, a fitting and the
//! largest fitting MTU, and its PMTU probes kept out of the measured overhead.

use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use netdoctor_lab::{cmd, lab_guard, Netns};
use serde_json::Value;

use crate::common_mesh::MTU_FINDINGS;
use crate::diagnose_tap_mesh::config::{TINC_TOOLS, TUNNEL_B, UNDERLAY_MTU};
use crate::diagnose_tap_mesh::mesh::{unique_ifname, Daemon, TapMesh};
use crate::diagnose_tap_mesh::verdicts::{
    assert_exceeds, assert_fits_on_the_wire, assert_identified,
};

#[test]
fn tinc_tap_mesh_is_identified_and_oversized_mtu_flagged() -> Result<()> {
    lab_guard!(tools = TINC_TOOLS);
    let mesh = TapMesh::new(Daemon::Tinc, 1500, &unique_ifname())?;
    let (d, report, wire) = mesh.diagnose_under_load()?;
    ensure!(
        report.received_bytes > 0,
        "nothing crossed the tinc mesh: {}",
        mesh.logs()
    );
    assert_identified(&d, &mesh)?;
    let max_mtu = assert_exceeds(&d, &mesh)?;
    // tinc answers oversized DF packets with its own ICMP frag-needed (its PMTU), so the
    // bulk connection's path MTU shrank to what tinc fits: netdoctor's advice must fit too.
    let bulk = d.bulk_flow()?;
    let fitted = bulk
        .get("pmtu")
        .and_then(Value::as_i64)
        .context("flow pmtu")?;
    println!(
        "tinc at MTU 1500: netdoctor expects {} bytes of overhead, advises MTU {max_mtu}; \
         the bulk connection's path MTU settled at {fitted} (tinc's own ICMP); {}",
        d.i64("/facts/tunnel/overhead_expected")?,
        wire.describe()
    );
    ensure!(
        fitted < UNDERLAY_MTU && max_mtu <= fitted,
        "advised MTU {max_mtu} vs the path MTU {fitted} tinc reported: {}",
        d.describe()
    );
    Ok(())
}

#[test]
fn tinc_tap_mesh_at_fitting_mtu_has_no_mtu_finding() -> Result<()> {
    lab_guard!(tools = TINC_TOOLS);
    let mtu = 1400;
    let mesh = TapMesh::new(Daemon::Tinc, mtu, &unique_ifname())?;
    let (d, _, wire) = mesh.diagnose_under_load()?;
    assert_identified(&d, &mesh)?;
    d.assert_none_of(MTU_FINDINGS)?;
    let on_wire = assert_fits_on_the_wire(&d, &wire, i64::from(mtu))?;
    let measured = d.i64("/facts/tunnel/overhead_measured")?;
    println!(
        "tinc at MTU {mtu}: {on_wire} bytes of overhead on the wire, netdoctor measured \
         {measured}, expects {}",
        d.i64("/facts/tunnel/overhead_expected")?
    );
    Ok(())
}

/// tinc sends PMTU probes, UDP datagrams on its port up to the path's limit, whatever the
/// TAP MTU: they are not encapsulated packets and must not count as the measured overhead
/// (outer minus inner full-size packet). The data plane cannot tell them from data on the
/// same flow, so netdoctor does not measure tinc's overhead (-1, "unknown"); what it must
/// never do is report the probes' inflated figure.
#[test]
fn tinc_measured_overhead_is_not_inflated_by_pmtu_probes() -> Result<()> {
    lab_guard!(tools = TINC_TOOLS);
    let mtu = 1400;
    let mesh = TapMesh::new(Daemon::Tinc, mtu, &unique_ifname())?;
    let (d, _, wire) = mesh.diagnose_under_load()?;
    let on_wire = assert_fits_on_the_wire(&d, &wire, i64::from(mtu))?;
    let measured = d.i64("/facts/tunnel/overhead_measured")?;
    println!(
        "tinc at MTU {mtu}: full-size packets carry {on_wire} bytes of overhead on the wire \
         ({}); netdoctor measured {measured}",
        wire.describe()
    );
    ensure!(
        measured == on_wire || measured == -1,
        "netdoctor's measured overhead {measured} is neither the wire's {on_wire} for \
         full-size {mtu}-byte packets nor -1 (not measured); tinc's PMTU probes on the wire: \
         {}: {}",
        wire.describe(),
        d.describe()
    );
    Ok(())
}

/// Asks tinc how large an inner packet it carries: tinc answers a DF packet above its
/// path MTU with an ICMP frag-needed naming it. Its PMTU discovery refines the figure for
/// a few seconds (1443, 1440, 1437 here): wait until it has not changed for 5 s.
fn tinc_reported_mtu(ns: &Netns, ifname: &str) -> Result<i64> {
    let deadline = Instant::now() + Duration::from_secs(40);
    let mut last: Option<(i64, Instant)> = None;
    let size = (UNDERLAY_MTU - 28).to_string();
    loop {
        ns.ip(&["route", "flush", "cache"])?;
        let out = ns.output(&[
            "ping", "-n", "-c", "1", "-W", "1", "-M", "do", "-s", &size, TUNNEL_B,
        ])?;
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        // "Frag needed and DF set (mtu = 1437)" or "local error: message too long, mtu=1437"
        let mtu = text.split("mtu").nth(1).and_then(|rest| {
            rest.trim_start_matches([' ', '='])
                .split(|c: char| !c.is_ascii_digit())
                .next()?
                .parse::<i64>()
                .ok()
        });
        match (mtu, last) {
            (Some(m), Some((prev, since))) if m == prev => {
                if m < UNDERLAY_MTU && since.elapsed() >= Duration::from_secs(5) {
                    return Ok(m);
                }
            }
            (Some(m), _) => last = Some((m, Instant::now())),
            (None, _) => last = None,
        }
        if Instant::now() >= deadline {
            bail!("tinc reported no stable MTU on {ifname} within 40 s; last ping: {text}");
        }
        std::thread::sleep(Duration::from_millis(700));
    }
}

/// The installed tinc's largest fitting MTU, measured: the size tinc's PMTU discovery
/// settles on, checked on the wire (full-size packets cross as single datagrams). At that
/// MTU the tunnel fits, so netdoctor must not call it oversized, and its expected overhead
/// must agree with the wire's (within one 16-byte cipher block of padding).
#[test]
fn tinc_at_the_largest_mtu_that_fits_is_not_flagged() -> Result<()> {
    lab_guard!(tools = TINC_TOOLS);
    let version = cmd::host_run(&["tincd", "--version"])?;
    let version = version.lines().next().unwrap_or_default().trim().to_owned();
    let mesh = TapMesh::new(Daemon::Tinc, 1500, &unique_ifname())?;
    let fits = tinc_reported_mtu(&mesh.pair.a, &mesh.ifname)?;
    for ns in [&mesh.pair.a, &mesh.pair.b] {
        ns.set_mtu(&mesh.ifname, fits as u32)?;
        ns.ip(&["route", "flush", "cache"])?;
    }
    let (d, _, wire) = mesh.diagnose_under_load()?;
    assert_identified(&d, &mesh)?;
    let on_wire = assert_fits_on_the_wire(&d, &wire, fits)?;
    let expected = d.i64("/facts/tunnel/overhead_expected")?;
    let max_mtu = d.i64("/facts/tunnel/max_mtu")?;
    println!(
        "{version}: largest fitting TAP MTU on a {UNDERLAY_MTU} underlay {fits} \
         ({on_wire} bytes of overhead on the wire at that size, {} bytes of budget); \
         netdoctor expects {expected} bytes of overhead and advises {max_mtu}",
        UNDERLAY_MTU - fits
    );
    let mut problems = Vec::new();
    if !d.all("mtu.tunnel_exceeds_underlay").is_empty() {
        problems.push(format!(
            "mtu.tunnel_exceeds_underlay raised at MTU {fits}, which fits the underlay \
             ({on_wire}-byte overhead on the wire, no fragments)"
        ));
    }
    if !(0..=15).contains(&(expected - on_wire)) {
        problems.push(format!(
            "overhead_expected {expected} for {version} vs {on_wire} on the wire (at most 15 \
             bytes of CBC padding more are possible)"
        ));
    }
    if !(fits - 15..=fits).contains(&max_mtu) {
        problems.push(format!(
            "max_mtu {max_mtu}, the largest MTU that fits is {fits}"
        ));
    }
    ensure!(
        problems.is_empty(),
        "{}: {}",
        problems.join("; "),
        d.describe()
    );
    Ok(())
}

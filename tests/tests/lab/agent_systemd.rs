//! The systemd unit shipped in `agent/`: its capability set is enough for the agent to
//! attach, evaluate and probe, and the unit file is valid.

use std::path::{Path, PathBuf};

use anyhow::{ensure, Context, Result};
use netdoctor_lab::agent::Agent;
use netdoctor_lab::attached;
use netdoctor_lab::{ci, wg_over_pair};

fn unit_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../agent/netdoctor-agent.service")
}

/// The `CapabilityBoundingSet=` of the unit, e.g. `["CAP_BPF", ...]`.
fn unit_capabilities() -> Result<Vec<String>> {
    let text = std::fs::read_to_string(unit_path()).context("reading the unit")?;
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("CapabilityBoundingSet="))
        .context("the unit has no CapabilityBoundingSet=")?;
    Ok(line.split_whitespace().map(str::to_owned).collect())
}

#[test]
fn the_units_capabilities_are_enough_for_the_agent() -> Result<()> {
    if !ci::require_root_or_skip() || !ci::require_tools_or_skip(&["setpriv", "wireguard-go", "wg"])
    {
        return Ok(());
    }
    let caps = unit_capabilities()?;
    ensure!(
        !caps.iter().any(|c| c == "CAP_SYS_ADMIN"),
        "the unit must not need CAP_SYS_ADMIN: {caps:?}"
    );
    let (pair, tunnel) = wg_over_pair(1500, 1480)?;
    // Root, but with exactly the unit's bounding set: what systemd would give it.
    let set = format!(
        "-all,{}",
        caps.iter()
            .map(|c| format!("+{}", c.trim_start_matches("CAP_").to_lowercase()))
            .collect::<Vec<_>>()
            .join(",")
    );
    let agent = Agent::start_wrapped(
        &pair.a,
        &[
            "setpriv",
            "--bounding-set",
            &set,
            "--inh-caps",
            "-all",
            "--",
        ],
        &["--probe-interval", "10s"],
    )?;
    let status = std::fs::read_to_string(format!("/proc/{}/status", agent.pid()))?;
    println!(
        "{}",
        status
            .lines()
            .filter(|l| l.starts_with("Cap"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    let wg = tunnel.a.ifname().to_owned();
    // Attached, socket and drop probes loaded (no notes), the finding evaluated, the
    // endpoint probed.
    let ready = agent.get_json("/readyz")?;
    ensure!(
        ready["notes"].as_array().is_some_and(Vec::is_empty),
        "signals missing under the unit's capabilities: {ready}"
    );
    ensure!(
        !attached::attached(&pair.a, &wg)?.tcx_ingress.is_empty(),
        "nothing attached to {wg}"
    );
    agent.poll(
        &format!("/api/v1/interfaces/{wg}"),
        std::time::Duration::from_secs(30),
        "the tunnel's facts with a probed path MTU",
        |r| (r.status == 200 && r.json["facts"]["probe"]["ran"] == true).then_some(()),
    )?;
    Ok(())
}

/// The value of directive `key` in the unit, e.g. `UMask`.
fn unit_directive(key: &str) -> Result<Option<String>> {
    let text = std::fs::read_to_string(unit_path()).context("reading the unit")?;
    let prefix = format!("{key}=");
    Ok(text
        .lines()
        .find_map(|l| l.trim().strip_prefix(&prefix).map(str::to_owned)))
}

#[test]
fn the_unit_keeps_the_history_private() -> Result<()> {
    // Files the agent creates (the history, its WAL) and its state directory are its
    // own, whatever the agent itself sets.
    for (key, want) in [("UMask", "0077"), ("StateDirectoryMode", "0700")] {
        let got = unit_directive(key)?;
        ensure!(
            got.as_deref() == Some(want),
            "the unit must set {key}={want}, has {got:?}"
        );
    }
    Ok(())
}

#[test]
fn the_unit_file_is_valid() -> Result<()> {
    if !ci::on_path("systemd-analyze") {
        ci::skip("systemd-analyze is not installed");
        return Ok(());
    }
    let out = std::process::Command::new("systemd-analyze")
        .arg("verify")
        .arg(unit_path())
        .output()?;
    let text = String::from_utf8_lossy(&out.stderr);
    // The binary is not installed where the unit expects it on a build machine.
    let problems: Vec<&str> = text
        .lines()
        .filter(|l| !l.contains("is not executable") && !l.trim().is_empty())
        .collect();
    ensure!(
        problems.is_empty(),
        "systemd-analyze verify:\n{}",
        problems.join("\n")
    );
    Ok(())
}

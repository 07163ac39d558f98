//! The agent on a Tailscale node whose only peer is relayed by DERP (UDP between the nodes
//! dropped: `netdoctor_lab::tailscale`): its API shows the tailscale device as a WireGuard
//! tunnel with the peer and its path, the finding `tailscale.relayed` and the peer in the
//! metrics; the dashboard, in headless Chromium, shows the peer's relay on the card, the
//! finding with its fix, and a "Diagnose now" report that lists it.
//!
//! Needs root, BPF, iperf3, nft, Go (tailscaled), chromium, node and the dashboard's npm
//! packages; skips elsewhere, fails under CI=true. Build the binary first: `cargo build -p
//! netdoctor`.

use std::time::{Duration, Instant};

use anyhow::{ensure, Result};
use netdoctor_lab::agent::Agent;
use netdoctor_lab::dashboard::{self, repo_root, require_browser_or_skip};
use netdoctor_lab::tailscale::{self, TailscaleMesh, DERP_REGION};
use netdoctor_lab::{ci, Iperf3Server};

const FINDING: &str = "tailscale.relayed";

#[test]
fn tailscale_lane_agent_api_and_dashboard_show_the_relayed_peer() -> Result<()> {
    if !ci::lab_ready(&["iperf3", "nft", "ping"])
        || !tailscale::require_go_or_skip()
        || !require_browser_or_skip()
    {
        return Ok(());
    }
    let started = Instant::now();
    let mesh = TailscaleMesh::new(true)?;
    mesh.wait_for_path(false)?;
    let b_ip = mesh.tailscale_ip_of_b()?;
    let key = mesh.key_of_b()?;
    let ifname = mesh.a.ifname.clone();
    let _server = Iperf3Server::start(&mesh.ns_b, 5201)?;
    // Throttled: the agent and Chromium need the CPU too; relayed traffic is what counts.
    let mut traffic = mesh
        .ns_a
        .spawn(&["iperf3", "-c", &b_ip, "-t", "300", "-b", "20M"])?;
    let agent = Agent::start(&mesh.ns_a, &["--no-probe"])?;

    let path = format!("/api/v1/interfaces/{ifname}");
    let iface = agent.poll(&path, Duration::from_secs(60), "a relayed peer", |r| {
        let p = &r.json["facts"]["peers"][0];
        (r.status == 200 && p["path"] == "derp" && p["derp_bytes"].as_i64() > Some(0))
            .then(|| r.json.clone())
    })?;
    let ctx = || format!("{iface:#}{}", mesh.logs());
    let t = &iface["facts"]["tunnel"];
    ensure!(
        iface["kind"] == "wireguard" && iface["watched"] == true,
        "{}",
        ctx()
    );
    ensure!(
        t["present"] == true && t["kind"] == "wireguard" && t["daemon"] == "tailscaled",
        "{}",
        ctx()
    );
    let p = &iface["facts"]["peers"][0];
    ensure!(
        p["name"] == key.as_str() && p["host"] == mesh.b.host,
        "{}",
        ctx()
    );
    ensure!(
        p["derp_region"] == DERP_REGION && p["online"] == true,
        "{}",
        ctx()
    );

    let findings = format!("/api/v1/findings?interface={ifname}&state=active");
    let subject = format!("peer {key}");
    let finding = agent.poll(&findings, Duration::from_secs(60), FINDING, |r| {
        r.items()
            .iter()
            .find(|f| f["id"] == FINDING && f["subject"] == subject.as_str())
            .cloned()
    })?;
    ensure!(finding["severity"] == "warning", "{finding:#}");

    let metrics = agent.metrics()?;
    let iface_label = format!("interface=\"{ifname}\"");
    for (name, labels) in [
        ("netdoctor_wireguard_peers{", vec![iface_label.as_str()]),
        (
            "netdoctor_finding_active{",
            vec![
                iface_label.as_str(),
                "id=\"tailscale.relayed\"",
                "severity=\"warning\"",
            ],
        ),
    ] {
        ensure!(
            metrics.lines().any(|l| l.starts_with(name)
                && labels.iter().all(|x| l.contains(x))
                && l.ends_with(" 1")),
            "no {name}{labels:?}}} 1 in the metrics:\n{}",
            metrics
                .lines()
                .filter(|l| l.contains(&ifname))
                .collect::<Vec<_>>()
                .join("\n")
        );
    }

    let expect = serde_json::json!({
        "mtus": { ifname.as_str(): 1280 },
        "interface": ifname,
        "finding": FINDING,
        "fix": "tailscale netcheck",
        "diagnose_finding": FINDING,
        "peers": { ifname.as_str(): [
            { "host": mesh.b.host, "path": "derp", "text": format!("DERP relay ({DERP_REGION})") },
        ] },
    });
    let shots = repo_root().join("tests/artifacts/dashboard-tailscale");
    // The browser runs in a's namespace, where the agent listens.
    dashboard::e2e(&agent, Some(&mesh.ns_a), &expect, &shots, None)?;
    ensure!(
        traffic.is_running(),
        "iperf3 ended early: {}",
        traffic.stderr()?
    );
    println!(
        "agent and dashboard on a relayed Tailscale peer: {:.0} s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

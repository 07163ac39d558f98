//! 7. The agent attached by netlink beside diagnoses of the same interface: its filters stay.
//!
//! Netlink is what kernels before 6.6 fall back to. Diagnoses from the command line by
//! netlink and through the agent's API each have filters of their own, so the agent's stay
//! and go on counting after they end.

use std::time::Duration;

use anyhow::{ensure, Context, Result};
use netdoctor_lab::agent::Agent;
use netdoctor_lab::netdoctor;
use netdoctor_lab::{attached, lab_guard, traffic, Netns, PairTopology, PingOpts};

use crate::agent_lifecycle::helpers::listed;
use crate::agent_lifecycle::lab::SETTLE;

/// netdoctor's filters on `ifname`, ingress then egress, as `tc filter show` lists them
/// (priority, handle and program id).
fn our_filters(ns: &Netns, ifname: &str) -> Result<Vec<String>> {
    let mut ours = Vec::new();
    for dir in ["ingress", "egress"] {
        let shown = ns.run(&["tc", "filter", "show", "dev", ifname, dir])?;
        ours.extend(
            shown
                .lines()
                .filter(|l| l.contains("nd_tc_"))
                .map(|l| format!("{dir}: {}", l.trim())),
        );
    }
    Ok(ours)
}

/// Egress packets the agent counted on `ifname` so far.
fn egress_packets(agent: &Agent, ifname: &str) -> Result<u64> {
    let r = agent.get("/api/v1/interfaces")?;
    listed(&r, ifname)
        .and_then(|i| i["counters"]["egress"]["packets"].as_u64())
        .with_context(|| format!("no counters for {ifname}: {}", r.describe()))
}

/// Ten pings, then waits until the agent's egress count of `ifname` rose by at least ten.
fn agent_keeps_counting(agent: &Agent, ns: &Netns, ifname: &str, after: &str) -> Result<()> {
    let before = egress_packets(agent, ifname)?;
    let ping = traffic::ping(
        ns,
        PairTopology::B_IP,
        &PingOpts {
            count: 10,
            interval_secs: 0.02,
            ..PingOpts::default()
        },
    )?;
    let sent = u64::from(ping.transmitted);
    agent.poll(
        "/api/v1/interfaces",
        SETTLE,
        &format!("the agent's counters of {ifname} rising by {sent} after {after}"),
        |r| {
            let now = listed(r, ifname)?["counters"]["egress"]["packets"].as_u64()?;
            (now >= before + sent).then_some(())
        },
    )
}

#[test]
fn diagnoses_beside_a_netlink_agent_leave_its_filters_counting() -> Result<()> {
    lab_guard!("tc", "ping");
    let pair = PairTopology::new(1500)?;
    let ns = &pair.a;
    let eth0 = PairTopology::IFNAME;
    let mut agent = Agent::start(ns, &["--no-probe", "--attach", "netlink"])?;
    agent.poll(
        "/api/v1/interfaces",
        SETTLE,
        "eth0 watched by netlink",
        |r| {
            listed(r, eth0)
                .filter(|i| i["hooks"]["method"] == "netlink")
                .map(drop)
        },
    )?;
    let agents = our_filters(ns, eth0)?;
    ensure!(agents.len() == 2, "the agent's filters: {agents:#?}");

    // A diagnosis by netlink from the command line: its own filters while it runs, none
    // of them, and all of the agent's, after.
    let out = netdoctor::run(
        Some(ns),
        &[
            "diagnose",
            eth0,
            "--attach",
            "netlink",
            "--duration",
            "2s",
            "--no-probe",
            "--json",
        ],
        Duration::from_secs(120),
    )?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    ensure!(out.status.success(), "diagnose: {}: {stderr}", out.status);
    ensure!(
        !stderr.contains("left attached"),
        "the diagnosis swept the agent's filters: {stderr}"
    );
    let after = our_filters(ns, eth0)?;
    ensure!(
        after == agents,
        "after the diagnosis, the agent's filters {agents:#?} became {after:#?}"
    );
    agent_keeps_counting(&agent, ns, eth0, "the command line's diagnosis")?;

    // A diagnosis through the API: a second data plane in the agent's process (by tcx
    // links on this kernel, by netlink where there are none).
    let r = agent.post(&format!("/api/v1/diagnose/{eth0}?duration=1s&probe=false"))?;
    ensure!(r.status == 200, "POST diagnose: {}", r.describe());
    ensure!(
        our_filters(ns, eth0)? == agents,
        "the API's diagnosis changed the agent's filters"
    );
    agent_keeps_counting(&agent, ns, eth0, "the API's diagnosis")?;

    let status = agent.terminate(Duration::from_secs(10))?;
    ensure!(status.success(), "SIGTERM: {status}");
    attached::wait_nothing_attached(ns, &["lo", eth0], Duration::from_secs(3))?;
    let qdiscs = ns.run(&["tc", "qdisc", "show", "dev", eth0])?;
    ensure!(
        !qdiscs.contains("clsact"),
        "the clsact the agent created stayed: {qdiscs}"
    );
    Ok(())
}

//! 2. A finding opens once, is refreshed, and resolves when the MTU is fixed.

use std::time::{Duration, Instant};

use anyhow::{ensure, Result};
use netdoctor_lab::agent::{self, Agent};
use netdoctor_lab::lab_guard;

use crate::agent_lifecycle::helpers::{finding_metric, now_ms, with_id};
use crate::agent_lifecycle::lab::{
    mtu_lab, EXCEEDS, FITTING_MTU, OVERSIZED_MTU, SETTLE, UNDERLAY_MTU,
};

#[test]
fn agent_finding_opens_once_and_resolves_when_the_mtu_is_fixed() -> Result<()> {
    lab_guard!("ping", "wireguard-go", "wg");
    let (pair, wg) = mtu_lab(FITTING_MTU)?;
    let ns = &pair.a;
    let name = wg.a.ifname();
    let agent = Agent::start(ns, &["--no-probe"])?;
    let active = format!("/api/v1/findings?interface={name}");

    // Healthy first: the agent sees what fits, and nothing is wrong.
    agent.poll(
        &format!("/api/v1/interfaces/{name}"),
        SETTLE,
        "facts of the healthy tunnel",
        |r| {
            let t = &r.json["facts"]["tunnel"];
            (r.json["mtu"] == FITTING_MTU
                && t["underlay_mtu"] == UNDERLAY_MTU
                && t["overhead_expected"] == 60
                && t["max_mtu"] == FITTING_MTU)
                .then_some(())
        },
    )?;
    let r = agent.get(&active)?;
    ensure!(
        r.status == 200 && with_id(&r, EXCEEDS).is_empty(),
        "healthy tunnel has {EXCEEDS}: {}",
        r.describe()
    );

    // Too big: the finding opens.
    let provoked = now_ms();
    ns.set_mtu(name, OVERSIZED_MTU)?;
    let opened = agent.poll(&active, SETTLE, "the finding, active", |r| {
        with_id(r, EXCEEDS).first().map(|f| (*f).clone())
    })?;
    ensure!(
        opened["interface"] == name
            && opened["state"] == "active"
            && opened["severity"] == "critical"
            && opened["resolved_ms"].is_null()
            && opened["opened_ms"]
                .as_i64()
                .is_some_and(|t| t >= provoked - 1000)
            && opened["last_seen_ms"].as_i64() >= opened["opened_ms"].as_i64()
            && opened["evidence"]["tunnel_mtu"] == OVERSIZED_MTU
            && opened["evidence"]["overhead_expected"] == 60
            && opened["evidence"]["underlay_route_mtu"] == UNDERLAY_MTU
            && opened["evidence"]["largest_fitting_mtu"] == FITTING_MTU
            && opened["fix"]
                .as_str()
                .is_some_and(|f| f.contains(&format!("ip link set dev {name} mtu {FITTING_MTU}"))),
        "opened finding: {opened}"
    );
    let opened_ms = opened["opened_ms"].as_i64().unwrap_or_default();

    // Exported as a metric, and as the interface's worst severity.
    let deadline = Instant::now() + SETTLE;
    loop {
        let m = finding_metric(&agent, EXCEEDS, name)?;
        if m == Some((1.0, "critical".to_owned())) {
            break;
        }
        ensure!(
            Instant::now() < deadline,
            "netdoctor_finding_active{{id=\"{EXCEEDS}\",interface=\"{name}\"}} is {m:?}, not 1 (critical)"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let iface = agent.get_json(&format!("/api/v1/interfaces/{name}"))?;
    ensure!(
        iface["worst_severity"] == "critical",
        "worst_severity: {}",
        iface["worst_severity"]
    );

    // Refreshed by later evaluations: one row, evaluations counting up.
    let refreshed = agent.poll(&active, SETTLE, "the finding, evaluated 3 times", |r| {
        with_id(r, EXCEEDS)
            .first()
            .filter(|f| f["evaluations"].as_u64() >= Some(3))
            .map(|f| (*f).clone())
    })?;
    ensure!(
        refreshed["opened_ms"] == opened_ms && refreshed["last_seen_ms"].as_i64() > Some(opened_ms),
        "refreshed finding: {refreshed}"
    );
    let all = agent.get(&format!("/api/v1/findings?state=all&interface={name}"))?;
    ensure!(
        with_id(&all, EXCEEDS).len() == 1,
        "one finding must be one row, not one per evaluation: {}",
        all.describe()
    );

    // Fixed: resolved, same row.
    let fixed = now_ms();
    ns.set_mtu(name, FITTING_MTU)?;
    let resolved = agent.poll(
        &format!("/api/v1/findings?state=resolved&interface={name}"),
        SETTLE,
        "the finding, resolved",
        |r| with_id(r, EXCEEDS).first().map(|f| (*f).clone()),
    )?;
    ensure!(
        resolved["state"] == "resolved"
            && resolved["opened_ms"] == opened_ms
            && resolved["resolved_ms"]
                .as_i64()
                .is_some_and(|t| t >= fixed - 1000)
            && resolved["resolved_ms"].as_i64() >= resolved["last_seen_ms"].as_i64()
            && resolved["evaluations"].as_u64() >= Some(3),
        "resolved finding: {resolved}"
    );
    let r = agent.get(&active)?;
    ensure!(
        r.status == 200 && with_id(&r, EXCEEDS).is_empty(),
        "still active after the fix: {}",
        r.describe()
    );
    let r = agent.get("/api/v1/findings?state=active")?;
    ensure!(
        r.status == 200 && with_id(&r, EXCEEDS).is_empty(),
        "still active after the fix: {}",
        r.describe()
    );
    let all = agent.get(&format!("/api/v1/findings?state=all&interface={name}"))?;
    ensure!(
        with_id(&all, EXCEEDS).len() == 1 && all.json["total"].as_u64() >= Some(1),
        "after resolution there must still be exactly one row: {}",
        all.describe()
    );
    agent.poll("/metrics", SETTLE, "netdoctor_finding_active gone", |r| {
        let samples = agent::parse_metrics(&r.text).ok()?;
        agent::find_metric(
            &samples,
            "netdoctor_finding_active",
            &[("id", EXCEEDS), ("interface", name)],
        )
        .is_empty()
        .then_some(())
    })?;
    Ok(())
}

//! The configuration timeline: a WireGuard MTU, a route and the namespace's
//! `net.ipv4.tcp_congestion_control` changed while the agent runs are each in
//! `/api/v1/events` within one interval, counted in the metrics, kept in SQLite across a
//! restart, and on the dashboard in Chromium (the timeline, the finding's cause, markers on
//! the charts); the finding the MTU change causes cites it. The control: the same lab with
//! no change records no event, and its finding cites nothing.

use std::time::{Duration, Instant};

use ::netdoctor::daemon::store::EventQuery;
use anyhow::{ensure, Context, Result};
use netdoctor_lab::agent::{self, Agent};
use netdoctor_lab::dashboard::{self, repo_root};
use netdoctor_lab::lab_guard;
use serde_json::Value;

use crate::agent_lifecycle::helpers::{open_store, with_id};
use crate::agent_lifecycle::lab::{mtu_lab, EXCEEDS, FITTING_MTU, OVERSIZED_MTU, SETTLE};

/// The evaluation interval of these tests.
pub(crate) const INTERVAL: Duration = Duration::from_secs(3);
/// What "within one interval" allows on two busy CPUs: the interval and a second.
const ONE_INTERVAL: Duration = Duration::from_secs(4);
/// A route the test adds through the tunnel.
const ROUTE: &str = "10.123.0.0/24";

/// The event of `kind` on `iface` whose text contains `text`, if served.
pub(crate) fn event<'a>(r: &'a agent::Reply, kind: &str, text: &str) -> Option<&'a Value> {
    r.items()
        .iter()
        .find(|e| e["kind"] == kind && e["text"].as_str().is_some_and(|t| t.contains(text)))
}

/// Polls the events until one of `kind` whose text contains `text` is there, within
/// [`ONE_INTERVAL`] of `since`.
pub(crate) fn within_one_interval(
    agent: &Agent,
    since: Instant,
    kind: &str,
    text: &str,
) -> Result<Value> {
    let left = ONE_INTERVAL.saturating_sub(since.elapsed());
    agent.poll(
        "/api/v1/events",
        left,
        &format!("the {kind} event {text:?}"),
        |r| event(r, kind, text).cloned(),
    )
}

/// `netdoctor_config_changes_total{kind}` counts at least so many changes of each kind.
pub(crate) fn expect_counted(agent: &Agent, kinds: &[(&str, f64)]) -> Result<()> {
    let samples = agent::parse_metrics(&agent.metrics()?)?;
    for (kind, at_least) in kinds {
        let m = agent::find_metric(
            &samples,
            "netdoctor_config_changes_total",
            &[("kind", kind)],
        );
        ensure!(
            m.first().is_some_and(|m| m.value >= *at_least),
            "netdoctor_config_changes_total{{kind=\"{kind}\"}}: {m:?}"
        );
    }
    Ok(())
}

/// The other congestion control a namespace may choose (`tcp_allowed_congestion_control`
/// outside the initial namespace: reno and the initial namespace's default).
fn other_cc(current: &str) -> &'static str {
    if current == "reno" {
        "bbr"
    } else {
        "reno"
    }
}

#[test]
fn agent_records_a_wireguard_mtu_a_route_and_a_sysctl_change_and_cites_the_mtu() -> Result<()> {
    lab_guard!("ping", "wireguard-go", "wg", "sysctl");
    let (pair, wg) = mtu_lab(FITTING_MTU)?;
    let ns = &pair.a;
    let name = wg.a.ifname();
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("history").join("netdoctor.db");
    let db_arg = db.to_string_lossy().into_owned();
    let interval = format!("{}s", INTERVAL.as_secs());
    let args = ["--no-probe", "--interval", &interval, "--database", &db_arg];
    let mut agent = Agent::start(ns, &args)?;
    agent.poll(
        &format!("/api/v1/interfaces/{name}"),
        SETTLE,
        "the tunnel's first window",
        |r| r.json["facts"]["tunnel"]["max_mtu"].as_u64().map(drop),
    )?;

    // The MTU: seen at once (rtnetlink), and the finding it causes cites it.
    let changed = Instant::now();
    ns.set_mtu(name, OVERSIZED_MTU)?;
    let mtu_text = format!("{name}'s MTU changed {FITTING_MTU} → {OVERSIZED_MTU}");
    let mtu = within_one_interval(&agent, changed, "link.mtu", &mtu_text)?;
    ensure!(
        mtu["interface"] == name
            && mtu["change"] == "changed"
            && mtu["old"].as_str().and_then(|v| v.parse().ok()) == Some(FITTING_MTU)
            && mtu["new"].as_str().and_then(|v| v.parse().ok()) == Some(OVERSIZED_MTU),
        "the MTU event: {mtu}"
    );
    let finding = agent.poll(
        &format!("/api/v1/findings?interface={name}"),
        SETTLE,
        "the finding the MTU change caused",
        |r| with_id(r, EXCEEDS).first().map(|f| (*f).clone()),
    )?;
    let cause = finding["cause"].as_str().unwrap_or_default();
    ensure!(
        cause.starts_with("began ") && cause.ends_with(&format!(" after {mtu_text}")),
        "the finding must cite the MTU change: {finding}"
    );

    // A route through the tunnel: seen at once too.
    let changed = Instant::now();
    ns.ip(&["route", "add", ROUTE, "dev", name])?;
    let route = within_one_interval(&agent, changed, "route", ROUTE)?;
    ensure!(
        route["change"] == "added"
            && route["interface"] == name
            && route["new"] == format!("dev {name}"),
        "the route event: {route}"
    );

    // The congestion control (this namespace's own): at the next window.
    let cc_key = "net.ipv4.tcp_congestion_control";
    let before = ns.read_sysctl(cc_key)?;
    let after = other_cc(&before);
    let changed = Instant::now();
    ns.sysctl(cc_key, after)?;
    let cc_text = format!("{cc_key} changed {before} → {after}");
    let cc = within_one_interval(&agent, changed, "sysctl", &cc_text);
    ns.sysctl(cc_key, &before)?;
    let cc = cc?;
    ensure!(
        cc["interface"] == "" && cc["subject"] == cc_key,
        "the sysctl event: {cc}"
    );
    // Restored: that is a change too.
    within_one_interval(
        &agent,
        Instant::now(),
        "sysctl",
        &format!("{cc_key} changed {after} → {before}"),
    )?;

    // Filtered by interface: the tunnel's two, not the host-wide sysctl.
    let mine = agent.get(&format!("/api/v1/events?iface={name}"))?;
    let kinds: Vec<&str> = mine
        .items()
        .iter()
        .filter_map(|e| e["kind"].as_str())
        .collect();
    ensure!(
        kinds == ["route", "link.mtu"],
        "the tunnel's events, newest first: {}",
        mine.describe()
    );
    expect_counted(
        &agent,
        &[("link.mtu", 1.0), ("route", 1.0), ("sysctl", 2.0)],
    )?;

    // On the dashboard in Chromium: the timeline lists them, the finding shows its cause,
    // every time chart of the tunnel marks them.
    if dashboard::require_browser_or_skip() {
        let expect = serde_json::json!({
            "mtus": { name: OVERSIZED_MTU },
            "finding": EXCEEDS,
            "interface": name,
            "events": [&mtu_text, &cc_text, format!("route {ROUTE} table main added")],
            "cause": format!("after {mtu_text}"),
            "chart_markers": 2,
        });
        let shots = repo_root().join("tests/artifacts/timeline");
        dashboard::e2e(&agent, Some(ns), &expect, &shots, None)?;
    }

    // Across a restart: in the database, served again, and the restart itself no change.
    let all = agent.get("/api/v1/events?limit=1000")?;
    let total = all.json["total"].as_u64().context("total")?;
    let status = agent.terminate(Duration::from_secs(10))?;
    ensure!(status.success(), "the agent stopped with {status}");
    let stored = open_store(&db)?
        .events(&EventQuery {
            limit: 1000,
            ..EventQuery::default()
        })
        .context("reading the events from SQLite")?;
    ensure!(
        stored.total == total,
        "{} events stored, {total} served",
        stored.total
    );
    for text in [
        &mtu_text,
        &cc_text,
        &format!("route {ROUTE} table main added"),
    ] {
        ensure!(
            stored.items.iter().any(|e| e.text.contains(text.as_str())),
            "{text:?} not in the database: {:?}",
            stored.items
        );
    }
    let agent = Agent::start(ns, &args)?;
    std::thread::sleep(INTERVAL * 2);
    let again = agent.get("/api/v1/events?limit=1000")?;
    ensure!(
        again.json["total"].as_u64() == Some(total)
            && event(&again, "link.mtu", &mtu_text).is_some(),
        "after the restart ({total} before): {}",
        again.describe()
    );
    Ok(())
}

#[test]
fn agent_without_a_change_records_no_event_and_its_finding_cites_none() -> Result<()> {
    lab_guard!("ping", "wireguard-go", "wg");
    // Too big from the start: the finding opens, and nothing changed before it.
    let (pair, wg) = mtu_lab(OVERSIZED_MTU)?;
    let ns = &pair.a;
    let name = wg.a.ifname();
    let interval = format!("{}s", INTERVAL.as_secs());
    let agent = Agent::start(ns, &["--no-probe", "--interval", &interval])?;
    let finding = agent.poll(
        &format!("/api/v1/findings?interface={name}"),
        SETTLE,
        "the finding, evaluated 3 times",
        |r| {
            with_id(r, EXCEEDS)
                .first()
                .filter(|f| f["evaluations"].as_u64() >= Some(3))
                .map(|f| (*f).clone())
        },
    )?;
    ensure!(
        finding.get("cause").is_none(),
        "a finding with no change before it: {finding}"
    );
    let events = agent.get("/api/v1/events")?;
    ensure!(
        events.status == 200 && events.json["total"] == 0,
        "no change, yet: {}",
        events.describe()
    );
    let samples = agent::parse_metrics(&agent.metrics()?)?;
    let counted: f64 = agent::find_metric(&samples, "netdoctor_config_changes_total", &[])
        .iter()
        .map(|m| m.value)
        .sum();
    ensure!(
        counted == 0.0,
        "netdoctor_config_changes_total sums to {counted}"
    );
    Ok(())
}

//! The alerting rules of `rules/prometheus/`: `promtool check rules`, their promtool unit
//! tests, and each alert's labels, annotations, metrics, finding ids and tests, loaded into
//! a real Prometheus.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use netdoctor_lab::prometheus::{self, Prometheus, PrometheusConfig};

use crate::prometheus_rules::api_metrics::{api_metrics, base_metric, metric_uses};

#[test]
fn alerting_rules_pass_promtool_check() -> Result<()> {
    if !prometheus::require_promtool_or_skip() {
        return Ok(());
    }
    let out = prometheus::promtool_check_rules(&[prometheus::rules_path()])?;
    ensure!(out.contains("SUCCESS"), "promtool check rules: {out}");
    Ok(())
}

#[test]
fn alerting_rules_pass_their_unit_tests() -> Result<()> {
    if !prometheus::require_promtool_or_skip() {
        return Ok(());
    }
    let files = prometheus::rule_test_paths()?;
    let out = prometheus::promtool_test_rules(&files)?;
    ensure!(
        out.matches("SUCCESS").count() == files.len(),
        "promtool test rules: {out}"
    );
    Ok(())
}

/// For each `alertname:` in the promtool tests: whether some case expects it to fire
/// (a non-empty `exp_alerts`) and some case expects silence (`exp_alerts: []`).
fn tested_alerts() -> Result<BTreeMap<String, (bool, bool)>> {
    let mut seen: BTreeMap<String, (bool, bool)> = BTreeMap::new();
    for path in prometheus::rule_test_paths()? {
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        let lines: Vec<&str> = text.lines().map(str::trim).collect();
        for (i, line) in lines.iter().enumerate() {
            let Some(name) = line.strip_prefix("alertname: ") else {
                continue;
            };
            let entry = seen.entry(name.trim().to_owned()).or_default();
            match lines.get(i + 1).copied() {
                Some("exp_alerts: []") => entry.1 = true,
                Some("exp_alerts:") => entry.0 = true,
                other => bail!(
                    "{}: `alertname: {name}` not followed by exp_alerts: {other:?}",
                    path.display()
                ),
            }
        }
    }
    Ok(seen)
}

/// Finding ids of the built-in rules (`rules/*.toml`).
fn finding_ids() -> Result<BTreeSet<String>> {
    let dir = prometheus::repo_root().join("rules");
    let mut ids = BTreeSet::new();
    for entry in std::fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "toml") {
            let text = std::fs::read_to_string(&path)?;
            let id = text
                .lines()
                .find_map(|l| l.strip_prefix("id = \""))
                .and_then(|l| l.strip_suffix('"'))
                .with_context(|| format!("{}: no id", path.display()))?;
            ids.insert(id.to_owned());
        }
    }
    Ok(ids)
}

#[test]
fn every_alert_is_labelled_documented_tested_and_loads_in_prometheus() -> Result<()> {
    if !prometheus::require_prometheus_or_skip() {
        return Ok(());
    }
    let prom = Prometheus::start(&PrometheusConfig {
        rule_files: vec![prometheus::rules_path()],
        ..PrometheusConfig::default()
    })?;
    // Evaluated every second: wait until every rule has run once without error.
    let deadline = Instant::now() + Duration::from_secs(20);
    let rules = loop {
        let rules = prom.alerting_rules()?;
        if !rules.is_empty() && rules.iter().all(|r| r.health == "ok") {
            break rules;
        }
        if Instant::now() >= deadline {
            let bad: Vec<String> = rules
                .iter()
                .filter(|r| r.health != "ok")
                .map(|r| format!("{} ({}: {})", r.name, r.health, r.last_error))
                .collect();
            bail!("rules not evaluated cleanly: {}", bad.join("; "));
        }
        std::thread::sleep(Duration::from_millis(200));
    };

    let metrics = api_metrics()?;
    let ids = finding_ids()?;
    let tested = tested_alerts()?;
    let names: BTreeSet<&str> = rules.iter().map(|r| r.name.as_str()).collect();
    let mut problems = Vec::new();
    for rule in &rules {
        let n = &rule.name;
        match rule.labels.get("severity").map(String::as_str) {
            Some("critical" | "warning") => {}
            other => problems.push(format!("{n}: severity {other:?}")),
        }
        for key in ["summary", "description"] {
            let text = rule.annotations.get(key).map(String::as_str).unwrap_or("");
            if text.is_empty() {
                problems.push(format!("{n}: no {key}"));
            }
        }
        let description = rule
            .annotations
            .get("description")
            .cloned()
            .unwrap_or_default();
        if !description.contains("Fix:") {
            problems.push(format!("{n}: the description gives no `Fix:`"));
        }
        // Per-interface alerts name the interface; agent alerts the instance and the
        // interfaces it watched (from netdoctor_interface_info).
        if rule.group == "netdoctor.agent" {
            if !description.contains("$labels.instance") {
                problems.push(format!("{n}: the description does not name the instance"));
            }
        } else if !description.contains("$labels.interface") {
            problems.push(format!("{n}: the description does not name the interface"));
        }
        for (metric, _) in metric_uses(&rule.query) {
            if base_metric(&metric, &metrics).is_none() {
                problems.push(format!("{n}: {metric} is not in docs/api.md"));
            }
        }
        // Finding ids quoted in the expression exist (a regex such as mtu\..* is not
        // an id).
        for part in rule.query.split("id=\"").skip(1) {
            let id = part.split('"').next().unwrap_or_default();
            if !ids.contains(id) {
                problems.push(format!("{n}: finding id {id:?} is not in rules/*.toml"));
            }
        }
        match tested.get(n) {
            Some((true, true)) => {}
            Some((fires, _)) => problems.push(format!(
                "{n}: promtool tests lack a case where it {}",
                if !fires { "fires" } else { "stays silent" }
            )),
            None => problems.push(format!("{n}: no promtool test")),
        }
        if rule.duration_s == 0.0 && n != "NetdoctorBPFAttachFailures" {
            problems.push(format!("{n}: no `for:`"));
        }
    }
    for name in tested.keys() {
        if !names.contains(name.as_str()) {
            problems.push(format!("the promtool tests name an unknown alert {name}"));
        }
    }
    ensure!(problems.is_empty(), "{}", problems.join("\n"));
    // The alerts of the issue are all there.
    for expected in [
        "NetdoctorMTUMisconfigured",
        "NetdoctorPMTUBlackhole",
        "NetdoctorTCPHighRetransmits",
        "NetdoctorCubicOnLossyPath",
        "NetdoctorWireGuardHandshakeStale",
        "NetdoctorDropsRising",
        "NetdoctorAgentDown",
        "NetdoctorMetricsMissing",
        "NetdoctorBPFProgramsNotAttached",
    ] {
        ensure!(names.contains(expected), "no alert {expected}");
    }
    // With no netdoctor target at all, only NetdoctorMetricsMissing may become active.
    for alert in prom.alerts()? {
        ensure!(
            alert.name() == "NetdoctorMetricsMissing",
            "unexpected alert without any data: {alert:?}"
        );
    }
    Ok(())
}

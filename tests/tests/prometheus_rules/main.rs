//! The Prometheus alerting rules (`rules/prometheus/`), the Grafana dashboard
//! (`dashboard/grafana/netdoctor.json`) and the lab's Prometheus helpers.
//!
//! Needs `promtool` and `prometheus` (Debian package `prometheus`): the tests skip
//! without them, and fail under CI=true. No root needed.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use netdoctor_lab::grafana::{self, Dashboard, Substitutions, DATASOURCE_UID};
use netdoctor_lab::prometheus::{self, Prometheus, PrometheusConfig, ScrapeJob, TargetHealth};

const SCRAPE_TIMEOUT: Duration = Duration::from_secs(30);

/// A metric of the table in docs/api.md (the contract).
#[derive(Debug, Clone)]
struct ApiMetric {
    /// `counter`, `gauge` or `histogram`.
    kind: String,
    /// Label names.
    labels: Vec<String>,
}

impl ApiMetric {
    fn has_interface(&self) -> bool {
        self.labels.iter().any(|l| l == "interface")
    }
}

/// The metrics of docs/api.md's table, by name.
fn api_metrics() -> Result<BTreeMap<String, ApiMetric>> {
    let path = prometheus::repo_root().join("docs/api.md");
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let mut metrics = BTreeMap::new();
    for line in text.lines() {
        // | `name` | type | labels |
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        if cells.len() < 5 {
            continue;
        }
        let Some(name) = cells[1]
            .strip_prefix("`netdoctor_")
            .and_then(|n| n.strip_suffix('`'))
        else {
            continue;
        };
        let kind = cells[2]
            .split_whitespace()
            .next()
            .unwrap_or_default()
            .to_owned();
        // "interface, source (`expected`, `measured`)", "(none)", "interface (passive, ...)":
        // drop the parenthesised remarks, then take each piece's leading identifier.
        let mut bare = String::new();
        let mut depth = 0u32;
        for c in cells[3].chars() {
            match c {
                '(' => depth += 1,
                ')' => depth = depth.saturating_sub(1),
                c if depth == 0 => bare.push(c),
                _ => {}
            }
        }
        let labels = bare
            .split(',')
            .filter_map(|piece| {
                let piece = piece.trim();
                let len = piece
                    .find(|c: char| !(c.is_ascii_lowercase() || c == '_'))
                    .unwrap_or(piece.len());
                (len > 0).then(|| piece[..len].to_owned())
            })
            .collect();
        metrics.insert(format!("netdoctor_{name}"), ApiMetric { kind, labels });
    }
    ensure!(
        metrics.len() > 20,
        "found only {} metrics in {}",
        metrics.len(),
        path.display()
    );
    Ok(metrics)
}

/// A plausible value for label `name` in a synthetic exposition.
fn sample_label_value(name: &str) -> &'static str {
    match name {
        "interface" => "wg0",
        "direction" => "tx",
        "kind" => "wireguard",
        "cc" => "cubic",
        "reason" => "IP_RPFILTER",
        "le_bytes" => "1500",
        "source" => "expected",
        "peer" => "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
        "id" => "mtu.tunnel_exceeds_underlay",
        "severity" => "critical",
        "version" => "0.1.0",
        "program" => "nd_tc_ingress",
        "map" => "flows",
        _ => "x",
    }
}

/// A text exposition with one series of every metric in docs/api.md, every label
/// set, every value 1 (so `== 1` filters keep them); histograms with three buckets.
fn synthetic_exposition(metrics: &BTreeMap<String, ApiMetric>) -> Result<String> {
    let mut out = String::new();
    for (name, m) in metrics {
        let labels: Vec<String> = m
            .labels
            .iter()
            .map(|l| format!("{l}=\"{}\"", sample_label_value(l)))
            .collect();
        let with = |extra: Option<String>| {
            let mut all = labels.clone();
            all.extend(extra);
            if all.is_empty() {
                String::new()
            } else {
                format!("{{{}}}", all.join(","))
            }
        };
        out.push_str(&format!("# HELP {name} {name} as in docs/api.md.\n"));
        out.push_str(&format!("# TYPE {name} {}\n", m.kind));
        match m.kind.as_str() {
            "counter" | "gauge" => out.push_str(&format!("{name}{} 1\n", with(None))),
            "histogram" => {
                for (le, count) in [("0.01", 1), ("0.1", 2), ("+Inf", 3)] {
                    let labels = with(Some(format!("le=\"{le}\"")));
                    out.push_str(&format!("{name}_bucket{labels} {count}\n"));
                }
                out.push_str(&format!("{name}_sum{} 0.15\n", with(None)));
                out.push_str(&format!("{name}_count{} 3\n", with(None)));
            }
            other => bail!("{name}: unknown metric type {other:?} in docs/api.md"),
        }
    }
    Ok(out)
}

/// Every `netdoctor_*` metric name in `expr`, with the text right after it.
fn metric_uses(expr: &str) -> Vec<(String, &str)> {
    let is_name = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(rel) = expr[from..].find("netdoctor_") {
        let start = from + rel;
        let end = expr[start..]
            .find(|c: char| !is_name(c))
            .map_or(expr.len(), |len| start + len);
        if !expr[..start].ends_with(is_name) {
            out.push((expr[start..end].to_owned(), &expr[end..]));
        }
        from = end;
    }
    out
}

/// The docs/api.md name of a series name: histograms expose `_bucket`, `_sum`, `_count`.
fn base_metric<'a>(name: &'a str, metrics: &BTreeMap<String, ApiMetric>) -> Option<&'a str> {
    if metrics.contains_key(name) {
        return Some(name);
    }
    ["_bucket", "_sum", "_count"]
        .iter()
        .find_map(|s| name.strip_suffix(s))
        .filter(|base| metrics.contains_key(*base))
}

// --- promtool ---------------------------------------------------------------------

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

// --- Grafana ----------------------------------------------------------------------

#[test]
fn grafana_dashboard_is_importable_and_filters_by_instance_and_interface() -> Result<()> {
    let dashboard = Dashboard::load_default()?;
    let json = dashboard.json();
    ensure!(
        json["schemaVersion"]
            .as_i64()
            .is_some_and(|v| (36..=41).contains(&v)),
        "schemaVersion {}",
        json["schemaVersion"]
    );
    ensure!(json["uid"] == "netdoctor", "uid {}", json["uid"]);
    ensure!(json["id"].is_null(), "an importable dashboard has id null");
    ensure!(
        json["title"].as_str().is_some_and(|t| !t.is_empty()),
        "no title"
    );

    let ds = dashboard
        .variable("datasource")
        .context("no `datasource` variable")?;
    ensure!(
        ds.kind == "datasource" && ds.query == "prometheus",
        "datasource variable: {ds:?}"
    );
    // Instance first (interface names repeat across hosts), then the interfaces of the
    // chosen instances.
    let names: Vec<String> = dashboard.variables().into_iter().map(|v| v.name).collect();
    ensure!(
        names == ["datasource", "instance", "interface"],
        "variables {names:?}"
    );
    for (name, query) in [
        (
            "instance",
            "label_values(netdoctor_interface_info, instance)",
        ),
        (
            "interface",
            r#"label_values(netdoctor_interface_info{instance=~"$instance"}, interface)"#,
        ),
    ] {
        let v = dashboard
            .variable(name)
            .with_context(|| format!("no `{name}` variable"))?;
        ensure!(v.kind == "query", "{name} variable: {v:?}");
        ensure!(v.query == query, "{name} variable query: {:?}", v.query);
        ensure!(
            v.multi && v.include_all,
            "{name} variable must be multi with All: {v:?}"
        );
        // "All" must match drops on no device (no interface label) too.
        ensure!(
            v.all_value.as_deref() == Some(".*"),
            "{name} allValue {:?}",
            v.all_value
        );
        ensure!(
            v.datasource.as_ref().and_then(|d| d["uid"].as_str()) == Some(DATASOURCE_UID),
            "{name} variable data source: {:?}",
            v.datasource
        );
    }

    let mut ids = BTreeSet::new();
    for panel in dashboard.panels() {
        let id = panel["id"].as_i64().context("a panel without id")?;
        ensure!(ids.insert(id), "duplicate panel id {id}");
        ensure!(panel["gridPos"].is_object(), "panel {id} has no gridPos");
        if panel["type"] != "row" {
            ensure!(
                panel["datasource"]["uid"] == DATASOURCE_UID,
                "panel {:?} does not use {DATASOURCE_UID}",
                panel["title"]
            );
        }
    }

    let metrics = api_metrics()?;
    let targets = dashboard.targets();
    ensure!(targets.len() >= 20, "only {} targets", targets.len());
    let mut used = BTreeSet::new();
    let mut problems = Vec::new();
    for t in &targets {
        let at = format!("panel {:?} target {}", t.panel_title, t.ref_id);
        if t.datasource_uid() != Some(DATASOURCE_UID) {
            problems.push(format!("{at}: data source {:?}", t.datasource));
        }
        if let Err(e) = grafana::substitute(&t.expr, &Substitutions::default()) {
            problems.push(format!("{at}: {e:#}"));
        }
        for (metric, after) in metric_uses(&t.expr) {
            let Some(base) = base_metric(&metric, &metrics) else {
                problems.push(format!("{at}: {metric} is not in docs/api.md"));
                continue;
            };
            used.insert(base.to_owned());
            if metrics[base].has_interface() {
                let selector = after
                    .strip_prefix('{')
                    .and_then(|s| s.split('}').next())
                    .unwrap_or("");
                for filter in [r#"instance=~"$instance""#, r#"interface=~"$interface""#] {
                    if !selector.contains(filter) {
                        problems.push(format!("{at}: {metric} is not filtered by {filter}"));
                    }
                }
            }
        }
    }
    ensure!(problems.is_empty(), "{}", problems.join("\n"));

    // The panels the dashboard promises.
    for metric in [
        "netdoctor_interface_bytes_total",
        "netdoctor_interface_segment_size_total",
        "netdoctor_interface_mtu_bytes",
        "netdoctor_interface_fragments_total",
        "netdoctor_interface_df_over_mtu_total",
        "netdoctor_interface_icmp_too_big_total",
        "netdoctor_tunnel_overhead_bytes",
        "netdoctor_tunnel_underlay_mtu_bytes",
        "netdoctor_tunnel_max_mtu_bytes",
        "netdoctor_path_mtu_bytes",
        "netdoctor_tcp_retransmits_total",
        "netdoctor_tcp_data_segments_total",
        "netdoctor_tcp_srtt_seconds",
        "netdoctor_drops_total",
        "netdoctor_wireguard_handshake_age_max_seconds",
        "netdoctor_finding_active",
        "netdoctor_bpf_programs_attached",
        "netdoctor_bpf_map_fill_ratio",
        "netdoctor_bpf_run_time_seconds_total",
        "netdoctor_bpf_run_count_total",
        "netdoctor_evaluation_duration_seconds",
    ] {
        ensure!(used.contains(metric), "no panel shows {metric}");
    }
    // At least one panel sits in a collapsed row (the agent's health).
    ensure!(
        dashboard.panels().iter().any(|p| p["type"] == "row"
            && p["collapsed"] == true
            && p["panels"].as_array().is_some_and(|a| !a.is_empty())),
        "no collapsed row with nested panels"
    );
    Ok(())
}

#[test]
fn grafana_queries_are_accepted_by_prometheus() -> Result<()> {
    if !prometheus::require_prometheus_or_skip() {
        return Ok(());
    }
    let dashboard = Dashboard::load_default()?;
    let prom = Prometheus::start(&PrometheusConfig::default())?;
    // A server without data answers valid queries with an empty result and invalid
    // ones with bad_data: the check is the parser and the type checker.
    let Err(e) = prom.query("rate(netdoctor_drops_total[5m]") else {
        bail!("an unbalanced query was accepted");
    };
    ensure!(format!("{e:#}").contains("parse error"), "{e:#}");

    for subst in [
        Substitutions::default(),
        Substitutions {
            instance: "127.0.0.1:9000".to_owned(),
            interface: "wg0|eth0".to_owned(),
            rate_interval: Duration::from_secs(30),
            interval: Duration::from_secs(15),
            range: Duration::from_secs(6 * 3600),
        },
    ] {
        for q in dashboard.queries(&subst)? {
            prom.query(&q.expr).with_context(|| {
                format!("panel {:?} target {}: {}", q.panel_title, q.ref_id, q.expr)
            })?;
        }
    }
    // The interface variable's query, as Grafana runs it.
    ensure!(prom
        .label_values("interface", "netdoctor_interface_info")?
        .is_empty());
    Ok(())
}

#[test]
fn grafana_queries_return_series_for_every_api_metric() -> Result<()> {
    if !prometheus::require_prometheus_or_skip() {
        return Ok(());
    }
    // A rehearsal of the test against the real agent: an exposition with one series of
    // every metric in docs/api.md, with the labels it lists. It must be lint-clean,
    // and every dashboard query must find something in it.
    let metrics = api_metrics()?;
    let exposition = synthetic_exposition(&metrics)?;
    let complaints = prometheus::promtool_check_metrics(&exposition)?;
    ensure!(
        complaints.is_empty(),
        "promtool check metrics on docs/api.md's metrics: {complaints:?}\n{exposition}"
    );
    let exporter = StaticExporter::start(None, exposition)?;
    let prom = Prometheus::start(&PrometheusConfig {
        jobs: vec![ScrapeJob::new("netdoctor", &exporter.target())],
        rule_files: vec![prometheus::rules_path()],
        ..PrometheusConfig::default()
    })?;
    prom.wait_for_scrape("netdoctor", SCRAPE_TIMEOUT)?;
    ensure!(
        prom.label_values("interface", "netdoctor_interface_info")? == ["wg0"],
        "the interface variable's values"
    );

    let dashboard = Dashboard::load_default()?;
    // The instance variable's value, as Prometheus labels the scraped target.
    ensure!(
        prom.label_values("instance", "netdoctor_interface_info")? == [exporter.target()],
        "the instance variable's values"
    );
    let subst = Substitutions {
        instance: exporter.target(),
        interface: "wg0".to_owned(),
        rate_interval: Duration::from_secs(10),
        interval: Duration::from_secs(1),
        range: Duration::from_secs(60),
    };
    let queries = dashboard.queries(&subst)?;
    // rate() needs two scrapes (1 s apart): poll until every query has a series.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let mut empty = Vec::new();
        for q in &queries {
            let series = prom
                .query(&q.expr)
                .with_context(|| format!("panel {:?} target {}", q.panel_title, q.ref_id))?;
            if series.is_empty() {
                empty.push(format!(
                    "panel {:?} target {}: {}",
                    q.panel_title, q.ref_id, q.expr
                ));
            }
        }
        if empty.is_empty() {
            break;
        }
        ensure!(
            Instant::now() < deadline,
            "queries without any series:\n{}",
            empty.join("\n")
        );
        std::thread::sleep(Duration::from_millis(500));
    }

    // The rules, in a real Prometheus, match the agent's labels: the active MTU finding
    // and the blackhole gauge make their alerts pending, with expanded annotations.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let alerts = prom.alerts()?;
        let pending = |name: &str| {
            alerts.iter().any(|a| {
                a.name() == name
                    && a.labels.get("interface").map(String::as_str) == Some("wg0")
                    && a.annotations
                        .get("description")
                        .is_some_and(|d| d.contains("ip link set dev wg0 mtu 1"))
            })
        };
        if pending("NetdoctorMTUMisconfigured") && pending("NetdoctorPMTUBlackhole") {
            break;
        }
        ensure!(
            Instant::now() < deadline,
            "MTU and PMTU alerts not pending on the synthetic metrics: {alerts:#?}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }

    // Another interface selected: every query on a metric with an interface label
    // comes back empty (the filter applies).
    let other = Substitutions {
        interface: "nosuchif0".to_owned(),
        ..subst
    };
    for (q, t) in dashboard.queries(&other)?.iter().zip(dashboard.targets()) {
        let filtered = metric_uses(&t.expr)
            .iter()
            .filter_map(|(m, _)| base_metric(m, &metrics))
            .any(|m| metrics[m].has_interface());
        if filtered {
            let series = prom.query(&q.expr)?;
            ensure!(
                series.is_empty(),
                "panel {:?} target {} ignores the interface filter: {series:?}",
                q.panel_title,
                q.ref_id
            );
        }
    }
    Ok(())
}

// --- The lab's Prometheus helpers --------------------------------------------------

const EXPOSITION: &str = "\
# HELP netdoctor_interface_mtu_bytes MTU of the interface.
# TYPE netdoctor_interface_mtu_bytes gauge
netdoctor_interface_mtu_bytes{interface=\"wg0\"} 1420
# HELP netdoctor_interface_bytes_total Bytes seen by the BPF hooks.
# TYPE netdoctor_interface_bytes_total counter
netdoctor_interface_bytes_total{direction=\"rx\",interface=\"wg0\"} 123456
";

/// A tiny HTTP server answering every request with a fixed exposition text, or 401
/// when a token is required and the request lacks `Authorization: Bearer <token>`.
/// Stopped on `Drop`.
struct StaticExporter {
    port: u16,
    stop: Arc<AtomicBool>,
    served: Arc<AtomicUsize>,
    refused: Arc<AtomicUsize>,
    thread: Option<JoinHandle<()>>,
}

impl StaticExporter {
    fn start(token: Option<&str>, body: String) -> Result<StaticExporter> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let port = listener.local_addr()?.port();
        let stop = Arc::new(AtomicBool::new(false));
        let served = Arc::new(AtomicUsize::new(0));
        let refused = Arc::new(AtomicUsize::new(0));
        let expected = token.map(|t| format!("bearer {t}"));
        let (stop2, served2, refused2) = (stop.clone(), served.clone(), refused.clone());
        let thread = std::thread::spawn(move || {
            while !stop2.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((stream, _)) => {
                        let counter = match serve(stream, expected.as_deref(), &body) {
                            Ok(true) => &served2,
                            Ok(false) => &refused2,
                            Err(e) => {
                                eprintln!("static exporter: {e:#}");
                                continue;
                            }
                        };
                        counter.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        std::thread::sleep(Duration::from_millis(10));
                    }
                    Err(e) => {
                        eprintln!("static exporter: accept: {e}");
                        std::thread::sleep(Duration::from_millis(10));
                    }
                }
            }
        });
        Ok(StaticExporter {
            port,
            stop,
            served,
            refused,
            thread: Some(thread),
        })
    }

    fn target(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
}

impl Drop for StaticExporter {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Answers one request; true when it was authorized (or no token is required).
fn serve(mut stream: TcpStream, expected_auth: Option<&str>, body: &str) -> Result<bool> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut request = Vec::new();
    let mut buf = [0u8; 4096];
    while !request.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut buf)?;
        if n == 0 {
            break;
        }
        request.extend_from_slice(&buf[..n]);
        ensure!(request.len() < 65536, "request headers too large");
    }
    let request = String::from_utf8_lossy(&request);
    let authorized = expected_auth.is_none_or(|expected| {
        request.lines().any(|l| {
            l.split_once(':').is_some_and(|(k, v)| {
                k.trim().eq_ignore_ascii_case("authorization")
                    && v.trim().eq_ignore_ascii_case(expected)
            })
        })
    });
    let (status, body) = if authorized {
        ("200 OK", body)
    } else {
        ("401 Unauthorized", "missing or wrong bearer token\n")
    };
    write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    stream.flush()?;
    Ok(authorized)
}

#[test]
fn prometheus_helper_scrapes_queries_and_sends_the_bearer_token() -> Result<()> {
    if !prometheus::require_prometheus_or_skip() {
        return Ok(());
    }
    let token = "s3cret-token";
    let exporter = StaticExporter::start(Some(token), EXPOSITION.to_owned())?;
    let dir = tempfile::tempdir()?;
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, format!("{token}\n"))?;
    let target = exporter.target();
    let prom = Prometheus::start(&PrometheusConfig {
        jobs: vec![
            ScrapeJob::new("netdoctor-selftest", &target).with_bearer_token_file(&token_file),
            ScrapeJob::new("no-token", &target),
        ],
        ..PrometheusConfig::default()
    })?;
    let config = std::fs::read_to_string(prom.config_path())?;
    ensure!(config.contains("scrape_interval: 1s"), "{config}");

    let up = prom.wait_for_scrape("netdoctor-selftest", SCRAPE_TIMEOUT)?;
    ensure!(up.len() == 1 && up[0].instance == target, "{up:?}");

    let series = prom.wait_for_series(
        r#"netdoctor_interface_mtu_bytes{job="netdoctor-selftest"}"#,
        Duration::from_secs(10),
    )?;
    ensure!(series.len() == 1, "{series:?}");
    let s = &series[0];
    ensure!(s.value == 1420.0, "{s:?}");
    ensure!(s.name() == Some("netdoctor_interface_mtu_bytes"), "{s:?}");
    ensure!(s.label("interface") == Some("wg0"), "{s:?}");
    ensure!(s.label("instance") == Some(target.as_str()), "{s:?}");
    let up = prom.query(r#"up{job="netdoctor-selftest"}"#)?;
    ensure!(up.len() == 1 && up[0].value == 1.0, "{up:?}");
    // Scalars come back as one series without labels.
    let scalar =
        prom.query("scalar(netdoctor_interface_mtu_bytes{job=\"netdoctor-selftest\"}) * 2")?;
    ensure!(
        scalar.len() == 1 && scalar[0].value == 2840.0 && scalar[0].labels.is_empty(),
        "{scalar:?}"
    );
    ensure!(
        prom.label_values("interface", "netdoctor_interface_info")?
            .is_empty(),
        "no netdoctor_interface_info was exposed"
    );
    ensure!(
        prom.label_values("interface", "netdoctor_interface_mtu_bytes")? == ["wg0"],
        "label values of interface"
    );

    // Without the token file the same target refuses the scrape: the token is what
    // made the first job work.
    let deadline = Instant::now() + SCRAPE_TIMEOUT;
    let refused: TargetHealth = loop {
        let targets = prom.targets()?;
        if let Some(t) = targets
            .into_iter()
            .find(|t| t.job == "no-token" && t.health == "down")
        {
            break t;
        }
        ensure!(
            Instant::now() < deadline,
            "the job without a token was never refused"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    ensure!(refused.last_error.contains("401"), "{refused:?}");
    ensure!(exporter.served.load(Ordering::Relaxed) >= 1);
    ensure!(exporter.refused.load(Ordering::Relaxed) >= 1);

    // An unknown job times out with a clear error.
    let Err(e) = prom.wait_for_scrape("no-such-job", Duration::from_millis(500)) else {
        bail!("waiting for an unknown job succeeded");
    };
    ensure!(format!("{e:#}").contains("no such target"), "{e:#}");
    Ok(())
}

#[test]
fn promtool_check_metrics_reports_complaints() -> Result<()> {
    if !prometheus::require_promtool_or_skip() {
        return Ok(());
    }
    let clean = prometheus::promtool_check_metrics(EXPOSITION)?;
    ensure!(
        clean.is_empty(),
        "complaints about a clean exposition: {clean:?}"
    );

    let lint = prometheus::promtool_check_metrics(
        "# TYPE netdoctor_drops counter\nnetdoctor_drops{reason=\"IP_RPFILTER\"} 3\n",
    )?;
    ensure!(
        lint.iter().any(|l| l.contains("_total")),
        "no complaint about a counter without _total: {lint:?}"
    );
    ensure!(
        lint.iter().any(|l| l.contains("no help text")),
        "no complaint about missing HELP: {lint:?}"
    );

    let broken = prometheus::promtool_check_metrics("netdoctor_x{{ 1\n")?;
    ensure!(
        broken
            .iter()
            .any(|l| l.contains("parsing error") || l.contains("error")),
        "no complaint about unparsable text: {broken:?}"
    );
    Ok(())
}

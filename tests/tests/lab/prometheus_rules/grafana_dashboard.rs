//! The Grafana dashboard (`dashboard/grafana/netdoctor.json`): importable, filtered by
//! instance and interface, its queries accepted by Prometheus and returning series for
//! every metric of docs/api.md.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use netdoctor_lab::grafana::{self, Dashboard, Substitutions, DATASOURCE_UID};
use netdoctor_lab::prometheus::{self, Prometheus, PrometheusConfig, ScrapeJob};

use crate::prometheus_rules::api_metrics::{
    api_metrics, base_metric, metric_uses, synthetic_exposition,
};
use crate::prometheus_rules::exporter::StaticExporter;
use crate::prometheus_rules::SCRAPE_TIMEOUT;

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
        "netdoctor_tcp_connections",
        "netdoctor_tcp_limited_bytes_total",
        "netdoctor_drops_total",
        "netdoctor_wireguard_handshake_age_max_seconds",
        "netdoctor_wireguard_peer_underlay_loss_ratio",
        "netdoctor_wireguard_peer_handshake_rtt_seconds",
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

//! The lab's Prometheus helpers (`netdoctor_lab::prometheus`): scraping with and without
//! the bearer token, queries, label values, and `promtool check metrics`.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Result};
use netdoctor_lab::prometheus::{self, Prometheus, PrometheusConfig, ScrapeJob, TargetHealth};

use crate::prometheus_rules::exporter::StaticExporter;
use crate::prometheus_rules::SCRAPE_TIMEOUT;

const EXPOSITION: &str = "\
# HELP netdoctor_interface_mtu_bytes MTU of the interface.
# TYPE netdoctor_interface_mtu_bytes gauge
netdoctor_interface_mtu_bytes{interface=\"wg0\"} 1420
# HELP netdoctor_interface_bytes_total Bytes seen by the BPF hooks.
# TYPE netdoctor_interface_bytes_total counter
netdoctor_interface_bytes_total{direction=\"rx\",interface=\"wg0\"} 123456
";

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

//! A running Prometheus server ([`Prometheus`]): started on a free port of 127.0.0.1 in a
//! temporary directory, asked over its HTTP API, stopped on `Drop`.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use serde_json::Value;
use tempfile::TempDir;

use super::api::{parse_result, str_of, string_map, truncate};
use super::{
    Alert, AlertingRule, PrometheusConfig, Series, TargetHealth, PROMETHEUS, START_TIMEOUT,
};
use crate::ci;
use crate::cmd::BgProcess;

/// Timeout of one HTTP request to the server.
const HTTP_TIMEOUT: Duration = Duration::from_secs(15);

/// How often the `wait_*` helpers poll.
const POLL: Duration = Duration::from_millis(200);

/// A running Prometheus server, stopped on `Drop`.
#[derive(Debug)]
pub struct Prometheus {
    // Declared before `dir`: the process stops before its directory is removed.
    process: BgProcess,
    dir: TempDir,
    port: u16,
    url: String,
    http: ureq::Agent,
}

impl Prometheus {
    /// Writes `config` into a fresh temporary directory and starts
    /// `prometheus --config.file=... --storage.tsdb.path=... --web.listen-address=127.0.0.1:PORT`
    /// on a free port, then waits until `/-/ready` answers 200.
    ///
    /// Errors: `prometheus` missing, an invalid configuration (the error carries
    /// Prometheus' log), or not ready within [`START_TIMEOUT`].
    pub fn start(config: &PrometheusConfig) -> Result<Prometheus> {
        ensure!(
            ci::on_path(PROMETHEUS),
            "`{PROMETHEUS}` is not on PATH (Debian: apt-get install prometheus)"
        );
        let mut dir = tempfile::Builder::new()
            .prefix("ndlab-prometheus-")
            .tempdir()
            .context("creating Prometheus' temporary directory")?;
        let config_path = dir.path().join("prometheus.yml");
        std::fs::write(&config_path, config.render()?)
            .with_context(|| format!("writing {}", config_path.display()))?;
        let http: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(HTTP_TIMEOUT))
            .proxy(None)
            .build()
            .into();

        // The port is free when chosen but could be taken before Prometheus binds it:
        // try a few.
        let mut last_err = None;
        for _ in 0..3 {
            let port = free_port()?;
            let mut cmd = Command::new(PROMETHEUS);
            cmd.arg(format!("--config.file={}", config_path.display()))
                .arg(format!(
                    "--storage.tsdb.path={}",
                    dir.path().join("data").display()
                ))
                .arg(format!("--web.listen-address=127.0.0.1:{port}"))
                .arg("--log.level=info");
            let process = BgProcess::spawn(&format!("prometheus on 127.0.0.1:{port}"), cmd)?;
            let mut prom = Prometheus {
                process,
                dir,
                port,
                url: format!("http://127.0.0.1:{port}"),
                http: http.clone(),
            };
            match prom.wait_ready(START_TIMEOUT) {
                Ok(()) => return Ok(prom),
                Err(e) => {
                    let in_use = prom.logs().contains("address already in use");
                    let _ = prom.process.stop();
                    if !in_use {
                        return Err(e);
                    }
                    last_err = Some(e);
                    dir = prom.into_dir();
                }
            }
        }
        Err(last_err.unwrap_or_else(|| anyhow::anyhow!("could not start Prometheus")))
    }

    /// Gives the directory back after a failed start (the process is stopped by `Drop`).
    fn into_dir(self) -> TempDir {
        let Prometheus { process, dir, .. } = self;
        drop(process);
        dir
    }

    fn wait_ready(&mut self, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.process.try_status()? {
                bail!(
                    "prometheus exited ({status}) before it was ready; its log: {}",
                    self.logs()
                );
            }
            let ready = self
                .http
                .get(&format!("{}/-/ready", self.url))
                .call()
                .map(|r| r.status() == 200)
                .unwrap_or(false);
            if ready {
                return Ok(());
            }
            if Instant::now() >= deadline {
                bail!(
                    "prometheus not ready at {} within {timeout:?}; its log: {}",
                    self.url,
                    self.logs()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The port it listens on (127.0.0.1).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The temporary directory holding `prometheus.yml` and `data/`.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The configuration file it runs with.
    pub fn config_path(&self) -> PathBuf {
        self.dir.path().join("prometheus.yml")
    }

    /// Everything Prometheus logged so far (it logs to stderr).
    pub fn logs(&self) -> String {
        let mut out = self.process.stderr().unwrap_or_default();
        out.push_str(&self.process.stdout().unwrap_or_default());
        out
    }

    /// GET `path` (e.g. `/api/v1/query`) with `params`, and return `data` of a
    /// `{"status": "success", "data": ...}` answer.
    ///
    /// Errors name the endpoint, the HTTP status, and Prometheus' `errorType` and `error`
    /// (e.g. `bad_data: 1:5: parse error: ...` for an invalid query).
    pub fn api_get(&self, path: &str, params: &[(&str, &str)]) -> Result<Value> {
        let mut req = self.http.get(&format!("{}{path}", self.url));
        for (k, v) in params {
            req = req.query(*k, *v);
        }
        let resp = req
            .call()
            .with_context(|| format!("GET {}{path}", self.url))?;
        let status = resp.status();
        let body = resp
            .into_body()
            .read_to_string()
            .with_context(|| format!("reading the answer of GET {path}"))?;
        let json: Value = serde_json::from_str(&body).with_context(|| {
            format!(
                "GET {path} ({status}) did not answer JSON: {}",
                truncate(&body)
            )
        })?;
        if json["status"] != "success" {
            bail!(
                "GET {path} {params:?} failed ({status}): {}: {}",
                json["errorType"].as_str().unwrap_or("?"),
                json["error"].as_str().unwrap_or(&body)
            );
        }
        Ok(json["data"].clone())
    }

    /// Runs an instant query (`/api/v1/query`) now and returns its series. A scalar
    /// result is one series without labels; a range-vector result gives each series'
    /// last sample.
    ///
    /// Errors: the query does not parse or fails (the error carries Prometheus' message),
    /// or the server does not answer.
    pub fn query(&self, promql: &str) -> Result<Vec<Series>> {
        let data = self.api_get("/api/v1/query", &[("query", promql)])?;
        parse_result(&data).with_context(|| format!("reading the result of {promql:?}"))
    }

    /// Polls [`Prometheus::query`] until it returns at least one series; errors after
    /// `timeout` (with the last error, if the query failed).
    pub fn wait_for_series(&self, promql: &str, timeout: Duration) -> Result<Vec<Series>> {
        let deadline = Instant::now() + timeout;
        loop {
            let last = match self.query(promql) {
                Ok(series) if !series.is_empty() => return Ok(series),
                Ok(_) => "no series".to_owned(),
                Err(e) => format!("{e:#}"),
            };
            if Instant::now() >= deadline {
                bail!("{promql:?} returned nothing within {timeout:?} ({last})");
            }
            std::thread::sleep(POLL);
        }
    }

    /// The active scrape targets (`/api/v1/targets?state=active`).
    pub fn targets(&self) -> Result<Vec<TargetHealth>> {
        let data = self.api_get("/api/v1/targets", &[("state", "active")])?;
        let list = data["activeTargets"]
            .as_array()
            .context("/api/v1/targets: no activeTargets array")?;
        Ok(list
            .iter()
            .map(|t| TargetHealth {
                job: str_of(&t["labels"]["job"]),
                instance: str_of(&t["labels"]["instance"]),
                scrape_url: str_of(&t["scrapeUrl"]),
                health: str_of(&t["health"]),
                last_error: str_of(&t["lastError"]),
            })
            .collect())
    }

    /// Polls `/api/v1/targets` until every target of `job` (at least one) has been
    /// scraped successfully (health `up`), and returns them.
    ///
    /// Errors after `timeout` with each target's health and last error, or when
    /// Prometheus exits.
    pub fn wait_for_scrape(&self, job: &str, timeout: Duration) -> Result<Vec<TargetHealth>> {
        let deadline = Instant::now() + timeout;
        loop {
            let targets: Vec<TargetHealth> = self
                .targets()?
                .into_iter()
                .filter(|t| t.job == job)
                .collect();
            if !targets.is_empty() && targets.iter().all(|t| t.health == "up") {
                return Ok(targets);
            }
            if Instant::now() >= deadline {
                let state: Vec<String> = targets
                    .iter()
                    .map(|t| format!("{} {} ({})", t.scrape_url, t.health, t.last_error))
                    .collect();
                bail!(
                    "job {job:?} not scraped successfully within {timeout:?}: {}",
                    if state.is_empty() {
                        "no such target".to_owned()
                    } else {
                        state.join("; ")
                    }
                );
            }
            std::thread::sleep(POLL);
        }
    }

    /// The values of label `label` on series matching the selector `matcher`
    /// (`/api/v1/label/LABEL/values?match[]=...`), sorted, as Grafana's
    /// `label_values(matcher, label)` lists them.
    pub fn label_values(&self, label: &str, matcher: &str) -> Result<Vec<String>> {
        let data = self.api_get(
            &format!("/api/v1/label/{label}/values"),
            &[("match[]", matcher)],
        )?;
        let list = data
            .as_array()
            .context("label values: not an array")?
            .iter()
            .map(str_of)
            .collect();
        Ok(list)
    }

    /// Every alerting rule loaded (`/api/v1/rules?type=alert`), in file order.
    pub fn alerting_rules(&self) -> Result<Vec<AlertingRule>> {
        let data = self.api_get("/api/v1/rules", &[("type", "alert")])?;
        let mut rules = Vec::new();
        for group in data["groups"]
            .as_array()
            .context("/api/v1/rules: no groups")?
        {
            for rule in group["rules"]
                .as_array()
                .context("rule group without rules")?
            {
                rules.push(AlertingRule {
                    group: str_of(&group["name"]),
                    name: str_of(&rule["name"]),
                    query: str_of(&rule["query"]),
                    duration_s: rule["duration"].as_f64().unwrap_or(0.0),
                    labels: string_map(&rule["labels"]),
                    annotations: string_map(&rule["annotations"]),
                    health: str_of(&rule["health"]),
                    last_error: str_of(&rule["lastError"]),
                    state: str_of(&rule["state"]),
                });
            }
        }
        Ok(rules)
    }

    /// The pending and firing alerts (`/api/v1/alerts`).
    pub fn alerts(&self) -> Result<Vec<Alert>> {
        let data = self.api_get("/api/v1/alerts", &[])?;
        let list = data["alerts"]
            .as_array()
            .context("/api/v1/alerts: no alerts")?;
        Ok(list
            .iter()
            .map(|a| Alert {
                labels: string_map(&a["labels"]),
                annotations: string_map(&a["annotations"]),
                state: str_of(&a["state"]),
                value: str_of(&a["value"]),
            })
            .collect())
    }
}

/// A port on 127.0.0.1 that was free a moment ago.
fn free_port() -> Result<u16> {
    let listener = TcpListener::bind("127.0.0.1:0").context("finding a free port")?;
    Ok(listener
        .local_addr()
        .context("reading the free port")?
        .port())
}

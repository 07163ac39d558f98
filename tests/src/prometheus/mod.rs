//! A real Prometheus server and `promtool` for tests: scraping the agent (or any HTTP
//! target), querying what it stored, loading the alerting rules of `rules/prometheus/`.
//!
//! ```no_run
//! use std::time::Duration;
//! use netdoctor_lab::prometheus::{self, Prometheus, PrometheusConfig, ScrapeJob};
//!
//! # fn main() -> anyhow::Result<()> {
//! if !prometheus::require_prometheus_or_skip() {
//!     return Ok(());
//! }
//! let config = PrometheusConfig {
//!     jobs: vec![ScrapeJob::new("netdoctor", "127.0.0.1:9469")],
//!     rule_files: vec![prometheus::rules_path()],
//!     ..PrometheusConfig::default()
//! };
//! let prom = Prometheus::start(&config)?;
//! prom.wait_for_scrape("netdoctor", Duration::from_secs(30))?;
//! for series in prom.query("netdoctor_interface_info")? {
//!     println!("{:?} = {}", series.labels, series.value);
//! }
//! # Ok(())
//! # }
//! ```
//!
//! The server listens on a free port of 127.0.0.1, keeps its configuration and TSDB in a
//! temporary directory, scrapes every second, and is stopped (SIGTERM, then SIGKILL) and
//! its directory removed on `Drop`.

use std::collections::BTreeMap;
use std::fs::File;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use serde_json::Value;
use tempfile::{NamedTempFile, TempDir};

use crate::ci;
use crate::cmd::{self, BgProcess};

/// The Prometheus server binary (Debian package `prometheus`).
pub const PROMETHEUS: &str = "prometheus";

/// Prometheus' command-line tool, from the same package.
pub const PROMTOOL: &str = "promtool";

/// How long [`Prometheus::start`] waits for `/-/ready`.
pub const START_TIMEOUT: Duration = Duration::from_secs(30);

/// Timeout of one HTTP request to the server.
const HTTP_TIMEOUT: Duration = Duration::from_secs(15);

/// Timeout of one `promtool` run.
const PROMTOOL_TIMEOUT: Duration = Duration::from_secs(60);

/// How often the `wait_*` helpers poll.
const POLL: Duration = Duration::from_millis(200);

/// Skips (or fails under CI, see [`ci::skip`]) unless both `prometheus` and `promtool`
/// are on PATH.
///
/// # Panics
/// When one is missing and [`ci::is_ci`] is true.
pub fn require_prometheus_or_skip() -> bool {
    ci::require_tools_or_skip(&[PROMETHEUS, PROMTOOL])
}

/// Skips (or fails under CI) unless `promtool` is on PATH.
///
/// # Panics
/// When it is missing and [`ci::is_ci`] is true.
pub fn require_promtool_or_skip() -> bool {
    ci::require_tools_or_skip(&[PROMTOOL])
}

/// The repository's root directory (the parent of this crate's directory).
pub fn repo_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().unwrap_or(manifest).to_path_buf()
}

/// `rules/prometheus/netdoctor.rules.yml`: the alerting rules.
pub fn rules_path() -> PathBuf {
    repo_root().join("rules/prometheus/netdoctor.rules.yml")
}

/// The `promtool test rules` files: every `*.yml` in `rules/prometheus/tests/`, sorted.
///
/// Errors when the directory cannot be read or holds no test file.
pub fn rule_test_paths() -> Result<Vec<PathBuf>> {
    let dir = repo_root().join("rules/prometheus/tests");
    let mut paths = Vec::new();
    for entry in std::fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry
            .with_context(|| format!("reading {}", dir.display()))?
            .path();
        if path.extension().is_some_and(|e| e == "yml" || e == "yaml") {
            paths.push(path);
        }
    }
    paths.sort();
    ensure!(!paths.is_empty(), "no *.yml test file in {}", dir.display());
    Ok(paths)
}

/// One `scrape_configs` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScrapeJob {
    /// `job_name`, which becomes the `job` label.
    pub job: String,
    /// `host:port` of each target.
    pub targets: Vec<String>,
    /// HTTP path of the metrics; `/metrics` by default.
    pub metrics_path: String,
    /// A file holding the bearer token sent with each scrape
    /// (`authorization: {type: Bearer, credentials_file: ...}`), as the agent's
    /// `--token-file` expects.
    pub bearer_token_file: Option<PathBuf>,
    /// `scheme` (`http` unless set).
    pub scheme: Option<String>,
    /// `scrape_timeout`, when shorter than the global one.
    pub scrape_timeout: Option<Duration>,
    /// Labels given to every target (`static_configs[].labels`), e.g. `instance`.
    pub labels: BTreeMap<String, String>,
}

impl ScrapeJob {
    /// A job scraping `target` (`host:port`) at `/metrics`, without a token.
    pub fn new(job: &str, target: &str) -> ScrapeJob {
        ScrapeJob {
            job: job.to_owned(),
            targets: vec![target.to_owned()],
            metrics_path: "/metrics".to_owned(),
            bearer_token_file: None,
            scheme: None,
            scrape_timeout: None,
            labels: BTreeMap::new(),
        }
    }

    /// The same job, sending the token in `path` as `Authorization: Bearer`.
    pub fn with_bearer_token_file(mut self, path: &Path) -> ScrapeJob {
        self.bearer_token_file = Some(path.to_path_buf());
        self
    }
}

/// What [`Prometheus::start`] writes into `prometheus.yml`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrometheusConfig {
    /// Scrape jobs; may be empty (a server that only answers queries).
    pub jobs: Vec<ScrapeJob>,
    /// Rule files (`rule_files`), made absolute.
    pub rule_files: Vec<PathBuf>,
    /// `global.scrape_interval` (default 1 s).
    pub scrape_interval: Duration,
    /// `global.evaluation_interval` (default 1 s).
    pub evaluation_interval: Duration,
}

impl Default for PrometheusConfig {
    fn default() -> Self {
        PrometheusConfig {
            jobs: Vec::new(),
            rule_files: Vec::new(),
            scrape_interval: Duration::from_secs(1),
            evaluation_interval: Duration::from_secs(1),
        }
    }
}

impl PrometheusConfig {
    /// The configuration file's text. Strings are written as JSON strings, which YAML
    /// reads unchanged.
    pub fn render(&self) -> Result<String> {
        let q = |s: &str| serde_json::to_string(s).context("quoting a YAML string");
        let mut out = format!(
            "global:\n  scrape_interval: {}\n  scrape_timeout: {}\n  evaluation_interval: {}\n",
            prom_duration(self.scrape_interval),
            prom_duration(self.scrape_interval),
            prom_duration(self.evaluation_interval)
        );
        out.push_str("rule_files:");
        if self.rule_files.is_empty() {
            out.push_str(" []\n");
        } else {
            out.push('\n');
            for file in &self.rule_files {
                let abs = std::path::absolute(file)
                    .with_context(|| format!("making {} absolute", file.display()))?;
                out.push_str(&format!("  - {}\n", q(&abs.to_string_lossy())?));
            }
        }
        out.push_str("scrape_configs:");
        if self.jobs.is_empty() {
            out.push_str(" []\n");
            return Ok(out);
        }
        out.push('\n');
        for job in &self.jobs {
            out.push_str(&format!("  - job_name: {}\n", q(&job.job)?));
            out.push_str(&format!("    metrics_path: {}\n", q(&job.metrics_path)?));
            if let Some(scheme) = &job.scheme {
                out.push_str(&format!("    scheme: {}\n", q(scheme)?));
            }
            if let Some(timeout) = job.scrape_timeout {
                out.push_str(&format!("    scrape_timeout: {}\n", prom_duration(timeout)));
            }
            if let Some(file) = &job.bearer_token_file {
                let abs = std::path::absolute(file)
                    .with_context(|| format!("making {} absolute", file.display()))?;
                out.push_str("    authorization:\n      type: Bearer\n");
                out.push_str(&format!(
                    "      credentials_file: {}\n",
                    q(&abs.to_string_lossy())?
                ));
            }
            out.push_str("    static_configs:\n      - targets:\n");
            for target in &job.targets {
                out.push_str(&format!("          - {}\n", q(target)?));
            }
            if !job.labels.is_empty() {
                out.push_str("        labels:\n");
                for (k, v) in &job.labels {
                    out.push_str(&format!("          {}: {}\n", q(k)?, q(v)?));
                }
            }
        }
        Ok(out)
    }
}

/// A Prometheus duration: whole seconds as `Ns`, anything finer as `Nms`.
pub fn prom_duration(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{}ms", d.as_millis())
    }
}

/// One series of a query result.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// All labels, `__name__` included when the result keeps it.
    pub labels: BTreeMap<String, String>,
    /// The value (NaN and ±Inf as Prometheus reports them).
    pub value: f64,
    /// The sample's time, seconds since the UNIX epoch.
    pub timestamp: f64,
}

impl Series {
    /// The value of label `name`, if present.
    pub fn label(&self, name: &str) -> Option<&str> {
        self.labels.get(name).map(String::as_str)
    }

    /// The metric name (`__name__`), if the result keeps it.
    pub fn name(&self) -> Option<&str> {
        self.label("__name__")
    }
}

/// An active scrape target as `/api/v1/targets` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetHealth {
    /// The `job` label.
    pub job: String,
    /// The `instance` label.
    pub instance: String,
    /// The URL scraped.
    pub scrape_url: String,
    /// `up`, `down` or `unknown` (not scraped yet).
    pub health: String,
    /// The last scrape's error, empty when it succeeded.
    pub last_error: String,
}

/// An alerting rule as `/api/v1/rules` reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct AlertingRule {
    /// The rule group's name.
    pub group: String,
    /// The alert's name.
    pub name: String,
    /// The PromQL expression.
    pub query: String,
    /// `for:`, in seconds.
    pub duration_s: f64,
    /// Labels the rule adds (e.g. `severity`).
    pub labels: BTreeMap<String, String>,
    /// Annotations (templates, unexpanded).
    pub annotations: BTreeMap<String, String>,
    /// `ok`, `err` or `unknown`.
    pub health: String,
    /// The last evaluation's error, empty if none.
    pub last_error: String,
    /// `inactive`, `pending` or `firing`.
    pub state: String,
}

/// A pending or firing alert as `/api/v1/alerts` reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct Alert {
    /// Labels, `alertname` included.
    pub labels: BTreeMap<String, String>,
    /// Expanded annotations.
    pub annotations: BTreeMap<String, String>,
    /// `pending` or `firing`.
    pub state: String,
    /// The expression's value when the alert became active (as text).
    pub value: String,
}

impl Alert {
    /// The alert's name.
    pub fn name(&self) -> &str {
        self.labels.get("alertname").map_or("", String::as_str)
    }
}

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

fn str_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

fn string_map(v: &Value) -> BTreeMap<String, String> {
    v.as_object()
        .map(|m| m.iter().map(|(k, v)| (k.clone(), str_of(v))).collect())
        .unwrap_or_default()
}

fn truncate(s: &str) -> &str {
    match s.char_indices().nth(500) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

/// A `[time, "value"]` pair.
fn sample(v: &Value) -> Result<(f64, f64)> {
    let ts = v[0].as_f64().context("sample without a timestamp")?;
    let text = v[1].as_str().context("sample value is not a string")?;
    let value = text
        .parse::<f64>()
        .with_context(|| format!("sample value {text:?} is not a number"))?;
    Ok((ts, value))
}

fn parse_result(data: &Value) -> Result<Vec<Series>> {
    let result = &data["result"];
    match data["resultType"].as_str() {
        Some("vector") => result
            .as_array()
            .context("vector result is not an array")?
            .iter()
            .map(|s| {
                let (timestamp, value) = sample(&s["value"])?;
                Ok(Series {
                    labels: string_map(&s["metric"]),
                    value,
                    timestamp,
                })
            })
            .collect(),
        Some("scalar") => {
            let (timestamp, value) = sample(result)?;
            Ok(vec![Series {
                labels: BTreeMap::new(),
                value,
                timestamp,
            }])
        }
        Some("matrix") => {
            let mut out = Vec::new();
            for s in result.as_array().context("matrix result is not an array")? {
                if let Some(last) = s["values"].as_array().and_then(|v| v.last()) {
                    let (timestamp, value) = sample(last)?;
                    out.push(Series {
                        labels: string_map(&s["metric"]),
                        value,
                        timestamp,
                    });
                }
            }
            Ok(out)
        }
        other => bail!("unsupported result type {other:?}"),
    }
}

/// Runs `promtool check metrics` on a Prometheus text exposition and returns its
/// complaints, one per line (empty: the text is clean). A text that does not parse gives
/// the parse error as the complaint.
///
/// Errors: `promtool` cannot run, or exits with a status other than 0 (clean),
/// 3 (lint problems) or 1 (parse error).
pub fn promtool_check_metrics(text: &str) -> Result<Vec<String>> {
    let mut input = NamedTempFile::with_prefix("ndlab-metrics-").context("creating a temp file")?;
    std::io::Write::write_all(&mut input, text.as_bytes()).context("writing the metrics")?;
    let stdin = File::open(input.path()).context("reopening the metrics")?;
    let out = NamedTempFile::with_prefix("ndlab-promtool-").context("creating a temp file")?;
    let out_file = out.reopen().context("opening promtool's output file")?;
    let err_file = out.reopen().context("opening promtool's output file")?;
    let mut child = Command::new(PROMTOOL)
        .args(["check", "metrics"])
        .stdin(Stdio::from(stdin))
        .stdout(out_file)
        .stderr(err_file)
        .spawn()
        .with_context(|| format!("cannot start `{PROMTOOL} check metrics`"))?;
    let deadline = Instant::now() + PROMTOOL_TIMEOUT;
    let status = loop {
        if let Some(status) = child.try_wait().context("waiting for promtool")? {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            bail!("`{PROMTOOL} check metrics` did not finish within {PROMTOOL_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let output = std::fs::read_to_string(out.path()).context("reading promtool's output")?;
    let complaints: Vec<String> = output
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect();
    match status.code() {
        Some(0) => Ok(complaints),
        Some(1 | 3) if !complaints.is_empty() => Ok(complaints),
        _ => bail!(
            "`{PROMTOOL} check metrics` failed ({status}): {}",
            output.trim()
        ),
    }
}

/// Runs `promtool check rules FILES...`; returns its output, or an error carrying it
/// when a file is invalid.
pub fn promtool_check_rules(files: &[PathBuf]) -> Result<String> {
    let mut cmd = Command::new(PROMTOOL);
    cmd.args(["check", "rules"]).args(files);
    run_promtool(cmd)
}

/// Runs `promtool test rules FILES...` (unit tests of alerting rules); returns its
/// output, or an error carrying it when a test fails.
pub fn promtool_test_rules(files: &[PathBuf]) -> Result<String> {
    let mut cmd = Command::new(PROMTOOL);
    cmd.args(["test", "rules"]).args(files);
    run_promtool(cmd)
}

fn run_promtool(mut cmd: Command) -> Result<String> {
    let line = cmd::describe(&cmd);
    let out = cmd::output_timeout(&mut cmd, PROMTOOL_TIMEOUT)?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    ensure!(
        out.status.success(),
        "`{line}` failed ({}):\n{text}",
        out.status
    );
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_renders_jobs_tokens_and_rules() -> Result<()> {
        let mut job = ScrapeJob::new("netdoctor", "127.0.0.1:9469")
            .with_bearer_token_file(Path::new("/run/netdoctor/token"));
        job.scrape_timeout = Some(Duration::from_millis(500));
        job.labels.insert("instance".into(), "node-a".into());
        let config = PrometheusConfig {
            jobs: vec![job],
            rule_files: vec![PathBuf::from("/etc/prometheus/netdoctor.rules.yml")],
            ..PrometheusConfig::default()
        };
        let text = config.render()?;
        assert!(text.contains("scrape_interval: 1s"), "{text}");
        assert!(text.contains("- job_name: \"netdoctor\""), "{text}");
        assert!(
            text.contains("credentials_file: \"/run/netdoctor/token\""),
            "{text}"
        );
        assert!(text.contains("- \"127.0.0.1:9469\""), "{text}");
        assert!(text.contains("scrape_timeout: 500ms"), "{text}");
        assert!(
            text.contains("labels:\n          \"instance\": \"node-a\""),
            "{text}"
        );
        assert!(
            text.contains("- \"/etc/prometheus/netdoctor.rules.yml\""),
            "{text}"
        );
        let empty = PrometheusConfig::default().render()?;
        assert!(empty.contains("scrape_configs: []"), "{empty}");
        assert!(empty.contains("rule_files: []"), "{empty}");
        Ok(())
    }

    #[test]
    fn durations_in_prometheus_syntax() {
        assert_eq!(prom_duration(Duration::from_secs(1)), "1s");
        assert_eq!(prom_duration(Duration::from_millis(1500)), "1500ms");
    }

    #[test]
    fn results_of_every_type_parse() -> Result<()> {
        let vector = serde_json::json!({"resultType": "vector", "result": [
            {"metric": {"__name__": "up", "job": "x"}, "value": [1.5, "1"]},
            {"metric": {}, "value": [1.5, "NaN"]},
            {"metric": {}, "value": [1.5, "+Inf"]}]});
        let series = parse_result(&vector)?;
        assert_eq!(series.len(), 3);
        assert_eq!(series[0].name(), Some("up"));
        assert_eq!(series[0].label("job"), Some("x"));
        assert!(series[1].value.is_nan());
        assert!(series[2].value.is_infinite());
        let scalar = serde_json::json!({"resultType": "scalar", "result": [2.0, "42"]});
        assert_eq!(parse_result(&scalar)?[0].value, 42.0);
        let matrix = serde_json::json!({"resultType": "matrix", "result": [
            {"metric": {"a": "b"}, "values": [[1.0, "1"], [2.0, "2"]]}]});
        assert_eq!(parse_result(&matrix)?[0].value, 2.0);
        Ok(())
    }
}

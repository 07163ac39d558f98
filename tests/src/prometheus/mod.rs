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

mod api;
mod config;
mod promtool;
mod server;

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{ensure, Context, Result};

use crate::ci;

pub use api::{Alert, AlertingRule, Series, TargetHealth};
pub use config::{prom_duration, PrometheusConfig, ScrapeJob};
pub use promtool::{promtool_check_metrics, promtool_check_rules, promtool_test_rules};
pub use server::Prometheus;

/// The Prometheus server binary (Debian package `prometheus`).
pub const PROMETHEUS: &str = "prometheus";

/// Prometheus' command-line tool, from the same package.
pub const PROMTOOL: &str = "promtool";

/// How long [`Prometheus::start`] waits for `/-/ready`.
pub const START_TIMEOUT: Duration = Duration::from_secs(30);

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

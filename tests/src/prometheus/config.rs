//! What [`Prometheus::start`] writes into `prometheus.yml`: the scrape jobs, the rule
//! files and the intervals, rendered as YAML.
//!
//! [`Prometheus::start`]: super::Prometheus::start

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};

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
///
/// [`Prometheus::start`]: super::Prometheus::start
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
}

//! What the server's HTTP API answers (series of a query, scrape targets, alerting rules,
//! alerts), and how its JSON is read into them.

use std::collections::BTreeMap;

use anyhow::{bail, Context, Result};
use serde_json::Value;

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

pub(super) fn str_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

pub(super) fn string_map(v: &Value) -> BTreeMap<String, String> {
    v.as_object()
        .map(|m| m.iter().map(|(k, v)| (k.clone(), str_of(v))).collect())
        .unwrap_or_default()
}

pub(super) fn truncate(s: &str) -> &str {
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

pub(super) fn parse_result(data: &Value) -> Result<Vec<Series>> {
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

#[cfg(test)]
mod tests {
    use super::*;

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

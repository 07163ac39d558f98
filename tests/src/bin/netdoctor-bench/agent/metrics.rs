//! The agent's own `/metrics`: how many series it exposes and how long its evaluations
//! take.

use std::collections::HashMap;

use serde_json::{json, Value};

/// What the agent's `/metrics` said at one moment.
#[derive(Debug, Clone, Default)]
pub(crate) struct AgentMetrics {
    pub(crate) series: usize,
    pub(crate) families: usize,
    pub(crate) eval_sum_s: f64,
    pub(crate) eval_count: u64,
    /// Series per metric family, largest first.
    pub(crate) by_family: Vec<(String, usize)>,
}

pub(crate) fn parse_metrics(text: &str) -> AgentMetrics {
    let mut m = AgentMetrics::default();
    let mut family = String::new();
    let mut by_family: HashMap<String, usize> = HashMap::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            family = rest
                .split_whitespace()
                .next()
                .unwrap_or_default()
                .to_owned();
            m.families += 1;
            continue;
        }
        if line.starts_with('#') {
            continue;
        }
        m.series += 1;
        let name = line.split(['{', ' ']).next().unwrap_or_default().to_owned();
        let value = line
            .rsplit_once('}')
            .map_or(line, |(_, r)| r)
            .split_whitespace()
            .last()
            .and_then(|v| v.parse::<f64>().ok());
        match (name.as_str(), value) {
            ("netdoctor_evaluation_duration_seconds_sum", Some(v)) => m.eval_sum_s = v,
            ("netdoctor_evaluation_duration_seconds_count", Some(v)) => m.eval_count = v as u64,
            _ => {}
        }
        let key = if !family.is_empty() && name.starts_with(&family) {
            family.clone()
        } else {
            name
        };
        *by_family.entry(key).or_default() += 1;
    }
    m.by_family = by_family.into_iter().collect();
    m.by_family
        .sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    m
}

/// Evaluations between two `/metrics` reads.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Evaluations {
    pub(crate) count: u64,
    pub(crate) sum_s: f64,
}

impl Evaluations {
    pub(crate) fn between(before: &AgentMetrics, after: &AgentMetrics) -> Evaluations {
        Evaluations {
            count: after.eval_count.saturating_sub(before.eval_count),
            sum_s: (after.eval_sum_s - before.eval_sum_s).max(0.0),
        }
    }

    pub(crate) fn mean_ms(&self) -> Option<f64> {
        (self.count > 0).then(|| self.sum_s * 1e3 / self.count as f64)
    }

    pub(crate) fn json(&self) -> Value {
        json!({"count": self.count, "sum_s": self.sum_s, "mean_ms": self.mean_ms()})
    }
}

//! The metrics of docs/api.md's table (the contract), a synthetic exposition of all of
//! them, and the metric names a PromQL expression uses.

use std::collections::BTreeMap;

use anyhow::{bail, ensure, Context, Result};
use netdoctor_lab::prometheus;

/// A metric of the table in docs/api.md (the contract).
#[derive(Debug, Clone)]
pub(crate) struct ApiMetric {
    /// `counter`, `gauge` or `histogram`.
    kind: String,
    /// Label names.
    labels: Vec<String>,
}

impl ApiMetric {
    pub(crate) fn has_interface(&self) -> bool {
        self.labels.iter().any(|l| l == "interface")
    }
}

/// The metrics of docs/api.md's table, by name.
pub(crate) fn api_metrics() -> Result<BTreeMap<String, ApiMetric>> {
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
pub(crate) fn synthetic_exposition(metrics: &BTreeMap<String, ApiMetric>) -> Result<String> {
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
pub(crate) fn metric_uses(expr: &str) -> Vec<(String, &str)> {
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
pub(crate) fn base_metric<'a>(
    name: &'a str,
    metrics: &BTreeMap<String, ApiMetric>,
) -> Option<&'a str> {
    if metrics.contains_key(name) {
        return Some(name);
    }
    ["_bucket", "_sum", "_count"]
        .iter()
        .find_map(|s| name.strip_suffix(s))
        .filter(|base| metrics.contains_key(*base))
}

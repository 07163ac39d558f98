//! Prometheus text: the samples of an exposition, parsed, and found by name and labels.

use std::collections::BTreeMap;

use anyhow::{bail, ensure, Context, Result};

/// One sample of a Prometheus text exposition.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricSample {
    /// Metric name (with `_bucket`, `_sum`, ... suffixes as written).
    pub name: String,
    /// Labels.
    pub labels: BTreeMap<String, String>,
    /// Value.
    pub value: f64,
}

/// Parses the samples of a Prometheus text exposition (comments skipped). Errors name
/// the line that does not parse.
pub fn parse_metrics(text: &str) -> Result<Vec<MetricSample>> {
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        out.push(parse_metric_line(line).with_context(|| format!("metrics line {line:?}"))?);
    }
    Ok(out)
}

fn parse_metric_line(line: &str) -> Result<MetricSample> {
    let name_end = line
        .find(['{', ' '])
        .context("no value after the metric name")?;
    let name = line[..name_end].to_owned();
    let mut labels = BTreeMap::new();
    let mut rest = &line[name_end..];
    if let Some(after) = rest.strip_prefix('{') {
        let mut chars = after.char_indices();
        let mut key = String::new();
        let mut end = None;
        while let Some((i, c)) = chars.next() {
            match c {
                '}' => {
                    end = Some(i + 1);
                    break;
                }
                ',' | ' ' => {}
                '=' => {
                    ensure!(
                        matches!(chars.next(), Some((_, '"'))),
                        "label {key} without a quoted value"
                    );
                    let mut value = String::new();
                    loop {
                        match chars.next() {
                            Some((_, '\\')) => match chars.next() {
                                Some((_, 'n')) => value.push('\n'),
                                Some((_, c)) => value.push(c),
                                None => bail!("unterminated escape"),
                            },
                            Some((_, '"')) => break,
                            Some((_, c)) => value.push(c),
                            None => bail!("unterminated label value"),
                        }
                    }
                    labels.insert(std::mem::take(&mut key), value);
                }
                c => key.push(c),
            }
        }
        let end = end.context("unterminated label set")?;
        rest = &after[end..];
    }
    let value = rest.split_whitespace().next().context("no value")?;
    let value = match value {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        v => v.parse::<f64>().with_context(|| format!("value {v:?}"))?,
    };
    Ok(MetricSample {
        name,
        labels,
        value,
    })
}

/// Samples of metric `name` whose labels include every `(key, value)` of `labels`.
pub fn find_metric<'a>(
    samples: &'a [MetricSample],
    name: &str,
    labels: &[(&str, &str)],
) -> Vec<&'a MetricSample> {
    samples
        .iter()
        .filter(|s| {
            s.name == name
                && labels
                    .iter()
                    .all(|(k, v)| s.labels.get(*k).is_some_and(|x| x == v))
        })
        .collect()
}

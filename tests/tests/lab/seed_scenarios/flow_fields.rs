//! A flow's fields in a diagnosis report, or an error naming the flow.

use anyhow::{Context, Result};
use serde_json::Value;

pub(crate) fn flow_str<'a>(f: &'a Value, key: &str) -> Result<&'a str> {
    f.get(key)
        .and_then(Value::as_str)
        .with_context(|| format!("flow without string {key}: {f}"))
}

pub(crate) fn flow_f64(f: &Value, key: &str) -> Result<f64> {
    f.get(key)
        .and_then(Value::as_f64)
        .with_context(|| format!("flow without number {key}: {f}"))
}

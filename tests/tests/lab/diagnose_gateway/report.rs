//! Reading the report: JSON accessors whose errors show the value, and the verdict
//! the lossy-path scenarios share.

use anyhow::{ensure, Context, Result};
use netdoctor_lab::diagnosis::Diagnosis;
use serde_json::Value;

pub(crate) fn get<'a>(v: &'a Value, key: &str) -> Result<&'a Value> {
    v.get(key)
        .with_context(|| format!("key {key:?} missing in {}", short(v)))
}

pub(crate) fn short(v: &Value) -> String {
    let s = v.to_string();
    match s.char_indices().nth(400) {
        Some((i, _)) => format!("{}...", &s[..i]),
        None => s,
    }
}

pub(crate) fn as_str<'a>(v: &'a Value, key: &str) -> Result<&'a str> {
    get(v, key)?
        .as_str()
        .with_context(|| format!("{key:?} is not a string in {}", short(v)))
}

pub(crate) fn as_i64(v: &Value, key: &str) -> Result<i64> {
    get(v, key)?
        .as_i64()
        .with_context(|| format!("{key:?} is not an integer in {}", short(v)))
}

pub(crate) fn as_f64(v: &Value, key: &str) -> Result<f64> {
    get(v, key)?
        .as_f64()
        .with_context(|| format!("{key:?} is not a number in {}", short(v)))
}

pub(crate) fn as_bool(v: &Value, key: &str) -> Result<bool> {
    get(v, key)?
        .as_bool()
        .with_context(|| format!("{key:?} is not a boolean in {}", short(v)))
}

/// The gateway scenarios' verdict on a lossy path: exit 1, every problem a warning.
pub(crate) trait WarningsOnly {
    fn expect_warnings_only(&self) -> Result<()>;
}

impl WarningsOnly for Diagnosis {
    fn expect_warnings_only(&self) -> Result<()> {
        let critical = self
            .problems()
            .iter()
            .any(|f| f.get("severity").and_then(Value::as_str) == Some("critical"));
        ensure!(
            self.code == 1 && !critical,
            "expected exit 1 with warnings only:\n{}",
            self.describe()
        );
        Ok(())
    }
}

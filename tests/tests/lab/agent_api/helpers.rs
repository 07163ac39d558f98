//! Helpers shared by the API tests: the clock, list lookups, and error replies.

use anyhow::{ensure, Result};
use netdoctor_lab::agent::Reply;
use serde_json::Value;

pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// The entry of `list` whose `key` equals `value`.
pub(crate) fn find<'a>(list: &'a [Value], key: &str, value: &str) -> Option<&'a Value> {
    list.iter().find(|v| v[key] == value)
}

pub(crate) fn interfaces(r: &Reply) -> &[Value] {
    r.json["interfaces"]
        .as_array()
        .map_or(&[][..], Vec::as_slice)
}

/// Requires a 4xx JSON error with `code` (and `parameter`, when given).
pub(crate) fn expect_error(
    r: &Reply,
    status: u16,
    code: &str,
    parameter: Option<&str>,
) -> Result<()> {
    ensure!(
        r.status == status
            && r.error_code() == Some(code)
            && r.json
                .pointer("/error/message")
                .and_then(Value::as_str)
                .is_some_and(|m| !m.is_empty())
            && parameter.is_none_or(|p| r.error_parameter() == Some(p)),
        "expected HTTP {status} with error.code {code:?}{}: {}",
        parameter
            .map(|p| format!(" and error.parameter {p:?}"))
            .unwrap_or_default(),
        r.describe()
    );
    ensure!(
        r.content_type.starts_with("application/json"),
        "error without a JSON content type ({:?}): {}",
        r.content_type,
        r.describe()
    );
    Ok(())
}

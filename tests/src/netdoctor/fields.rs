//! Reading fields of the JSON report, with errors that name the missing or mistyped key.

use std::net::IpAddr;

use anyhow::{Context, Result};
use serde_json::Value;

/// Looks up `key` in a JSON object, naming it in the error.
pub(super) fn field<'a>(v: &'a Value, key: &str) -> Result<&'a Value> {
    v.get(key)
        .with_context(|| format!("key {key:?} missing in {}", short(v)))
}

fn short(v: &Value) -> String {
    let s = v.to_string();
    match s.char_indices().nth(300) {
        Some((i, _)) => format!("{}...", &s[..i]),
        None => s,
    }
}

/// An unsigned integer field.
pub fn u64_field(v: &Value, key: &str) -> Result<u64> {
    field(v, key)?
        .as_u64()
        .with_context(|| format!("{key:?} is not an unsigned integer in {}", short(v)))
}

/// A string field.
pub fn str_field<'a>(v: &'a Value, key: &str) -> Result<&'a str> {
    field(v, key)?
        .as_str()
        .with_context(|| format!("{key:?} is not a string in {}", short(v)))
}

pub(super) fn ip_field(v: &Value, key: &str) -> Result<IpAddr> {
    str_field(v, key)?
        .parse()
        .with_context(|| format!("{key:?} is not an IP address in {}", short(v)))
}

pub(super) fn u16_field(v: &Value, key: &str) -> Result<u16> {
    u16::try_from(u64_field(v, key)?).with_context(|| format!("{key:?} exceeds u16"))
}

pub(super) fn array_field<'a>(v: &'a Value, key: &str) -> Result<&'a Vec<Value>> {
    field(v, key)?
        .as_array()
        .with_context(|| format!("{key:?} is not an array in {}", short(v)))
}

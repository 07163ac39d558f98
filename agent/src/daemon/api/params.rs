//! Query parameters, parsed by hand so that every error names its parameter.

use std::collections::HashMap;

use super::error::ApiError;

/// Largest page.
pub const MAX_LIMIT: u32 = 1000;
/// Largest offset.
pub const MAX_OFFSET: u32 = 1_000_000;
/// Longest parameter value accepted.
const MAX_VALUE_LEN: usize = 256;

/// The query string of one request.
#[derive(Debug)]
pub struct Params(HashMap<String, String>);

impl Params {
    /// Checks names against `allowed` and lengths against a bound.
    pub fn new(raw: HashMap<String, String>, allowed: &[&str]) -> Result<Self, ApiError> {
        for (k, v) in &raw {
            if !allowed.contains(&k.as_str()) {
                return Err(ApiError::bad(
                    k,
                    format!(
                        "unknown parameter; this endpoint takes: {}",
                        allowed.join(", ")
                    ),
                ));
            }
            if v.len() > MAX_VALUE_LEN {
                return Err(ApiError::bad(
                    k,
                    format!("longer than {MAX_VALUE_LEN} characters"),
                ));
            }
        }
        Ok(Params(raw))
    }

    /// A string parameter.
    pub fn text(&self, name: &str) -> Option<String> {
        self.0.get(name).cloned()
    }

    /// An integer in `min..=max`, or `default`.
    pub fn int(&self, name: &str, default: i64, min: i64, max: i64) -> Result<i64, ApiError> {
        match self.0.get(name) {
            None => Ok(default),
            Some(v) => v
                .parse::<i64>()
                .ok()
                .filter(|n| (min..=max).contains(n))
                .ok_or_else(|| {
                    ApiError::bad(
                        name,
                        format!("expected an integer from {min} to {max}, got {v:?}"),
                    )
                }),
        }
    }

    /// An optional time in milliseconds since the epoch.
    pub fn time_ms(&self, name: &str) -> Result<Option<i64>, ApiError> {
        self.0
            .get(name)
            .map(|v| {
                v.parse::<i64>()
                    .ok()
                    .filter(|n| (0..=253_402_300_799_000).contains(n))
                    .ok_or_else(|| {
                        ApiError::bad(
                            name,
                            format!("expected milliseconds since the UNIX epoch, got {v:?}"),
                        )
                    })
            })
            .transpose()
    }

    /// `limit` and `offset`.
    pub fn page(&self) -> Result<(u32, u32), ApiError> {
        let limit = self.int("limit", 100, 1, i64::from(MAX_LIMIT))?;
        let offset = self.int("offset", 0, 0, i64::from(MAX_OFFSET))?;
        Ok((limit as u32, offset as u32))
    }

    /// A boolean, `true` or `false`.
    pub fn flag(&self, name: &str, default: bool) -> Result<bool, ApiError> {
        match self.0.get(name).map(String::as_str) {
            None => Ok(default),
            Some("true" | "1") => Ok(true),
            Some("false" | "0") => Ok(false),
            Some(v) => Err(ApiError::bad(
                name,
                format!("expected true or false, got {v:?}"),
            )),
        }
    }
}

/// A page of `items` (already filtered), as the API returns lists.
pub fn page<T: serde::Serialize>(items: Vec<T>, limit: u32, offset: u32) -> serde_json::Value {
    let total = items.len();
    let items: Vec<T> = items
        .into_iter()
        .skip(offset as usize)
        .take(limit as usize)
        .collect();
    serde_json::json!({"total": total, "limit": limit, "offset": offset, "items": items})
}

//! Query parameters, parsed by hand so that every error names its parameter: each name
//! and value is percent-decoded (`+` is a space) and must be valid UTF-8; a name given
//! twice, unknown to the endpoint, or a value too long is refused.

use std::collections::HashMap;

use axum::extract::rejection::PathRejection;
use axum::extract::Path;
use percent_encoding::percent_decode;

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

/// One `application/x-www-form-urlencoded` name or value, decoded strictly.
fn decode(raw: &str) -> Result<String, std::str::Utf8Error> {
    let spaced: Vec<u8> = raw
        .bytes()
        .map(|b| if b == b'+' { b' ' } else { b })
        .collect();
    percent_decode(&spaced)
        .decode_utf8()
        .map(|s| s.into_owned())
}

impl Params {
    /// Parses the raw query string (`None`: there is none) and checks names against
    /// `allowed`, and values against a length bound.
    pub fn parse(query: Option<&str>, allowed: &[&str]) -> Result<Self, ApiError> {
        let mut params = HashMap::new();
        for pair in query
            .unwrap_or_default()
            .split('&')
            .filter(|p| !p.is_empty())
        {
            let (raw_name, raw_value) = pair.split_once('=').unwrap_or((pair, ""));
            let name = decode(raw_name).map_err(|_| {
                let shown = String::from_utf8_lossy(
                    &percent_decode(raw_name.as_bytes()).collect::<Vec<u8>>(),
                )
                .into_owned();
                ApiError::bad(
                    &shown,
                    "the parameter's name is not UTF-8 once percent-decoded",
                )
            })?;
            if !allowed.contains(&name.as_str()) {
                return Err(ApiError::bad(
                    &name,
                    format!(
                        "unknown parameter; this endpoint takes: {}",
                        allowed.join(", ")
                    ),
                ));
            }
            let value = decode(raw_value).map_err(|_| {
                ApiError::bad(
                    &name,
                    format!("{raw_value:?} is not UTF-8 once percent-decoded"),
                )
            })?;
            if value.len() > MAX_VALUE_LEN {
                return Err(ApiError::bad(
                    &name,
                    format!("longer than {MAX_VALUE_LEN} characters"),
                ));
            }
            if params.insert(name.clone(), value).is_some() {
                return Err(ApiError::bad(&name, "given more than once; give it once"));
            }
        }
        Ok(Params(params))
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

/// The value of the path segment `{name}`, which the router percent-decodes; a 400 naming
/// it when that is not UTF-8.
pub fn path_text(
    path: Result<Path<String>, PathRejection>,
    name: &str,
) -> Result<String, ApiError> {
    path.map(|Path(value)| value)
        .map_err(|e| ApiError::bad(name, e.body_text()))
}

/// A page of `items` (already filtered), as the API returns lists.
pub fn page<T: serde::Serialize>(items: Vec<T>, limit: u32, offset: u32) -> serde_json::Value {
    page_map(items, limit, offset, |t| t)
}

/// [`page`] of `items` each made into what is served by `serve`, which runs for the page's
/// items only.
pub fn page_map<T, U: serde::Serialize>(
    items: Vec<T>,
    limit: u32,
    offset: u32,
    serve: impl FnMut(T) -> U,
) -> serde_json::Value {
    let total = items.len();
    let items: Vec<U> = items
        .into_iter()
        .skip(offset as usize)
        .take(limit as usize)
        .map(serve)
        .collect();
    serde_json::json!({"total": total, "limit": limit, "offset": offset, "items": items})
}

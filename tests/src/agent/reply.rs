//! One HTTP response of the agent, with the accessors and checks tests use on it.

use anyhow::{ensure, Result};
use serde_json::Value;

/// Longest piece of a response body quoted in error messages.
const QUOTE_MAX: usize = 4000;

/// One HTTP response.
#[derive(Debug, Clone)]
pub struct Reply {
    /// What was asked, e.g. `GET /api/v1/flows`.
    pub request: String,
    /// HTTP status code.
    pub status: u16,
    /// `Content-Type` header ("" when absent).
    pub content_type: String,
    /// `WWW-Authenticate` header ("" when absent).
    pub www_authenticate: String,
    /// `Retry-After` header ("" when absent).
    pub retry_after: String,
    /// Names of every header of the response, lower case.
    pub header_names: Vec<String>,
    /// The body as text (lossy UTF-8).
    pub text: String,
    /// The body parsed as JSON; `Value::Null` when it is not JSON.
    pub json: Value,
}

impl Reply {
    /// `error.code` of an error body, if any.
    pub fn error_code(&self) -> Option<&str> {
        self.json.pointer("/error/code").and_then(Value::as_str)
    }

    /// `error.parameter` of a `bad_parameter` body, if any.
    pub fn error_parameter(&self) -> Option<&str> {
        self.json
            .pointer("/error/parameter")
            .and_then(Value::as_str)
    }

    /// `items` of a `Page` (empty when absent).
    pub fn items(&self) -> &[Value] {
        self.json["items"].as_array().map_or(&[][..], Vec::as_slice)
    }

    /// One line for assertion messages: request, status and (the start of) the body.
    pub fn describe(&self) -> String {
        format!(
            "{} -> HTTP {}: {}",
            self.request,
            self.status,
            quote(&self.text)
        )
    }

    /// Requires status `status`; the error shows the whole reply.
    pub fn expect_status(&self, status: u16) -> Result<&Self> {
        ensure!(
            self.status == status,
            "expected HTTP {status}: {}",
            self.describe()
        );
        Ok(self)
    }
}

/// The start of `text`, at most [`QUOTE_MAX`] characters.
fn quote(text: &str) -> String {
    match text.char_indices().nth(QUOTE_MAX) {
        Some((i, _)) => format!("{}... ({} bytes)", &text[..i], text.len()),
        None => text.to_owned(),
    }
}

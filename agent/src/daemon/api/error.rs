//! The API's one error type: every failure becomes a JSON body with a stable `code`.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

/// What can go wrong answering a request.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// A query parameter is invalid.
    #[error("{parameter}: {message}")]
    BadParameter {
        /// The parameter's name.
        parameter: String,
        /// What is wrong and what is expected.
        message: String,
    },
    /// No such interface in the agent's network namespace.
    #[error("no interface named {0:?}")]
    UnknownInterface(String),
    /// The bearer token is missing or wrong.
    #[error("missing or wrong bearer token")]
    Unauthorized,
    /// The `Host` header names another site (DNS rebinding): the value given.
    #[error(
        "this agent does not answer to Host {0:?}: use its address or localhost, or start \
         it with --allowed-host NAME"
    )]
    ForeignHost(String),
    /// The request's `Host` is malformed, missing from HTTP/1.1, or given twice: why.
    #[error(
        "bad Host: {0}; send exactly one Host header naming this agent, e.g. Host: 127.0.0.1:9469"
    )]
    BadHost(String),
    /// A request that runs work could have been sent by a page of another site: why.
    #[error("refused because {0}")]
    CrossSite(String),
    /// A diagnosis is already running.
    #[error("a diagnosis is already running; try again when it has finished")]
    Busy,
    /// Anything else (database, kernel): logged, reported without internals.
    #[error("{0}")]
    Internal(String),
}

impl ApiError {
    /// A bad parameter.
    pub fn bad(parameter: &str, message: impl Into<String>) -> Self {
        ApiError::BadParameter {
            parameter: parameter.to_owned(),
            message: message.into(),
        }
    }
}

impl From<crate::daemon::store::StoreError> for ApiError {
    fn from(e: crate::daemon::store::StoreError) -> Self {
        ApiError::Internal(format!("history database: {e}"))
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let message = self.to_string();
        let (status, body) = match &self {
            ApiError::BadParameter { parameter, message } => (
                StatusCode::BAD_REQUEST,
                json!({"code": "bad_parameter", "parameter": parameter, "message": message}),
            ),
            ApiError::UnknownInterface(_) => (
                StatusCode::NOT_FOUND,
                json!({"code": "unknown_interface", "message": message}),
            ),
            ApiError::Unauthorized => (
                StatusCode::UNAUTHORIZED,
                json!({"code": "unauthorized", "message": message}),
            ),
            ApiError::ForeignHost(_) => (
                StatusCode::FORBIDDEN,
                json!({"code": "foreign_host", "message": message}),
            ),
            ApiError::BadHost(_) => (
                StatusCode::BAD_REQUEST,
                json!({"code": "bad_host", "message": message}),
            ),
            ApiError::CrossSite(_) => (
                StatusCode::FORBIDDEN,
                json!({"code": "cross_site", "message": message}),
            ),
            ApiError::Busy => (
                StatusCode::TOO_MANY_REQUESTS,
                json!({"code": "busy", "message": message}),
            ),
            ApiError::Internal(_) => {
                tracing::error!("API: {message}");
                (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    json!({"code": "internal", "message": message}),
                )
            }
        };
        let mut response = (status, Json(json!({ "error": body }))).into_response();
        if status == StatusCode::TOO_MANY_REQUESTS {
            // A diagnosis takes its duration plus a few seconds of probing.
            response.headers_mut().insert(
                axum::http::header::RETRY_AFTER,
                axum::http::HeaderValue::from_static("10"),
            );
        }
        if status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(
                axum::http::header::WWW_AUTHENTICATE,
                axum::http::HeaderValue::from_static("Bearer realm=\"netdoctor\""),
            );
        }
        response
    }
}

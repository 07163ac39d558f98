//! Bearer-token check and request-size guard, in front of everything but `/healthz`.

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::error::ApiError;
use super::AppState;

/// Longest query string accepted: parameters are short; anything longer is a mistake or
/// an attack.
const MAX_QUERY_LEN: usize = 2048;

/// Compares without stopping at the first difference, so timing reveals nothing of the
/// token.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Rejects oversized query strings and, when a token is configured, requests without it.
pub async fn guard(State(state): State<AppState>, request: Request, next: Next) -> Response {
    if request
        .uri()
        .query()
        .is_some_and(|q| q.len() > MAX_QUERY_LEN)
    {
        return ApiError::bad(
            "query",
            format!("query string longer than {MAX_QUERY_LEN} bytes"),
        )
        .into_response();
    }
    if let Some(token) = &state.shared.config.token {
        let given = request
            .headers()
            .get(axum::http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        let public_asset = request.method() == axum::http::Method::GET
            && super::dashboard::is_asset(request.uri().path());
        if !public_asset && !given.is_some_and(|g| same(g.trim().as_bytes(), token.as_bytes())) {
            return ApiError::Unauthorized.into_response();
        }
    }
    next.run(request).await
}

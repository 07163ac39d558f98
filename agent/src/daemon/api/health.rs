//! `/healthz`, `/readyz` and `/metrics`.

use std::sync::atomic::Ordering;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

use super::error::ApiError;
use super::AppState;

/// The process serves requests.
pub async fn healthz() -> Json<serde_json::Value> {
    Json(json!({"status": "ok"}))
}

/// Ready: the first evaluation has finished and the history database takes writes.
///
/// While the store's writes fail (a full file system), the monitor keeps evaluating, but
/// findings and history stay as they were: 503 `"degraded"`, with the store's state, so
/// whoever relies on the agent's findings knows; `/healthz` stays 200, as restarting
/// would not help.
pub async fn readyz(State(state): State<AppState>) -> Response {
    let notes = state.shared.view().health.notes.clone();
    let ready = state.shared.ready.load(Ordering::Acquire);
    let store = state.shared.store.health();
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    let (status, code) = match (ready, store.is_ok()) {
        (false, _) => ("starting", StatusCode::SERVICE_UNAVAILABLE),
        (true, false) => ("degraded", StatusCode::SERVICE_UNAVAILABLE),
        (true, true) => ("ready", StatusCode::OK),
    };
    let body = json!({
        "status": status,
        "interval_s": state.shared.config.interval.as_secs_f64(),
        "now_ms": now_ms,
        "notes": notes,
        "store": store,
    });
    (code, Json(body)).into_response()
}

/// Prometheus text exposition.
pub async fn metrics(State(state): State<AppState>) -> Result<Response, ApiError> {
    let text = state
        .metrics
        .render()
        .map_err(|e| ApiError::Internal(format!("metrics: {e}")))?;
    Ok((
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        text,
    )
        .into_response())
}

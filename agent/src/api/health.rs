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

/// The first evaluation has finished.
pub async fn readyz(State(state): State<AppState>) -> Response {
    let view = state.shared.view();
    let notes = view.health.notes.clone();
    if state.shared.ready.load(Ordering::Acquire) {
        Json(json!({"status": "ready", "notes": notes})).into_response()
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({"status": "starting", "notes": notes})),
        )
            .into_response()
    }
}

/// Prometheus text exposition.
pub async fn metrics(State(state): State<AppState>) -> Result<Response, ApiError> {
    let text = state
        .metrics
        .render()
        .map_err(|e| ApiError::Internal(format!("metrics: {e}")))?;
    Ok((
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")],
        text,
    )
        .into_response())
}

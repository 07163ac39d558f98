//! The SQLite history: findings with their lifecycle, per-interface samples, and the
//! configuration timeline's events.

use axum::extract::{RawQuery, State};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{json, Value};

use super::error::ApiError;
use super::params::Params;
use super::AppState;
use crate::daemon::store::{EventQuery, FindingQuery, SampleQuery, StateFilter};

/// Samples default to the last hour.
const DEFAULT_SAMPLE_RANGE_MS: i64 = 3_600_000;

/// Routes of this module.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/findings", get(findings))
        .route("/samples", get(samples))
        .route("/events", get(events))
}

fn range(p: &Params) -> Result<(Option<i64>, Option<i64>), ApiError> {
    let (since, until) = (p.time_ms("since")?, p.time_ms("until")?);
    if let (Some(s), Some(u)) = (since, until) {
        if s > u {
            return Err(ApiError::bad("since", "must not be later than until"));
        }
    }
    Ok((since, until))
}

async fn findings(
    State(state): State<AppState>,
    RawQuery(query): RawQuery,
) -> Result<Json<Value>, ApiError> {
    let p = Params::parse(
        query.as_deref(),
        &["interface", "state", "since", "until", "limit", "offset"],
    )?;
    let (limit, offset) = p.page()?;
    let (since_ms, until_ms) = range(&p)?;
    let state_filter = match p.text("state").as_deref() {
        None | Some("active") => StateFilter::Active,
        Some("resolved") => StateFilter::Resolved,
        Some("all") => StateFilter::All,
        Some(other) => {
            return Err(ApiError::bad(
                "state",
                format!("expected active, resolved or all, got {other:?}"),
            ))
        }
    };
    let q = FindingQuery {
        interface: p.text("interface"),
        state: state_filter,
        since_ms,
        until_ms,
        limit,
        offset,
    };
    let store = state.shared.store.clone();
    let page = tokio::task::spawn_blocking(move || store.findings(&q))
        .await
        .map_err(|e| ApiError::Internal(e.to_string()))??;
    Ok(Json(json!(page)))
}

async fn samples(
    State(state): State<AppState>,
    RawQuery(query): RawQuery,
) -> Result<Json<Value>, ApiError> {
    let p = Params::parse(
        query.as_deref(),
        &["interface", "since", "until", "limit", "offset"],
    )?;
    let (limit, offset) = p.page()?;
    let (since_ms, until_ms) = range(&p)?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    let q = SampleQuery {
        interface: p.text("interface"),
        since_ms: Some(since_ms.unwrap_or(until_ms.unwrap_or(now) - DEFAULT_SAMPLE_RANGE_MS)),
        until_ms,
        limit,
        offset,
    };
    let store = state.shared.store.clone();
    let page = tokio::task::spawn_blocking(move || store.samples(&q))
        .await
        .map_err(|e| ApiError::Internal(e.to_string()))??;
    Ok(Json(json!(page)))
}

/// The configuration timeline, newest first: `iface` (or `interface`, as elsewhere),
/// `since`, `until`, `limit` (at most 1,000) and `offset`.
async fn events(
    State(state): State<AppState>,
    RawQuery(query): RawQuery,
) -> Result<Json<Value>, ApiError> {
    let p = Params::parse(
        query.as_deref(),
        &["iface", "interface", "since", "until", "limit", "offset"],
    )?;
    let (limit, offset) = p.page()?;
    let (since_ms, until_ms) = range(&p)?;
    let interface = match (p.text("iface"), p.text("interface")) {
        (Some(_), Some(_)) => {
            return Err(ApiError::bad(
                "iface",
                "give iface or interface, not both (they are the same filter)",
            ))
        }
        (a, b) => a.or(b),
    };
    let q = EventQuery {
        interface,
        since_ms,
        until_ms,
        limit,
        offset,
    };
    let store = state.shared.store.clone();
    let page = tokio::task::spawn_blocking(move || store.events(&q))
        .await
        .map_err(|e| ApiError::Internal(e.to_string()))??;
    Ok(Json(json!(page)))
}

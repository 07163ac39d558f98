//! What the monitor published in its last window: interfaces, flows, sockets, drops.

use std::collections::HashMap;

use axum::extract::{Path, Query, State};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{json, Value};

use super::error::ApiError;
use super::params::{page, Params};
use super::AppState;

/// Routes of this module.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/interfaces", get(interfaces))
        .route("/interfaces/{name}", get(interface))
        .route("/flows", get(flows))
        .route("/sockets", get(sockets))
        .route("/drops", get(drops))
}

async fn interfaces(
    State(state): State<AppState>,
    Query(raw): Query<HashMap<String, String>>,
) -> Result<Json<Value>, ApiError> {
    Params::new(raw, &[])?;
    let view = state.shared.view();
    let list: Vec<_> = view.interfaces.values().collect();
    Ok(Json(json!({ "interfaces": list })))
}

async fn interface(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let view = state.shared.view();
    let v = view
        .interfaces
        .get(&name)
        .ok_or(ApiError::UnknownInterface(name))?;
    Ok(Json(json!(v)))
}

async fn flows(
    State(state): State<AppState>,
    Query(raw): Query<HashMap<String, String>>,
) -> Result<Json<Value>, ApiError> {
    let p = Params::new(raw, &["interface", "limit", "offset"])?;
    let (limit, offset) = p.page()?;
    let only = p.text("interface");
    let view = state.shared.view();
    let mut items: Vec<_> = view
        .flows
        .iter()
        .filter(|f| only.as_ref().is_none_or(|i| &f.interface == i))
        .collect();
    items.sort_by_key(|f| std::cmp::Reverse(f.flow.bytes));
    Ok(Json(page(items, limit, offset)))
}

async fn sockets(
    State(state): State<AppState>,
    Query(raw): Query<HashMap<String, String>>,
) -> Result<Json<Value>, ApiError> {
    let p = Params::new(raw, &["interface", "limit", "offset"])?;
    let (limit, offset) = p.page()?;
    let only = p.text("interface");
    let view = state.shared.view();
    let items: Vec<_> = view
        .sockets
        .iter()
        .filter(|s| only.as_ref().is_none_or(|i| &s.interface == i))
        .collect();
    Ok(Json(page(items, limit, offset)))
}

async fn drops(
    State(state): State<AppState>,
    Query(raw): Query<HashMap<String, String>>,
) -> Result<Json<Value>, ApiError> {
    let p = Params::new(raw, &["interface"])?;
    let only = p.text("interface");
    let view = state.shared.view();
    let items: Vec<_> = view
        .drops
        .iter()
        .filter(|d| only.as_ref().is_none_or(|i| &d.interface == i))
        .collect();
    Ok(Json(json!({ "drops": items })))
}

//! What the monitor published in its last window: interfaces, flows, sockets, drops.

use axum::extract::rejection::PathRejection;
use axum::extract::{Path, RawQuery, State};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{json, Value};

use super::error::ApiError;
use super::params::{page, page_map, path_text, Params};
use super::AppState;
use crate::daemon::state::FlowView;
use crate::kernel::packet::flows::Flow;

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
    RawQuery(query): RawQuery,
) -> Result<Json<Value>, ApiError> {
    Params::parse(query.as_deref(), &[])?;
    let view = state.shared.view();
    let list: Vec<_> = view.interfaces.values().collect();
    Ok(Json(json!({ "interfaces": list })))
}

async fn interface(
    State(state): State<AppState>,
    name: Result<Path<String>, PathRejection>,
) -> Result<Json<Value>, ApiError> {
    let name = path_text(name, "name")?;
    let view = state.shared.view();
    let v = view
        .interfaces
        .get(&name)
        .ok_or(ApiError::UnknownInterface(name))?;
    Ok(Json(json!(v)))
}

async fn flows(
    State(state): State<AppState>,
    RawQuery(query): RawQuery,
) -> Result<Json<Value>, ApiError> {
    let p = Params::parse(query.as_deref(), &["interface", "limit", "offset"])?;
    let (limit, offset) = p.page()?;
    let only = p.text("interface");
    // The window's flows are shared (an Arc): take them and let the view's lock go before
    // sorting what may be a million flows.
    let (flows, names) = {
        let view = state.shared.view();
        (view.flows.clone(), view.flow_interfaces.clone())
    };
    let mut items: Vec<(&String, &Flow)> = flows
        .iter()
        .filter_map(|f| Some((names.get(&f.ifindex)?, f)))
        .filter(|(name, _)| only.as_ref().is_none_or(|i| *name == i))
        .collect();
    largest_first(&mut items, offset as usize + limit as usize);
    // Only the page's flows are copied, with their interface's name.
    Ok(Json(page_map(items, limit, offset, |(name, f)| FlowView {
        interface: name.clone(),
        flow: f.clone(),
    })))
}

/// Puts the `first` largest flows first, by bytes then by key (a total order, so pages of
/// one reading neither repeat nor skip flows of equal bytes), and only those in order:
/// a page near the top of a large table sorts a page's worth, not the table.
fn largest_first(items: &mut [(&String, &Flow)], first: usize) {
    let order = |(_, f): &(&String, &Flow)| (std::cmp::Reverse(f.bytes), f.key());
    if first < items.len() {
        items.select_nth_unstable_by_key(first, order);
    }
    let end = first.min(items.len());
    items[..end].sort_unstable_by_key(order);
}

async fn sockets(
    State(state): State<AppState>,
    RawQuery(query): RawQuery,
) -> Result<Json<Value>, ApiError> {
    let p = Params::parse(query.as_deref(), &["interface", "limit", "offset"])?;
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
    RawQuery(query): RawQuery,
) -> Result<Json<Value>, ApiError> {
    let p = Params::parse(query.as_deref(), &["interface"])?;
    let only = p.text("interface");
    let view = state.shared.view();
    let items: Vec<_> = view
        .drops
        .iter()
        .filter(|d| only.as_ref().is_none_or(|i| &d.interface == i))
        .collect();
    Ok(Json(json!({ "drops": items })))
}

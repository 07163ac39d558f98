//! The agent's HTTP API: read-only JSON under `/api/v1/`, Prometheus `/metrics`, health
//! probes and the embedded dashboard, one router per module. Contract: `docs/api.md`.

mod auth;
mod authority;
mod dashboard;
mod diagnose;
mod error;
mod health;
mod history;
mod live;
mod origin;
mod params;

use std::sync::Arc;

use axum::routing::get;
use axum::Router;

pub use origin::HostPolicy;

use crate::daemon::metrics::Metrics;
use crate::daemon::state::Shared;

/// What every handler can reach.
#[derive(Debug, Clone)]
pub struct AppState {
    /// The monitor's view, the store and the configuration.
    pub shared: Arc<Shared>,
    /// The metrics registry.
    pub metrics: Metrics,
    /// Held while a diagnosis runs: one at a time.
    pub diagnosing: Arc<tokio::sync::Semaphore>,
    /// The `Host` names requests must carry.
    pub hosts: HostPolicy,
}

/// The whole application.
pub fn router(shared: Arc<Shared>) -> anyhow::Result<Router> {
    let state = AppState {
        hosts: HostPolicy::new(shared.config.listen, &shared.config.allowed_hosts)?,
        metrics: Metrics::new(shared.clone())?,
        shared,
        diagnosing: Arc::new(tokio::sync::Semaphore::new(1)),
    };
    let api = Router::new()
        .merge(live::router())
        .merge(history::router())
        .merge(diagnose::router());
    Ok(Router::new()
        .nest("/api/v1", api)
        .route("/metrics", get(health::metrics))
        .route("/readyz", get(health::readyz))
        .merge(dashboard::router())
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            auth::guard,
        ))
        // /healthz answers even without a token: liveness probes carry none.
        .route("/healthz", get(health::healthz))
        // Outermost, so nothing answers a request meant for another site or a POST that
        // any web page could have sent: see `origin`.
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            origin::check_cross_site,
        ))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            origin::check_host,
        ))
        .layer(tower_http::limit::RequestBodyLimitLayer::new(1024))
        .with_state(state))
}

#[cfg(test)]
mod tests;

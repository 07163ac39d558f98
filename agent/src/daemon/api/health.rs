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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use axum::body::to_bytes;

    use super::*;
    use crate::daemon::api::origin::HostPolicy;
    use crate::daemon::config::{Config, Overrides};
    use crate::daemon::metrics::Metrics;
    use crate::daemon::state::Shared;
    use crate::daemon::store::{Retention, Sample, Store};

    fn app() -> AppState {
        let config = Config::resolve(&Overrides::default()).expect("default configuration");
        let store = Store::open_in_memory(Retention::default()).expect("store");
        let shared = Arc::new(Shared::new(config, Arc::new(store)).expect("shared state"));
        AppState {
            hosts: HostPolicy::new(shared.config.listen, &[]),
            metrics: Metrics::new(shared.clone()).expect("metrics"),
            diagnosing: Arc::new(tokio::sync::Semaphore::new(1)),
            shared,
        }
    }

    async fn get_readyz(app: &AppState) -> (StatusCode, serde_json::Value) {
        let r = readyz(State(app.clone())).await;
        let status = r.status();
        let body = to_bytes(r.into_body(), 1 << 20).await.expect("body");
        (status, serde_json::from_slice(&body).expect("JSON"))
    }

    fn sample() -> Sample {
        Sample {
            interface: "wg0".into(),
            ..Sample::default()
        }
    }

    #[tokio::test]
    async fn readyz_and_the_metrics_follow_the_store() {
        let app = app();
        let (status, body) = get_readyz(&app).await;
        assert_eq!(
            (status, &body["status"]),
            (StatusCode::SERVICE_UNAVAILABLE, &json!("starting"))
        );
        app.shared.ready.store(true, Ordering::Release);
        let (status, body) = get_readyz(&app).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(
            body["store"],
            json!({"status": "ok", "failing_since_ms": null, "error": null, "errors_total": 0})
        );

        // Writes fail: the monitor goes on, /readyz says so.
        app.shared.store.set_query_only(true);
        assert!(app.shared.store.insert_sample(&sample()).is_err());
        assert!(app.shared.store.insert_sample(&sample()).is_err());
        let (status, body) = get_readyz(&app).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
        assert_eq!(body["status"], "degraded");
        assert_eq!(body["store"]["status"], "failing");
        assert_eq!(body["store"]["errors_total"], 2);
        assert!(
            body["store"]["failing_since_ms"].as_i64() > Some(0),
            "{body}"
        );
        assert!(
            body["store"]["error"]
                .as_str()
                .is_some_and(|e| e.contains("readonly")),
            "{body}"
        );
        let text = app.metrics.render().expect("metrics");
        assert!(text.contains("netdoctor_store_healthy 0\n"), "{text}");
        assert!(text.contains("netdoctor_store_errors_total 2\n"), "{text}");

        // They work again.
        app.shared.store.set_query_only(false);
        app.shared.store.insert_sample(&sample()).expect("insert");
        let (status, body) = get_readyz(&app).await;
        assert_eq!(
            (status, &body["status"]),
            (StatusCode::OK, &json!("ready")),
            "{body}"
        );
        assert_eq!(body["store"]["errors_total"], 2);
        let text = app.metrics.render().expect("metrics");
        assert!(text.contains("netdoctor_store_healthy 1\n"), "{text}");
    }
}

//! `/readyz` and `/metrics` follow the history database: a store that fails its writes makes
//! the agent "degraded" (503) with the store's state, and the metrics say so.

use axum::http::StatusCode;
use serde_json::json;

use super::fixture::App;
use crate::daemon::store::Sample;

fn sample() -> Sample {
    Sample {
        interface: "wg0".into(),
        ..Sample::default()
    }
}

#[tokio::test]
async fn readyz_and_the_metrics_follow_the_store() {
    let app = App::new();
    let r = app.get("/readyz").await;
    assert_eq!(
        (r.status, &r.json["status"]),
        (StatusCode::SERVICE_UNAVAILABLE, &json!("starting"))
    );
    app.shared
        .ready
        .store(true, std::sync::atomic::Ordering::Release);
    let r = app.get("/readyz").await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(
        r.json["store"],
        json!({"status": "ok", "failing_since_ms": null, "error": null, "errors_total": 0})
    );

    // Writes fail: the monitor goes on, /readyz says so.
    app.shared.store.set_query_only(true);
    assert!(app.shared.store.insert_sample(&sample()).is_err());
    assert!(app.shared.store.insert_sample(&sample()).is_err());
    let r = app.get("/readyz").await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE, "{}", r.text);
    assert_eq!(r.json["status"], "degraded");
    assert_eq!(r.json["store"]["status"], "failing");
    assert_eq!(r.json["store"]["errors_total"], 2);
    assert!(
        r.json["store"]["failing_since_ms"].as_i64() > Some(0),
        "{}",
        r.text
    );
    assert!(
        r.json["store"]["error"]
            .as_str()
            .is_some_and(|e| e.contains("readonly")),
        "{}",
        r.text
    );
    let metrics = app.get("/metrics").await.text;
    assert!(metrics.contains("netdoctor_store_healthy 0\n"), "{metrics}");
    assert!(
        metrics.contains("netdoctor_store_errors_total 2\n"),
        "{metrics}"
    );

    // They work again.
    app.shared.store.set_query_only(false);
    app.shared.store.insert_sample(&sample()).expect("insert");
    let r = app.get("/readyz").await;
    assert_eq!(
        (r.status, &r.json["status"]),
        (StatusCode::OK, &json!("ready")),
        "{}",
        r.text
    );
    assert_eq!(r.json["store"]["errors_total"], 2);
    let metrics = app.get("/metrics").await.text;
    assert!(metrics.contains("netdoctor_store_healthy 1\n"), "{metrics}");
}

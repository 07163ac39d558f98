//! One diagnosis at a time, also when clients give up (issue 36: the slot was freed when
//! the client went away, while the diagnosis ran on; four ran at once). Runs a real
//! diagnosis of `lo` in a network namespace of its own: needs root.

use std::time::{Duration, Instant};

use axum::http::Method;

use super::fixture::App;

#[test]
fn an_abandoned_diagnosis_keeps_the_slot_until_it_ends() {
    if !crate::testing::root_or_skip("to load the diagnosis' programs") {
        return;
    }
    // This thread moves to a network namespace of its own, so nothing attaches to the
    // host's `lo`; the runtime, and the diagnosis' thread it starts, live there too.
    nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET).expect("unshare(CLONE_NEWNET)");
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(abandoned_diagnosis());
}

async fn abandoned_diagnosis() {
    let app = std::sync::Arc::new(App::new());
    let started = Instant::now();
    let first = {
        let app = app.clone();
        tokio::spawn(async move {
            app.send(App::request(
                Method::POST,
                "/api/v1/diagnose/lo?duration=4&probe=false",
            ))
            .await
        })
    };
    // The client gives up after a second, as an HTTP client's timeout does: the server
    // drops the request.
    tokio::time::sleep(Duration::from_secs(1)).await;
    first.abort();
    assert!(first.await.is_err_and(|e| e.is_cancelled()));
    let busy = app
        .send(App::request(
            Method::POST,
            "/api/v1/diagnose/lo?duration=1&probe=false",
        ))
        .await;
    busy.expect_error(429, "busy", None);
    assert!(busy.headers.contains_key("retry-after"));

    // Healthy twin: once the abandoned diagnosis has ended, the next one runs.
    let deadline = started + Duration::from_secs(30);
    loop {
        let r = app
            .send(App::request(
                Method::POST,
                "/api/v1/diagnose/lo?duration=1&probe=false",
            ))
            .await;
        if r.status == 200 {
            assert_eq!(r.json["interface"], "lo", "{}", r.text);
            assert!(
                started.elapsed() >= Duration::from_secs(4),
                "a diagnosis ran while the abandoned one ({:?} ago) still observed",
                started.elapsed()
            );
            break;
        }
        r.expect_error(429, "busy", None);
        assert!(Instant::now() < deadline, "the slot was never freed");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

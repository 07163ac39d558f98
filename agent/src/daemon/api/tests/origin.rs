//! `Host` and `Origin` are parsed and compared exactly (issue 36: `localhost:abc`,
//! `localhost..`, two `Host` headers and an `Origin` naming another site after the agent's
//! address used to pass).

use axum::http::{header, Method, Version};

use super::fixture::App;

#[tokio::test]
async fn a_malformed_or_doubled_host_is_a_bad_request() {
    let app = App::new();
    for host in [
        "localhost:abc",
        "localhost..",
        "localhost..:9469",
        "127.0.0.1:9469x",
        "127.0.0.1:9469/x",
        "user@127.0.0.1:9469",
        "[::1",
    ] {
        let r = app
            .send(App::request_to(Method::GET, "/api/v1/interfaces", host))
            .await;
        r.expect_error(400, "bad_host", None);
        assert!(r.text.contains("Host"), "{host}: {}", r.text);
    }
    // Two Host lines, even both the agent's own (RFC 9112 §3.2).
    let twice =
        App::request(Method::GET, "/api/v1/interfaces").header(header::HOST, "127.0.0.1:9469");
    let r = app.send(twice).await;
    r.expect_error(400, "bad_host", None);
    // HTTP/1.1 without Host: 400; HTTP/1.0 without Host (no browser): served.
    let bare = |version| {
        let mut b = axum::http::Request::builder()
            .uri("/api/v1/interfaces")
            .version(version);
        b.headers_mut().map(|h| h.remove(header::HOST));
        b
    };
    app.send(bare(Version::HTTP_11))
        .await
        .expect_error(400, "bad_host", None);
    assert_eq!(app.send(bare(Version::HTTP_10)).await.status, 200);
    // Another site's name is well formed, and refused as before.
    let r = app
        .send(App::request_to(
            Method::GET,
            "/api/v1/interfaces",
            "evil.example:9469",
        ))
        .await;
    r.expect_error(403, "foreign_host", None);
}

#[tokio::test]
async fn the_agents_own_names_are_served() {
    let app = App::new();
    for host in [
        "127.0.0.1:9469",
        "127.0.0.1",
        "localhost:9469",
        "LOCALHOST:8080",
        "localhost.",
        "localhost.:9469",
        "[::1]:9469",
    ] {
        let r = app
            .send(App::request_to(Method::GET, "/api/v1/interfaces", host))
            .await;
        assert_eq!(r.status, 200, "Host {host}: {}", r.text);
    }
}

#[tokio::test]
async fn an_origin_must_be_the_agents_exactly() {
    let app = App::new();
    // An interface no host has: a POST that passes the origin check gets 404.
    let post = |origin: &str| {
        App::request(
            Method::POST,
            "/api/v1/diagnose/ndnosuch0?duration=1&probe=false",
        )
        .header(header::ORIGIN, origin)
    };
    for origin in [
        "http://127.0.0.1:9469.evil.example",
        "http://127.0.0.1:9469/",
        "http://127.0.0.1:9469/evil",
        "http://127.0.0.1:abc",
        "http://localhost..:9469",
        "http://user@127.0.0.1:9469",
        "javascript://127.0.0.1",
        "null",
    ] {
        let r = app.send(post(origin)).await;
        r.expect_error(403, "cross_site", None);
    }
    for origin in [
        "http://127.0.0.1:9469",
        "http://localhost:9469",
        "http://localhost.:8080",
        "https://[::1]:9469",
    ] {
        let r = app.send(post(origin)).await;
        r.expect_error(404, "unknown_interface", None);
    }
}

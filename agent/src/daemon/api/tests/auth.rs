//! The bearer token: RFC 9110 credentials (the scheme in any case), and one rule for every
//! method (issue 36: `bearer TOKEN` was refused, and `HEAD /app.js` needed a token that
//! `GET /app.js` did not).

use axum::http::{header, Method};

use super::fixture::{App, TOKEN};

fn with_auth(method: Method, uri: &str, value: &str) -> axum::http::request::Builder {
    App::request(method, uri).header(header::AUTHORIZATION, value)
}

#[tokio::test]
async fn the_bearer_scheme_is_case_insensitive() {
    let app = App::with_token();
    for value in [
        format!("Bearer {TOKEN}"),
        format!("bearer {TOKEN}"),
        format!("BEARER {TOKEN}"),
        format!("Bearer   {TOKEN}"),
        format!("bEaReR {TOKEN} "),
    ] {
        let r = app
            .send(with_auth(Method::GET, "/api/v1/interfaces", &value))
            .await;
        assert_eq!(r.status, 200, "{value:?}: {}", r.text);
    }
    for value in [
        format!("Basic {TOKEN}"),
        format!("Bearer{TOKEN}"),
        format!("Bearer {TOKEN}x"),
        format!("Bearer {}", &TOKEN[1..]),
        format!("Bearer {TOKEN} {TOKEN}"),
        "Bearer ".to_owned(),
        TOKEN.to_owned(),
    ] {
        let r = app
            .send(with_auth(Method::GET, "/api/v1/interfaces", &value))
            .await;
        r.expect_error(401, "unauthorized", None);
        assert!(
            r.headers
                .get(header::WWW_AUTHENTICATE)
                .is_some_and(|v| v.as_bytes().starts_with(b"Bearer")),
            "{value:?}"
        );
    }
}

#[tokio::test]
async fn static_files_follow_one_rule_for_every_method() {
    let app = App::with_token();
    for path in ["/", "/app.js", "/index.html"] {
        for method in [Method::GET, Method::HEAD] {
            let r = app.send(App::request(method.clone(), path)).await;
            assert_eq!(r.status, 200, "{method} {path} without a token: {}", r.text);
        }
    }
    // Data needs the token whatever the method.
    for method in [Method::GET, Method::HEAD] {
        let r = app
            .send(App::request(method.clone(), "/api/v1/interfaces"))
            .await;
        assert_eq!(r.status, 401, "{method} /api/v1/interfaces without a token");
        let r = app
            .send(with_auth(
                method.clone(),
                "/api/v1/interfaces",
                &format!("Bearer {TOKEN}"),
            ))
            .await;
        assert_eq!(r.status, 200, "{method} /api/v1/interfaces with the token");
    }
}

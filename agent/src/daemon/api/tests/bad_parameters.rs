//! Every endpoint's parameter checks, in process: a bad value is a 400 `bad_parameter`
//! naming the parameter (never a 5xx, never a silent default), and each has a healthy twin
//! at its limit that is accepted. The lab's `agent_api::security` sends the same requests
//! to the real binary over TCP.

use axum::http::Method;

use super::fixture::App;

/// `(method, path and query, the parameter the 400 must name)`.
fn bad_requests() -> Vec<(Method, String, &'static str)> {
    let long_value = "a".repeat(300);
    let huge_query = format!("interface={}", "a".repeat(5000));
    let get = |uri: &str, p| (Method::GET, uri.to_owned(), p);
    let post = |uri: &str, p| (Method::POST, uri.to_owned(), p);
    vec![
        get("/api/v1/flows?limit=abc", "limit"),
        get("/api/v1/flows?limit=0", "limit"),
        get("/api/v1/sockets?limit=100000", "limit"),
        get("/api/v1/findings?limit=-1", "limit"),
        get("/api/v1/samples?limit=1.5", "limit"),
        get("/api/v1/findings?offset=-1", "offset"),
        get("/api/v1/samples?offset=1000001", "offset"),
        get("/api/v1/flows?offset=99999999999999999999", "offset"),
        get("/api/v1/findings?since=abc", "since"),
        get("/api/v1/samples?since=abc", "since"),
        get("/api/v1/samples?until=-5", "until"),
        get("/api/v1/findings?until=253402300799001", "until"),
        get("/api/v1/samples?since=2000&until=1000", "since"),
        get("/api/v1/findings?state=bogus", "state"),
        get("/api/v1/findings?state=", "state"),
        get("/api/v1/flows?bogus=1", "bogus"),
        get("/api/v1/interfaces?verbose=1", "verbose"),
        get("/api/v1/drops?limit=10", "limit"),
        get("/api/v1/flows?limit=1&limit=2", "limit"),
        (
            Method::GET,
            format!("/api/v1/findings?interface={long_value}"),
            "interface",
        ),
        (
            Method::GET,
            format!("/api/v1/findings?{huge_query}"),
            "query",
        ),
        (
            Method::GET,
            format!("/api/v1/interfaces?{huge_query}"),
            "query",
        ),
        post("/api/v1/diagnose/lo?duration=100s", "duration"),
        post("/api/v1/diagnose/lo?duration=abc", "duration"),
        post("/api/v1/diagnose/lo?duration=0s", "duration"),
        post("/api/v1/diagnose/lo?duration=0", "duration"),
        post("/api/v1/diagnose/lo?duration=-5", "duration"),
        post("/api/v1/diagnose/lo?duration=61", "duration"),
        post("/api/v1/diagnose/lo?duration=500ms", "duration"),
        post(
            "/api/v1/diagnose/lo?duration=99999999999999999999",
            "duration",
        ),
        post("/api/v1/diagnose/lo?probe=maybe", "probe"),
        post("/api/v1/diagnose/lo?force=1", "force"),
    ]
}

#[tokio::test]
async fn bad_parameters_are_400s_naming_them() {
    let app = App::new();
    let mut failures = Vec::new();
    for (method, uri, parameter) in bad_requests() {
        let r = app.send(App::request(method.clone(), &uri)).await;
        let ok = r.status == 400
            && r.code() == Some("bad_parameter")
            && r.parameter() == Some(parameter);
        if !ok {
            let shown: String = uri.chars().take(80).collect();
            failures.push(format!("{method} {shown}: {} {}", r.status, r.text));
        }
    }
    assert!(
        failures.is_empty(),
        "bad parameters not answered with 400 naming them:\n{}",
        failures.join("\n")
    );
}

#[tokio::test]
async fn parameters_at_their_limits_are_accepted() {
    let app = App::new();
    let at_limit = format!("/api/v1/findings?interface={}", "a".repeat(256));
    for uri in [
        "/api/v1/flows?limit=1000&offset=1000000",
        "/api/v1/sockets?limit=1&offset=0",
        "/api/v1/findings?limit=1000&state=all&since=0&until=253402300799000",
        "/api/v1/findings?state=active",
        "/api/v1/findings?state=resolved",
        "/api/v1/samples?since=1000&until=1000",
        "/api/v1/samples?since=1000&until=2000&limit=5&offset=3",
        "/api/v1/drops",
        "/api/v1/interfaces",
        at_limit.as_str(),
    ] {
        let r = app.get(uri).await;
        assert_eq!(r.status, 200, "{uri}: {}", r.text);
    }
    let r = app.get("/api/v1/flows?limit=1000&offset=1000000").await;
    assert_eq!(
        (&r.json["limit"], &r.json["offset"]),
        (&1000.into(), &1_000_000.into()),
        "{}",
        r.text
    );
}

/// The diagnosis' parameters are checked before the interface is looked up: valid ones on
/// an interface that does not exist are a 404 naming it, not a 400, and no diagnosis runs
/// (so this needs no root).
#[tokio::test]
async fn valid_diagnose_parameters_reach_the_interface_check() {
    let app = App::new();
    for query in [
        "duration=1",
        "duration=60",
        "duration=1s",
        "duration=60s",
        "duration=5&probe=false",
        "probe=true",
        "probe=0",
        "",
    ] {
        let uri = format!("/api/v1/diagnose/ndnosuch0?{query}");
        let r = app.send(App::request(Method::POST, &uri)).await;
        r.expect_error(404, "unknown_interface", None);
        assert!(r.text.contains("ndnosuch0"), "{uri}: {}", r.text);
    }
}

//! Every query parameter decodes to UTF-8 or is a 400 naming it (issue 36: `interface=%FF`
//! gave 200 and an empty list).

use super::fixture::App;

/// Every endpoint that filters by interface.
const FILTERED: &[&str] = &[
    "/api/v1/flows",
    "/api/v1/sockets",
    "/api/v1/findings",
    "/api/v1/samples",
    "/api/v1/drops",
    "/api/v1/events",
];

#[tokio::test]
async fn parameters_that_are_not_utf8_are_refused_by_name() {
    let app = App::new();
    for path in FILTERED {
        for query in ["interface=%FF", "interface=wg%C30", "interface=%ED%A0%80"] {
            let r = app.get(&format!("{path}?{query}")).await;
            r.expect_error(400, "bad_parameter", Some("interface"));
        }
        let r = app.get(&format!("{path}?%FF=1")).await;
        r.expect_error(400, "bad_parameter", None);
        let r = app.get(&format!("{path}?interface=a&interface=b")).await;
        r.expect_error(400, "bad_parameter", Some("interface"));
    }
    let r = app.get("/api/v1/findings?state=%FFall").await;
    r.expect_error(400, "bad_parameter", Some("state"));
    let r = app.get("/api/v1/flows?limit=1%FF").await;
    r.expect_error(400, "bad_parameter", Some("limit"));
    let r = app.get("/api/v1/interfaces/%FF").await;
    r.expect_error(400, "bad_parameter", Some("name"));
}

#[tokio::test]
async fn utf8_parameters_are_decoded() {
    let app = App::new();
    for path in FILTERED {
        // A name no interface has (two bytes of UTF-8, and a space): an empty list.
        let r = app.get(&format!("{path}?interface=wg%C3%BC+0")).await;
        assert_eq!(r.status, 200, "{path}: {}", r.text);
    }
    let r = app.get("/api/v1/flows?limit=%31%30&offset=0").await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json["limit"], 10, "{}", r.text);
    let r = app.get("/api/v1/findings?state=all&").await;
    assert_eq!(r.status, 200, "{}", r.text);
    let r = app.get("/api/v1/interfaces/wg%C3%BC0").await;
    r.expect_error(404, "unknown_interface", None);
}

//! `/api/v1/events`: the configuration timeline from the store, filtered by interface and
//! time, newest first, in bounded pages; bad parameters are 400s naming them.

use super::fixture::App;
use crate::daemon::timeline::{Change, Event};

fn event(ts_ms: i64, iface: &str, old: &str, new: &str) -> Event {
    Event {
        ts_ms,
        kind: "link.mtu".into(),
        interface: iface.into(),
        subject: String::new(),
        change: Change::Changed,
        old: Some(old.into()),
        new: Some(new.into()),
        text: format!("{iface}'s MTU changed {old} → {new}"),
    }
}

fn app_with_events() -> App {
    let app = App::new();
    app.shared
        .store
        .insert_events(&[
            event(1_000, "wg0", "1420", "1500"),
            event(2_000, "eth0", "1500", "9000"),
            event(3_000, "wg0", "1500", "1380"),
        ])
        .expect("insert events");
    app
}

fn times(json: &serde_json::Value) -> Vec<i64> {
    json["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|e| e["ts_ms"].as_i64().expect("ts_ms"))
        .collect()
}

#[tokio::test]
async fn events_are_served_newest_first_with_their_values() {
    let app = app_with_events();
    let r = app.get("/api/v1/events").await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(times(&r.json), [3_000, 2_000, 1_000]);
    assert_eq!(r.json["total"], 3);
    let e = &r.json["items"][2];
    assert_eq!(e["kind"], "link.mtu");
    assert_eq!(e["interface"], "wg0");
    assert_eq!(e["change"], "changed");
    assert_eq!(
        (e["old"].as_str(), e["new"].as_str()),
        (Some("1420"), Some("1500"))
    );
    assert_eq!(e["text"], "wg0's MTU changed 1420 → 1500");
}

#[tokio::test]
async fn events_are_filtered_by_interface_and_time() {
    let app = app_with_events();
    let r = app.get("/api/v1/events?iface=wg0").await;
    assert_eq!(times(&r.json), [3_000, 1_000], "{}", r.text);
    let r = app.get("/api/v1/events?interface=eth0").await;
    assert_eq!(times(&r.json), [2_000], "{}", r.text);
    let r = app.get("/api/v1/events?since=1500&until=3000").await;
    assert_eq!(times(&r.json), [3_000, 2_000], "{}", r.text);
    let r = app.get("/api/v1/events?iface=wg0&until=2999").await;
    assert_eq!(times(&r.json), [1_000], "{}", r.text);
    let r = app.get("/api/v1/events?iface=wg1").await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(times(&r.json), Vec::<i64>::new());
    let r = app.get("/api/v1/events?limit=1&offset=1").await;
    assert_eq!(times(&r.json), [2_000], "{}", r.text);
    assert_eq!(r.json["total"], 3);
}

#[tokio::test]
async fn an_empty_timeline_is_an_empty_page() {
    let app = App::new();
    let r = app.get("/api/v1/events").await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json["total"], 0);
    assert_eq!(r.json["items"], serde_json::json!([]));
}

#[tokio::test]
async fn bad_event_parameters_are_refused_by_name() {
    let app = app_with_events();
    for (query, parameter) in [
        ("since=yesterday", "since"),
        ("until=-5", "until"),
        ("since=3000&until=1000", "since"),
        ("limit=0", "limit"),
        ("limit=1001", "limit"),
        ("offset=-1", "offset"),
        ("iface=wg0&interface=wg0", "iface"),
        ("iface=a&iface=b", "iface"),
        ("iface=%FF", "iface"),
        ("kind=mtu", "kind"),
    ] {
        let r = app.get(&format!("/api/v1/events?{query}")).await;
        r.expect_error(400, "bad_parameter", Some(parameter));
    }
}

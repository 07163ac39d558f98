//! The configuration timeline in the database: kept across a restart, pruned with the
//! rest, added to a history written before it; and the cause a finding cites.

use super::*;
use crate::daemon::timeline::{Change, Event};

fn event(ts_ms: i64, iface: &str) -> Event {
    Event {
        ts_ms,
        kind: "link.mtu".into(),
        interface: iface.into(),
        subject: String::new(),
        change: Change::Changed,
        old: Some("1420".into()),
        new: Some("1500".into()),
        text: format!("{iface}'s MTU changed 1420 → 1500"),
    }
}

fn event_times(s: &Store) -> Vec<i64> {
    s.events(&EventQuery::default())
        .expect("events")
        .items
        .iter()
        .map(|e| e.ts_ms)
        .collect()
}

#[test]
fn events_and_causes_survive_a_restart() {
    let dir = tempdir();
    let path = dir.path().join("history.db");
    {
        let s = Store::open(&path, Retention::default()).expect("open");
        s.insert_events(&[event(1_000, "wg0")]).expect("insert");
        s.record(
            "wg0",
            41_000,
            &[finding("mtu.x", None, Severity::Critical, 1500)],
        )
        .expect("record");
        s.set_cause(
            "mtu.x",
            "wg0",
            None,
            "began 40 s after wg0's MTU changed 1420 → 1500",
        )
        .expect("cause");
    }
    let s = Store::open(&path, Retention::default()).expect("reopen");
    let events = s.events(&EventQuery::default()).expect("events").items;
    assert_eq!(events, [event(1_000, "wg0")]);
    let active = s.active_findings().expect("active");
    assert_eq!(
        active[0].cause.as_deref(),
        Some("began 40 s after wg0's MTU changed 1420 → 1500")
    );
    let json = serde_json::to_value(&active[0]).expect("json");
    assert_eq!(
        json["cause"],
        "began 40 s after wg0's MTU changed 1420 → 1500"
    );
}

#[test]
fn a_finding_without_a_cause_says_nothing_of_one() {
    let s = store();
    s.record("wg0", 1, &[finding("a", None, Severity::Info, 0)])
        .expect("record");
    let f = &s.active_findings().expect("active")[0];
    assert_eq!(f.cause, None);
    let json = serde_json::to_value(f).expect("json");
    assert!(json.get("cause").is_none(), "{json}");
}

#[test]
fn a_history_from_before_the_timeline_is_upgraded_keeping_its_findings() {
    let dir = tempdir();
    let path = dir.path().join("history.db");
    {
        let conn = Connection::open(&path).expect("create");
        conn.execute_batch(super::super::schema::MIGRATIONS[0])
            .expect("version 1");
        conn.pragma_update(None, "user_version", 1)
            .expect("version");
        conn.execute(
            "INSERT INTO findings (id, interface, severity, summary, evidence, fix, \
             opened_ms, last_seen_ms) VALUES ('old', 'wg0', 'info', 's', '{}', 'f', 1, 1)",
            [],
        )
        .expect("a finding");
    }
    private(&path);
    let s = Store::open(&path, Retention::default()).expect("open and migrate");
    assert_eq!(pragma_version(&path), SCHEMA_VERSION);
    let active = s.active_findings().expect("active");
    assert_eq!(
        (active[0].id.as_str(), active[0].cause.as_deref()),
        ("old", None)
    );
    assert!(active[0].unknown.is_empty());
    s.insert_events(&[event(5, "wg0")]).expect("insert");
    assert_eq!(event_times(&s), [5]);
}

fn pragma_version(path: &Path) -> i64 {
    Connection::open(path)
        .expect("open")
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .expect("user_version")
}

#[test]
fn events_are_pruned_by_age_and_by_rows() {
    let day_ms = 24 * 3600 * 1000;
    let now = 30 * day_ms;
    let s = Store::open_in_memory(Retention {
        max_age: Duration::from_secs(7 * 24 * 3600),
        max_rows: 2,
    })
    .expect("store");
    s.insert_events(&[
        event(now - 8 * day_ms, "wg0"),
        event(now - 3, "wg0"),
        event(now - 2, "eth0"),
        event(now - 1, "wg0"),
    ])
    .expect("insert");
    assert_eq!(s.prune_events(now).expect("prune"), 2);
    assert_eq!(event_times(&s), [now - 1, now - 2], "the newest are kept");
    assert_eq!(s.prune_events(now).expect("prune again"), 0);
}

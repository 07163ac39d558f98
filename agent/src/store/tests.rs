//! The store against in-memory and temporary-file databases: findings' lifecycle, queries,
//! samples, retention, and opening files that are not (or not yet) ours.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use rusqlite::Connection;
use serde_json::json;

use super::schema::APPLICATION_ID;
use super::*;
use crate::findings::{Finding, Severity};

fn store() -> Store {
    Store::open_in_memory(Retention::default()).expect("in-memory store")
}

fn finding(id: &str, subject: Option<&str>, severity: Severity, mtu: i64) -> Finding {
    Finding {
        id: id.into(),
        severity,
        summary: format!("{id} with mtu {mtu}"),
        evidence: BTreeMap::from([("tunnel_mtu".to_string(), json!(mtu))]),
        fix: "ip link set dev wg0 mtu 1440".into(),
        reference: None,
        subject: subject.map(Into::into),
    }
}

fn key(id: &str, interface: &str, subject: Option<&str>) -> FindingKey {
    FindingKey {
        id: id.into(),
        interface: interface.into(),
        subject: subject.map(Into::into),
    }
}

fn query(state: StateFilter) -> FindingQuery {
    FindingQuery {
        state,
        ..FindingQuery::default()
    }
}

/// Timestamps of the samples a default query returns (the first page, oldest first).
fn sample_times(s: &Store) -> Vec<i64> {
    s.samples(&SampleQuery::default())
        .expect("samples")
        .items
        .iter()
        .map(|x| x.ts_ms)
        .collect()
}

fn all_findings(s: &Store) -> Vec<StoredFinding> {
    s.findings(&FindingQuery {
        limit: 1000,
        ..query(StateFilter::All)
    })
    .expect("findings")
    .items
}

fn sample(interface: &str, ts_ms: i64) -> Sample {
    Sample {
        ts_ms,
        interface: interface.into(),
        window_s: 10.0,
        rx_bps: 1e6,
        tx_bps: 2e6,
        rx_pps: 100.0,
        tx_pps: 200.0,
        mtu: 1420,
        size_buckets: BTreeMap::from([("<=576".into(), 3), (">9000".into(), 0)]),
        retrans_by_cc: BTreeMap::from([(
            "cubic".into(),
            CcRetrans {
                segments: 100,
                retransmits: 3,
                ratio: 0.03,
            },
        )]),
        tcp_retrans_ratio: 0.03,
        drops_by_reason: BTreeMap::from([("IP_RPFILTER".into(), 4)]),
        overhead_expected: 60,
        overhead_measured: -1,
        path_mtu: -1,
        probe_blackhole: false,
        active_findings: 1,
    }
}

#[test]
fn store_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Store>();
}

#[test]
fn lifecycle_open_refresh_resolve_reopen() {
    let s = store();
    let id = "mtu.tunnel_exceeds_underlay";

    let t = s
        .record("wg0", 1000, &[finding(id, None, Severity::Warning, 1480)])
        .expect("record");
    assert_eq!(t.opened, vec![key(id, "wg0", None)]);
    assert!(t.resolved.is_empty());

    let mut refreshed = finding(id, None, Severity::Critical, 1500);
    refreshed.reference = Some("https://example.invalid/mtu".into());
    let t = s.record("wg0", 2000, &[refreshed]).expect("record");
    assert_eq!(t, Transitions::default(), "a refresh is no transition");

    let active = s.active_findings().expect("active");
    assert_eq!(active.len(), 1);
    let f = &active[0];
    assert_eq!(f.state, FindingState::Active);
    assert_eq!(f.severity, Severity::Critical);
    assert_eq!(f.evidence["tunnel_mtu"], json!(1500));
    assert_eq!(f.summary, format!("{id} with mtu 1500"));
    assert_eq!(f.reference.as_deref(), Some("https://example.invalid/mtu"));
    assert_eq!(
        (f.opened_ms, f.last_seen_ms, f.resolved_ms),
        (1000, 2000, None)
    );
    assert_eq!(f.evaluations, 2);

    let t = s.record("wg0", 3000, &[]).expect("record");
    assert_eq!(t.resolved, vec![key(id, "wg0", None)]);
    assert!(t.opened.is_empty());
    assert!(s.active_findings().expect("active").is_empty());
    let resolved = s.findings(&query(StateFilter::Resolved)).expect("resolved");
    assert_eq!(resolved.total, 1);
    assert_eq!(resolved.items[0].state, FindingState::Resolved);
    assert_eq!(resolved.items[0].resolved_ms, Some(3000));
    assert_eq!(resolved.items[0].last_seen_ms, 2000);

    // Coming back opens a new row; the resolved one stays as history.
    let t = s
        .record("wg0", 4000, &[finding(id, None, Severity::Warning, 1480)])
        .expect("record");
    assert_eq!(t.opened, vec![key(id, "wg0", None)]);
    let rows = all_findings(&s);
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0].state, FindingState::Active);
    assert_eq!((rows[0].opened_ms, rows[0].evaluations), (4000, 1));
    assert_eq!(rows[1].state, FindingState::Resolved);
    assert_eq!((rows[1].opened_ms, rows[1].evaluations), (1000, 2));
}

#[test]
fn subjects_distinguish_findings() {
    let s = store();
    let id = "wireguard.handshake_stale";
    let t = s
        .record(
            "wg0",
            1,
            &[
                finding(id, Some("peerA"), Severity::Critical, 0),
                finding(id, Some("peerB"), Severity::Critical, 0),
                finding(id, None, Severity::Critical, 0),
            ],
        )
        .expect("record");
    assert_eq!(t.opened.len(), 3);

    let t = s
        .record(
            "wg0",
            2,
            &[finding(id, Some("peerB"), Severity::Critical, 0)],
        )
        .expect("record");
    assert!(t.opened.is_empty());
    assert_eq!(
        t.resolved,
        vec![key(id, "wg0", None), key(id, "wg0", Some("peerA"))]
    );
    let active = s.active_findings().expect("active");
    assert_eq!(active.len(), 1);
    assert_eq!(active[0].subject.as_deref(), Some("peerB"));
    assert_eq!(active[0].evaluations, 2);
}

#[test]
fn same_id_on_two_interfaces_is_two_findings() {
    let s = store();
    let f = finding("tcp.high_retransmits", None, Severity::Warning, 0);
    s.record("wg0", 1, std::slice::from_ref(&f))
        .expect("record");
    s.record("wg1", 1, std::slice::from_ref(&f))
        .expect("record");
    let t = s.record("wg0", 2, &[]).expect("record");
    assert_eq!(t.resolved, vec![key("tcp.high_retransmits", "wg0", None)]);
    let active = s.active_findings().expect("active");
    assert_eq!(active.len(), 1);
    assert_eq!(active[0].interface, "wg1");
}

#[test]
fn duplicate_identity_in_one_evaluation_counts_once() {
    let s = store();
    let id = "mss.clamp_missing";
    let t = s
        .record(
            "wg0",
            1,
            &[
                finding(id, None, Severity::Warning, 1),
                finding(id, None, Severity::Critical, 2),
            ],
        )
        .expect("duplicates do not violate the unique index");
    assert_eq!(t.opened.len(), 1);
    let active = s.active_findings().expect("active");
    assert_eq!(active.len(), 1);
    assert_eq!(
        active[0].severity,
        Severity::Warning,
        "the first one counts"
    );
}

#[test]
fn resolve_interface_resolves_only_that_interface() {
    let s = store();
    let fs = [
        finding("a", None, Severity::Warning, 0),
        finding("b", Some("x"), Severity::Critical, 0),
    ];
    s.record("wg0", 1, &fs).expect("record");
    s.record("eth0", 1, &fs).expect("record");
    assert_eq!(s.resolve_interface("wg0", 5).expect("resolve"), 2);
    assert_eq!(s.resolve_interface("wg0", 6).expect("resolve again"), 0);
    let active = s.active_findings().expect("active");
    assert_eq!(active.len(), 2);
    assert!(active.iter().all(|f| f.interface == "eth0"));
    let resolved = s
        .findings(&FindingQuery {
            interface: Some("wg0".into()),
            ..query(StateFilter::Resolved)
        })
        .expect("resolved");
    assert_eq!(resolved.total, 2);
    assert!(resolved.items.iter().all(|f| f.resolved_ms == Some(5)));
}

#[test]
fn queries_by_state_and_interface() {
    let s = store();
    s.record("wg0", 1, &[finding("a", None, Severity::Warning, 0)])
        .expect("record");
    s.record("wg0", 2, &[finding("b", None, Severity::Warning, 0)])
        .expect("record (resolves a)");
    s.record("eth0", 3, &[finding("c", None, Severity::Info, 0)])
        .expect("record");

    let ids = |q: FindingQuery| -> Vec<String> {
        s.findings(&q)
            .expect("findings")
            .items
            .into_iter()
            .map(|f| f.id)
            .collect()
    };
    assert_eq!(ids(query(StateFilter::Active)), ["c", "b"]);
    assert_eq!(
        ids(FindingQuery::default()),
        ["c", "b"],
        "default is active"
    );
    assert_eq!(ids(query(StateFilter::Resolved)), ["a"]);
    assert_eq!(ids(query(StateFilter::All)), ["c", "b", "a"]);
    let wg0 = |state| FindingQuery {
        interface: Some("wg0".into()),
        ..query(state)
    };
    assert_eq!(ids(wg0(StateFilter::All)), ["b", "a"]);
    assert_eq!(ids(wg0(StateFilter::Active)), ["b"]);
    assert!(ids(FindingQuery {
        interface: Some("nope".into()),
        ..query(StateFilter::All)
    })
    .is_empty());
}

#[test]
fn queries_by_time_overlap() {
    let s = store();
    // c: active 50..80; a: active 100..200; b: active since 300.
    s.record("c", 50, &[finding("c", None, Severity::Info, 0)])
        .expect("record");
    s.record("c", 80, &[]).expect("record");
    s.record("a", 100, &[finding("a", None, Severity::Info, 0)])
        .expect("record");
    s.record("a", 200, &[]).expect("record");
    s.record("b", 300, &[finding("b", None, Severity::Info, 0)])
        .expect("record");

    let ids = |since_ms, until_ms| -> Vec<String> {
        let mut ids: Vec<String> = s
            .findings(&FindingQuery {
                since_ms,
                until_ms,
                ..query(StateFilter::All)
            })
            .expect("findings")
            .items
            .into_iter()
            .map(|f| f.id)
            .collect();
        ids.sort();
        ids
    };
    assert_eq!(ids(Some(150), Some(250)), ["a"]);
    assert_eq!(
        ids(Some(200), Some(300)),
        ["a", "b"],
        "bounds are inclusive"
    );
    assert_eq!(ids(Some(201), None), ["b"]);
    assert_eq!(ids(None, Some(90)), ["c"]);
    assert_eq!(ids(Some(81), Some(99)), Vec::<String>::new());
    assert_eq!(ids(Some(10_000), Some(20_000)), ["b"], "still active");
    assert_eq!(ids(None, None), ["a", "b", "c"]);
}

#[test]
fn finding_pages_count_all_matches() {
    let s = store();
    for i in 0..25 {
        s.record(
            "wg0",
            i,
            &[finding(&format!("f{i:02}"), None, Severity::Info, 0)],
        )
        .expect("record");
    }
    // Every record after the first resolved the previous finding: 1 active, 24 resolved.
    let page = |offset| {
        s.findings(&FindingQuery {
            limit: 10,
            offset,
            ..query(StateFilter::All)
        })
        .expect("findings")
    };
    let first = page(0);
    assert_eq!((first.total, first.limit, first.offset), (25, 10, 0));
    assert_eq!(first.items.len(), 10);
    assert_eq!(first.items[0].id, "f24", "the active one first");
    assert_eq!(first.items[1].id, "f23", "then newest opened first");
    let last = page(20);
    assert_eq!(last.total, 25);
    assert_eq!(last.items.len(), 5);
    assert_eq!(last.items[4].id, "f00");
    let beyond = page(30);
    assert_eq!(beyond.total, 25);
    assert!(beyond.items.is_empty());
}

#[test]
fn stored_finding_serializes_to_the_api_shape() {
    let s = store();
    s.record(
        "wg0",
        1,
        &[finding(
            "mtu.tunnel_exceeds_underlay",
            None,
            Severity::Critical,
            1480,
        )],
    )
    .expect("record");
    let page = s.findings(&FindingQuery::default()).expect("findings");
    let v = serde_json::to_value(&page).expect("serialize");
    assert_eq!(
        v,
        json!({
            "total": 1, "limit": 100, "offset": 0,
            "items": [{
                "id": "mtu.tunnel_exceeds_underlay", "interface": "wg0", "subject": null,
                "severity": "critical", "summary": "mtu.tunnel_exceeds_underlay with mtu 1480",
                "evidence": {"tunnel_mtu": 1480}, "fix": "ip link set dev wg0 mtu 1440",
                "reference": null, "state": "active",
                "opened_ms": 1, "last_seen_ms": 1, "resolved_ms": null, "evaluations": 1
            }]
        })
    );
}

#[test]
fn samples_round_trip_json() {
    let s = store();
    let a = sample("wg0", 1000);
    s.insert_sample(&a).expect("insert");
    let page = s.samples(&SampleQuery::default()).expect("samples");
    assert_eq!(page.total, 1);
    assert_eq!(page.items, vec![a.clone()]);
    assert_eq!(
        serde_json::to_value(&page.items[0]).expect("serialize"),
        json!({
            "ts_ms": 1000, "interface": "wg0", "window_s": 10.0,
            "rx_bps": 1e6, "tx_bps": 2e6, "rx_pps": 100.0, "tx_pps": 200.0,
            "mtu": 1420, "size_buckets": {"<=576": 3, ">9000": 0},
            "retrans_by_cc": {"cubic": {"segments": 100, "retransmits": 3, "ratio": 0.03}},
            "tcp_retrans_ratio": 0.03,
            "drops_by_reason": {"IP_RPFILTER": 4},
            "overhead_expected": 60, "overhead_measured": -1,
            "path_mtu": -1, "probe_blackhole": false,
            "active_findings": 1
        })
    );
}

#[test]
fn samples_with_nan_read_back_as_zero() {
    let s = store();
    let mut a = sample("wg0", 1);
    a.tcp_retrans_ratio = f64::NAN;
    if let Some(cc) = a.retrans_by_cc.get_mut("cubic") {
        cc.ratio = f64::INFINITY;
    }
    s.insert_sample(&a).expect("insert");
    let back = s.samples(&SampleQuery::default()).expect("samples");
    assert_eq!(back.items[0].tcp_retrans_ratio, 0.0);
    assert_eq!(back.items[0].retrans_by_cc["cubic"].ratio, 0.0);
}

#[test]
fn sample_missing_fields_take_defaults() {
    let s: Sample =
        serde_json::from_value(json!({"ts_ms": 5, "interface": "wg0"})).expect("deserialize");
    assert_eq!(s.ts_ms, 5);
    assert_eq!((s.overhead_expected, s.path_mtu), (-1, -1));
}

#[test]
fn samples_by_range_interface_and_page() {
    let s = store();
    // Inserted out of order: queries return time order.
    for ts in [50, 10, 40, 20, 30] {
        s.insert_sample(&sample("wg0", ts)).expect("insert");
        s.insert_sample(&sample("eth0", ts + 1)).expect("insert");
    }
    let get = |q: SampleQuery| s.samples(&q).expect("samples");
    let ts = |p: &Page<Sample>| p.items.iter().map(|x| x.ts_ms).collect::<Vec<_>>();

    let wg0 = get(SampleQuery {
        interface: Some("wg0".into()),
        ..SampleQuery::default()
    });
    assert_eq!(ts(&wg0), [10, 20, 30, 40, 50]);
    assert!(wg0.items.iter().all(|x| x.interface == "wg0"));

    let range = get(SampleQuery {
        since_ms: Some(20),
        until_ms: Some(40),
        ..SampleQuery::default()
    });
    assert_eq!(
        ts(&range),
        [20, 21, 30, 31, 40],
        "inclusive bounds, all interfaces"
    );
    assert_eq!(range.total, 5);

    let page = get(SampleQuery {
        limit: 3,
        offset: 6,
        ..SampleQuery::default()
    });
    assert_eq!((page.total, page.limit, page.offset), (10, 3, 6));
    assert_eq!(ts(&page), [40, 41, 50]);
}

#[test]
fn prune_by_age() {
    let day_ms = 24 * 3600 * 1000;
    let s = Store::open_in_memory(Retention {
        max_age: Duration::from_secs(24 * 3600),
        max_rows: 1000,
    })
    .expect("store");
    let now = 10 * day_ms;
    s.insert_sample(&sample("wg0", now - 2 * day_ms))
        .expect("insert");
    s.insert_sample(&sample("wg0", now - day_ms))
        .expect("insert (exactly max_age old)");
    s.insert_sample(&sample("wg0", now - 1000)).expect("insert");
    // An old resolved finding, a recently resolved one, and an old active one.
    s.record(
        "a",
        now - 3 * day_ms,
        &[finding("old", None, Severity::Info, 0)],
    )
    .expect("record");
    s.record("a", now - 2 * day_ms, &[]).expect("resolve old");
    s.record(
        "b",
        now - 3 * day_ms,
        &[finding("recent", None, Severity::Info, 0)],
    )
    .expect("record");
    s.record("b", now - 1000, &[]).expect("resolve recent");
    s.record(
        "c",
        now - 5 * day_ms,
        &[finding("still", None, Severity::Info, 0)],
    )
    .expect("record");

    let pruned = s.prune(now).expect("prune");
    assert_eq!(
        pruned,
        Pruned {
            samples: 1,
            findings: 1
        }
    );
    let ts = sample_times(&s);
    assert_eq!(ts, [now - day_ms, now - 1000]);
    let mut ids: Vec<String> = all_findings(&s).into_iter().map(|f| f.id).collect();
    ids.sort();
    assert_eq!(ids, ["recent", "still"], "active findings are never pruned");
    assert_eq!(s.prune(now).expect("prune again"), Pruned::default());
}

#[test]
fn prune_by_rows() {
    let s = Store::open_in_memory(Retention {
        max_age: Duration::from_secs(3600),
        max_rows: 3,
    })
    .expect("store");
    for ts in [5, 1, 4, 2, 3] {
        s.insert_sample(&sample("wg0", ts)).expect("insert");
    }
    for i in 0..6 {
        s.record(
            "wg0",
            i,
            &[finding(&format!("f{i}"), None, Severity::Info, 0)],
        )
        .expect("record");
    }
    // f0..f4 resolved (at 1..5), f5 active.
    let pruned = s.prune(10).expect("prune");
    assert_eq!(
        pruned,
        Pruned {
            samples: 2,
            findings: 2
        }
    );
    let ts = sample_times(&s);
    assert_eq!(ts, [3, 4, 5], "the newest are kept");
    let ids: Vec<String> = all_findings(&s).into_iter().map(|f| f.id).collect();
    assert_eq!(
        ids,
        ["f5", "f4", "f3", "f2"],
        "the active one plus 3 resolved"
    );
}

#[test]
fn integrity_check_is_ok() {
    assert_eq!(store().integrity_check().expect("check"), "ok");
}

#[test]
fn open_creates_parent_dirs_and_uses_wal() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("a/b/history.db");
    let s = Store::open(&path, Retention::default()).expect("open");
    assert!(path.exists());
    let mode: String = s
        .conn()
        .pragma_query_value(None, "journal_mode", |r| r.get(0))
        .expect("journal_mode");
    assert_eq!(mode, "wal");
    let sync: i64 = s
        .conn()
        .pragma_query_value(None, "synchronous", |r| r.get(0))
        .expect("synchronous");
    assert_eq!(sync, 1, "NORMAL");
    let fk: i64 = s
        .conn()
        .pragma_query_value(None, "foreign_keys", |r| r.get(0))
        .expect("foreign_keys");
    assert_eq!(fk, 1);
    assert_eq!(s.integrity_check().expect("check"), "ok");
}

fn pragma(path: &Path, name: &str) -> i64 {
    Connection::open(path)
        .expect("open")
        .pragma_query_value(None, name, |r| r.get(0))
        .expect("pragma")
}

#[test]
fn reopening_a_file_keeps_data_and_version() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("history.db");
    {
        let s = Store::open(&path, Retention::default()).expect("open");
        s.record("wg0", 1, &[finding("a", Some("p"), Severity::Warning, 0)])
            .expect("record");
        s.insert_sample(&sample("wg0", 1)).expect("insert");
    }
    assert_eq!(pragma(&path, "user_version"), SCHEMA_VERSION);
    assert_eq!(pragma(&path, "application_id"), APPLICATION_ID);

    let s = Store::open(&path, Retention::default()).expect("reopen");
    assert_eq!(pragma(&path, "user_version"), SCHEMA_VERSION);
    let active = s.active_findings().expect("active");
    assert_eq!(active.len(), 1);
    assert_eq!(active[0].subject.as_deref(), Some("p"));
    // The finding is still the same active row: a refresh, not a new opening.
    let t = s
        .record("wg0", 2, &[finding("a", Some("p"), Severity::Warning, 0)])
        .expect("record");
    assert!(t.opened.is_empty());
    assert_eq!(s.active_findings().expect("active")[0].evaluations, 2);
    assert_eq!(
        s.samples(&SampleQuery::default()).expect("samples").total,
        1
    );
}

#[test]
fn a_file_that_is_not_a_database_is_refused_and_untouched() {
    for content in ["hi\n".to_string(), "these are my notes\n".repeat(500)] {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("notes.txt");
        std::fs::write(&path, &content).expect("write");

        let err = Store::open(&path, Retention::default()).expect_err("must refuse");
        assert!(
            matches!(err, StoreError::NotADatabase { .. }),
            "unexpected error: {err:?}"
        );
        let msg = err.to_string();
        assert!(
            msg.contains("notes.txt") && msg.contains("not an SQLite database"),
            "{msg}"
        );
        assert_eq!(std::fs::read_to_string(&path).expect("read"), content);
        assert!(!dir.path().join("notes.txt-wal").exists());
    }
}

#[test]
fn another_applications_database_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("other.db");
    Connection::open(&path)
        .expect("open")
        .execute_batch("CREATE TABLE contacts (name TEXT);")
        .expect("create");
    let err = Store::open(&path, Retention::default()).expect_err("must refuse");
    assert!(
        matches!(err, StoreError::ForeignDatabase { .. }),
        "unexpected error: {err:?}"
    );
    assert_eq!(pragma(&path, "user_version"), 0);
}

#[test]
fn a_newer_schema_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("history.db");
    drop(Store::open(&path, Retention::default()).expect("open"));
    Connection::open(&path)
        .expect("open")
        .pragma_update(None, "user_version", SCHEMA_VERSION + 1)
        .expect("bump user_version");

    let err = Store::open(&path, Retention::default()).expect_err("must refuse");
    match &err {
        StoreError::TooNew {
            found, supported, ..
        } => assert_eq!((*found, *supported), (SCHEMA_VERSION + 1, SCHEMA_VERSION)),
        other => panic!("unexpected error: {other:?}"),
    }
    assert!(err.to_string().contains("newer"), "{err}");
    assert_eq!(pragma(&path, "user_version"), SCHEMA_VERSION + 1);
}

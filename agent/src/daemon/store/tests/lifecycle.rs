//! Findings: opened, refreshed, resolved, reopened; queries and pages.

use super::*;

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
fn why_evidence_is_unknown_is_kept_and_follows_the_last_evaluation() {
    let dir = tempdir();
    let path = dir.path().join("history.db");
    let mut f = finding("mtu.x", None, Severity::Warning, -1);
    f.unknown = BTreeMap::from([(
        "tunnel_mtu".to_string(),
        "not measured: its BPF program is unavailable".to_string(),
    )]);
    {
        let s = Store::open(&path, Retention::default()).expect("open");
        s.record("wg0", 1, std::slice::from_ref(&f))
            .expect("record");
    }
    // Across a reopen, in the stored finding and its JSON.
    let s = Store::open(&path, Retention::default()).expect("reopen");
    let stored = &s.active_findings().expect("active")[0];
    assert_eq!(stored.unknown, f.unknown);
    let json = serde_json::to_value(stored).expect("json");
    assert_eq!(
        json["unknown"]["tunnel_mtu"],
        "not measured: its BPF program is unavailable"
    );
    // The next evaluation knows the value: the reason goes with it.
    let known = finding("mtu.x", None, Severity::Warning, 1420);
    s.record("wg0", 2, &[known]).expect("refresh");
    let stored = &s.active_findings().expect("active")[0];
    assert!(stored.unknown.is_empty(), "{:?}", stored.unknown);
    let json = serde_json::to_value(stored).expect("json");
    assert!(json.get("unknown").is_none(), "{json}");
}

//! Samples and pruning.

use super::*;

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
fn wireguard_peer_paths_are_kept_with_the_sample() {
    let s = store();
    let mut a = sample("wg0", 1000);
    a.wireguard_peers = vec![PeerPathSample {
        peer: "AbC=".into(),
        endpoint: "192.0.2.2:51820".into(),
        expected: 10_000,
        lost: 480,
        loss_percent: 4.8,
        rtt_ms: 48.5,
    }];
    s.insert_sample(&a).expect("insert");
    let page = s.samples(&SampleQuery::default()).expect("samples");
    assert_eq!(page.items, vec![a.clone()]);
    assert_eq!(
        serde_json::to_value(&page.items[0]).expect("serialize")["wireguard_peers"],
        json!([{"peer": "AbC=", "endpoint": "192.0.2.2:51820", "expected": 10000,
                "lost": 480, "loss_percent": 4.8, "rtt_ms": 48.5}])
    );
    // Rows written before the field existed read back without peers.
    let old: Sample =
        serde_json::from_value(json!({"ts_ms": 5, "interface": "wg0"})).expect("deserialize");
    assert!(old.wireguard_peers.is_empty());
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

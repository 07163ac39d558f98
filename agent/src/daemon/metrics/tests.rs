//! The exposition against a crafted view.

use super::*;
use crate::daemon::config::{Config, Overrides};
use crate::daemon::store::{Retention, Store};
use crate::kernel::packet::flow_table::FlowTableUse;

#[test]
fn flow_table_series_follow_the_view() {
    let config = Config::resolve(&Overrides::default()).expect("default configuration");
    let store = Store::open_in_memory(Retention::default()).expect("store");
    let shared = Arc::new(Shared::new(config, Arc::new(store)).expect("shared state"));
    let metrics = Metrics::new(shared.clone()).expect("metrics");
    // Before the first evaluation there is no table to describe.
    let text = metrics.render().expect("render");
    assert!(
        !text.contains("netdoctor_flow_table_evictions_total "),
        "{text}"
    );

    shared.view_mut().health.flow_table = FlowTableUse {
        capacity: 1024,
        entries: 1024,
        evictions: 37,
    };
    let text = metrics.render().expect("render");
    assert!(
        text.contains("netdoctor_flow_table_capacity 1024"),
        "{text}"
    );
    assert!(
        text.contains("netdoctor_flow_table_evictions_total 37"),
        "{text}"
    );
}

#[test]
fn docs_api_md_lists_every_metric() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/api.md");
    let docs = std::fs::read_to_string(&path).expect("docs/api.md");
    let names = FAMILIES
        .iter()
        .map(|f| f.0)
        .chain(["netdoctor_evaluation_duration_seconds"]);
    for name in names {
        assert!(
            docs.contains(&format!("| `{name}` |")),
            "{name} is not in the metrics table of docs/api.md"
        );
    }
}

#[test]
fn connections_and_bytes_by_limit_per_interface() {
    let config = Config::resolve(&Overrides::default()).expect("default configuration");
    let store = Store::open_in_memory(Retention::default()).expect("store");
    let shared = Arc::new(Shared::new(config, Arc::new(store)).expect("shared state"));
    let metrics = Metrics::new(shared.clone()).expect("metrics");
    shared.view_mut().limits.insert(
        ("wg0".to_owned(), "receiver_window"),
        crate::daemon::state::LimitTotals {
            connections: 4,
            bytes: 26_214_400,
        },
    );
    let text = metrics.render().expect("render");
    assert!(
        text.contains(r#"netdoctor_tcp_connections{interface="wg0",limit="receiver_window"} 4"#),
        "{text}"
    );
    assert!(
        text.contains(
            r#"netdoctor_tcp_limited_bytes_total{interface="wg0",limit="receiver_window"} 26214400"#
        ),
        "{text}"
    );
    assert!(text.contains("# TYPE netdoctor_tcp_limited_bytes_total counter"));
}

/// A measured peer: `expected` messages, `lost` of them lost, its handshake `rtt_ms`.
fn peer(name: &str, expected: i64, lost: i64, rtt_ms: f64) -> crate::facts::PeerFacts {
    crate::facts::PeerFacts {
        name: name.into(),
        underlay_expected: expected,
        underlay_received: expected - lost,
        underlay_lost: lost,
        underlay_loss_percent: if expected > 0 {
            lost as f64 * 100.0 / expected as f64
        } else {
            -1.0
        },
        rtt_ms,
        ..Default::default()
    }
}

#[test]
fn peer_paths_are_bounded_by_the_peer_cap_keeping_the_lossiest() {
    let config = Config::resolve(&Overrides {
        max_path_peers: Some(2),
        ..Overrides::default()
    })
    .expect("configuration");
    let store = Store::open_in_memory(Retention::default()).expect("store");
    let shared = Arc::new(Shared::new(config, Arc::new(store)).expect("shared state"));
    let metrics = Metrics::new(shared.clone()).expect("metrics");
    let mut facts = crate::facts::Facts::default();
    facts.tunnel.kind = "wireguard".into();
    facts.peers = vec![
        peer("clean=", 10_000, 0, 0.4),
        peer("lossy=", 10_000, 480, 50.0),
        peer("quiet=", 0, 0, -1.0),
        // Not measured (no underlay watched): no path series at all.
        peer("unknown=", -1, 0, -1.0),
    ];
    shared.view_mut().interfaces.insert(
        "wg0".into(),
        crate::daemon::state::IfaceView {
            name: "wg0".into(),
            index: 5,
            kind: "wireguard".into(),
            mtu: 1420,
            up: true,
            watched: true,
            hooks: None,
            counters: Default::default(),
            rates: Default::default(),
            facts: Some(facts),
            worst_severity: None,
            updated_ms: 0,
        },
    );
    let text = metrics.render().expect("render");
    let has = |line: &str| text.lines().any(|l| l == line);
    for line in [
        r#"netdoctor_wireguard_peer_underlay_loss_ratio{interface="wg0",peer="lossy="} 0.048"#,
        r#"netdoctor_wireguard_peer_underlay_messages{interface="wg0",peer="lossy="} 10000"#,
        r#"netdoctor_wireguard_peer_handshake_rtt_seconds{interface="wg0",peer="lossy="} 0.05"#,
        r#"netdoctor_wireguard_peer_underlay_loss_ratio{interface="wg0",peer="clean="} 0"#,
        r#"netdoctor_wireguard_path_peers_omitted{interface="wg0"} 1"#,
    ] {
        assert!(has(line), "{line} missing in:\n{text}");
    }
    // Past the cap of 2: the peer that sent nothing lost nothing and goes; the unmeasured
    // one never had series.
    for peer in ["quiet=", "unknown="] {
        assert!(
            !text.contains(&format!("peer=\"{peer}\"")),
            "{peer}:\n{text}"
        );
    }

    // The default cap keeps all three measured peers.
    let config = Config::resolve(&Overrides::default()).expect("default configuration");
    assert_eq!(config.max_path_peers, 256);
}

#[test]
fn configuration_changes_are_counted_by_kind_from_zero() {
    let config = Config::resolve(&Overrides::default()).expect("default configuration");
    let store = Store::open_in_memory(Retention::default()).expect("store");
    let shared = Arc::new(Shared::new(config, Arc::new(store)).expect("shared state"));
    let metrics = Metrics::new(shared.clone()).expect("metrics");
    let text = metrics.render().expect("render");
    assert!(
        text.contains("netdoctor_config_changes_total{kind=\"link.mtu\"} 0"),
        "{text}"
    );
    shared.count_change("link.mtu");
    shared.count_change("link.mtu");
    shared.count_change("sysctl");
    shared.count_change("not-a-kind");
    let text = metrics.render().expect("render");
    for line in [
        "netdoctor_config_changes_total{kind=\"link.mtu\"} 2",
        "netdoctor_config_changes_total{kind=\"sysctl\"} 1",
        "netdoctor_config_changes_total{kind=\"route\"} 0",
    ] {
        assert!(text.contains(line), "{line} missing from {text}");
    }
    assert!(!text.contains("not-a-kind"), "{text}");
}

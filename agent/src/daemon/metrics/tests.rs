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

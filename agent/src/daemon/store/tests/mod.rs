//! The store against in-memory and temporary-file databases: findings' lifecycle, queries,
//! samples, retention, and opening files that are not (or not yet) ours.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use rusqlite::Connection;
use serde_json::json;

use super::schema::APPLICATION_ID;
use super::*;

mod events;
mod files;
mod health;
mod lifecycle;
mod samples;
mod trust;
use crate::rules::finding::{Finding, Severity};

/// A temporary directory of this user's, mode 0700 whatever the umask (a test here sets
/// the process's umask to 0 for a moment, and a directory others can write is refused).
pub(super) fn tempdir() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700))
        .expect("chmod 0700");
    dir
}

/// Makes a file the test created mode 0600: created while that umask is 0 it would be
/// 0666, and a database others can write is refused.
pub(super) fn private(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).expect("chmod 0600");
}

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
        unknown: Default::default(),
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
        wireguard_peers: Vec::new(),
    }
}

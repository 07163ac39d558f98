//! Samples: one time-series point per interface and observation window, for charts.
//!
//! A sample is stored as its JSON (`body`), with `ts_ms` and `interface` also in their own
//! indexed columns, which are authoritative when reading back. Fields added later take
//! their [`Default`] when older rows lack them. JSON has no NaN or infinity: serde_json
//! writes them as `null`, which reads back as 0.

use std::collections::BTreeMap;

use rusqlite::params;
use serde::{Deserialize, Deserializer, Serialize};

use super::query::PageSpec;
use super::{Page, Store, StoreError};

/// TCP retransmissions of one congestion control module in one window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct CcRetrans {
    /// Data segments sent.
    pub segments: u64,
    /// Of which retransmitted.
    pub retransmits: u64,
    /// `retransmits / segments` (0 without segments).
    #[serde(deserialize_with = "null_as_zero")]
    pub ratio: f64,
}

/// A WireGuard peer's path in one window, as the underlay measured it (the peer's facts
/// `underlay_*` and `rtt_ms`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PeerPathSample {
    /// The peer's public key.
    pub peer: String,
    /// Its endpoint ("" if none).
    pub endpoint: String,
    /// Messages it sent this host (its counters' advance).
    pub expected: i64,
    /// Of those, lost on the way.
    pub lost: i64,
    /// lost / expected in percent; -1 when nothing was expected.
    #[serde(deserialize_with = "null_as_zero")]
    pub loss_percent: f64,
    /// Round trip of the latest handshake timed, ms; -1 if none.
    #[serde(deserialize_with = "null_as_zero")]
    pub rtt_ms: f64,
}

/// One interface over one observation window (`Sample` in docs/api.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Sample {
    /// End of the window (ms since the epoch).
    pub ts_ms: i64,
    /// The interface.
    pub interface: String,
    /// Length of the window in seconds.
    #[serde(deserialize_with = "null_as_zero")]
    pub window_s: f64,
    /// Received bits per second.
    #[serde(deserialize_with = "null_as_zero")]
    pub rx_bps: f64,
    /// Transmitted bits per second.
    #[serde(deserialize_with = "null_as_zero")]
    pub tx_bps: f64,
    /// Received packets per second.
    #[serde(deserialize_with = "null_as_zero")]
    pub rx_pps: f64,
    /// Transmitted packets per second.
    #[serde(deserialize_with = "null_as_zero")]
    pub tx_pps: f64,
    /// The interface's MTU.
    pub mtu: i64,
    /// Segments by size bucket (`"<=576"`, ..., `">9000"`).
    pub size_buckets: BTreeMap<String, u64>,
    /// TCP retransmissions by congestion control module.
    pub retrans_by_cc: BTreeMap<String, CcRetrans>,
    /// Share of TCP segments retransmitted on the interface.
    #[serde(deserialize_with = "null_as_zero")]
    pub tcp_retrans_ratio: f64,
    /// Kernel drops by reason in the window.
    pub drops_by_reason: BTreeMap<String, u64>,
    /// Expected encapsulation overhead in bytes; -1 if unknown or not a tunnel.
    pub overhead_expected: i64,
    /// Measured encapsulation overhead in bytes; -1 if not measured.
    pub overhead_measured: i64,
    /// Last probed path MTU; -1 if never probed.
    pub path_mtu: i64,
    /// Whether the last probe found a PMTU blackhole.
    pub probe_blackhole: bool,
    /// Active findings on the interface after the window's evaluation.
    pub active_findings: u64,
    /// WireGuard peers whose path was measured, the lossiest first (at most
    /// `--max-path-peers`); left out when none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub wireguard_peers: Vec<PeerPathSample>,
}

impl Default for Sample {
    /// Zero traffic, unknown overheads and path MTU (-1).
    fn default() -> Self {
        Sample {
            ts_ms: 0,
            interface: String::new(),
            window_s: 0.0,
            rx_bps: 0.0,
            tx_bps: 0.0,
            rx_pps: 0.0,
            tx_pps: 0.0,
            mtu: 0,
            size_buckets: BTreeMap::new(),
            retrans_by_cc: BTreeMap::new(),
            tcp_retrans_ratio: 0.0,
            drops_by_reason: BTreeMap::new(),
            overhead_expected: -1,
            overhead_measured: -1,
            path_mtu: -1,
            probe_blackhole: false,
            active_findings: 0,
            wireguard_peers: Vec::new(),
        }
    }
}

/// A query for [`Store::samples`]: oldest first.
pub type SampleQuery = super::query::RangeQuery;

impl Store {
    /// Stores one sample.
    pub fn insert_sample(&self, s: &Sample) -> Result<(), StoreError> {
        let body = serde_json::to_string(s).map_err(|source| StoreError::Json {
            what: "sample",
            source,
        })?;
        self.tracked("recording a sample", |conn| {
            conn.execute(
                "INSERT INTO samples (ts_ms, interface, body) VALUES (?1, ?2, ?3)",
                params![s.ts_ms, s.interface, body],
            )?;
            Ok(())
        })
    }

    /// Samples matching `q`, oldest first (charts want time order); samples with the
    /// same `ts_ms` in insertion order.
    pub fn samples(&self, q: &SampleQuery) -> Result<Page<Sample>, StoreError> {
        let filter = q.filter();
        let spec = PageSpec {
            table: "samples",
            columns: "ts_ms, interface, body",
            order: "ts_ms, row_id",
            filter: &filter,
            limit: q.limit,
            offset: q.offset,
        };
        let (total, rows) = spec.fetch(&mut self.conn(), |row| {
            Ok((
                row.get::<_, i64>(0)?,
                row.get::<_, String>(1)?,
                row.get::<_, String>(2)?,
            ))
        })?;
        let items = rows
            .into_iter()
            .map(|(ts_ms, interface, body)| {
                let mut s: Sample =
                    serde_json::from_str(&body).map_err(|source| StoreError::Json {
                        what: "sample",
                        source,
                    })?;
                s.ts_ms = ts_ms;
                s.interface = interface;
                Ok(s)
            })
            .collect::<Result<_, StoreError>>()?;
        Ok(Page {
            total,
            limit: q.limit,
            offset: q.offset,
            items,
        })
    }
}

/// Reads a number that may be `null` (a NaN or infinity when written) as 0.
fn null_as_zero<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(0.0))
}

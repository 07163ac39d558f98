//! What the agent knows right now, shared between the monitor (the only writer) and the
//! HTTP API and metrics (readers). The monitor replaces parts of it after each
//! evaluation; readers take a read lock just long enough to copy what they answer.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use serde::Serialize;

use super::config::Config;
use crate::daemon::store::{Store, StoredFinding};
use crate::facts::Facts;
use crate::kernel::packet::counters::IfaceCounters;
use crate::kernel::packet::flows::Flow;
use crate::kernel::packet::Hooks;
use crate::kernel::sockets::rates::SocketRow;
use crate::rules::finding::Severity;

/// Traffic rates over the last window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Rates {
    /// Received bits per second.
    pub rx_bps: f64,
    /// Sent bits per second.
    pub tx_bps: f64,
    /// Received wire segments per second.
    pub rx_pps: f64,
    /// Sent wire segments per second.
    pub tx_pps: f64,
}

/// One interface as the API shows it.
#[derive(Debug, Clone, Serialize)]
pub struct IfaceView {
    /// Name.
    pub name: String,
    /// Index.
    pub index: u32,
    /// Kind (wireguard, veth, physical, ...).
    pub kind: String,
    /// MTU.
    pub mtu: u32,
    /// Administratively up.
    pub up: bool,
    /// Programs attached and findings evaluated.
    pub watched: bool,
    /// Hooks in use, when attached (also for underlays attached to measure a tunnel).
    pub hooks: Option<Hooks>,
    /// Counters since the interface was attached.
    pub counters: IfaceCounters,
    /// Rates over the last window.
    pub rates: Rates,
    /// The facts of the last window (null before the first, or when not watched).
    pub facts: Option<Facts>,
    /// Worst active finding.
    pub worst_severity: Option<Severity>,
    /// When this entry was last refreshed.
    pub updated_ms: i64,
}

/// A packet flow with its interface's name.
#[derive(Debug, Clone, Serialize)]
pub struct FlowView {
    /// Interface name.
    pub interface: String,
    /// The flow.
    #[serde(flatten)]
    pub flow: Flow,
}

/// A local TCP connection of the last window with its interface's name.
#[derive(Debug, Clone, Serialize)]
pub struct SocketView {
    /// Egress interface name ("" if unknown).
    pub interface: String,
    /// The connection.
    #[serde(flatten)]
    pub row: SocketRow,
}

/// Kernel drops of one (interface, reason).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DropView {
    /// Interface name ("" for drops on no device).
    pub interface: String,
    /// Reason, e.g. IP_RPFILTER.
    pub reason: String,
    /// Since the agent started.
    pub packets_total: u64,
    /// In the last window.
    pub packets_last_window: u64,
}

/// TCP totals of one (interface, congestion control) since the agent started.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TcpTotals {
    /// Data segments sent.
    pub segments: u64,
    /// Segments retransmitted.
    pub retransmits: u64,
    /// Retransmitted share in the last window.
    pub last_ratio: f64,
}

/// Local TCP connections of one (interface, limit).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LimitTotals {
    /// Connections with that limit in the last window.
    pub connections: u64,
    /// Bytes they had acknowledged, summed over every window since the agent started.
    pub bytes: u64,
}

/// Upper bounds (seconds) of the smoothed-RTT histogram: LAN, metro, continental,
/// intercontinental, and broken.
pub const SRTT_BUCKETS: [f64; 10] = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5];

/// A cumulative histogram.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Histogram {
    /// Non-cumulative counts per bucket of [`SRTT_BUCKETS`], then +Inf.
    pub counts: Vec<u64>,
    /// Sum of observations.
    pub sum: f64,
}

impl Histogram {
    /// Adds one observation.
    pub fn observe(&mut self, v: f64) {
        if self.counts.is_empty() {
            self.counts = vec![0; SRTT_BUCKETS.len() + 1];
        }
        let i = SRTT_BUCKETS
            .iter()
            .position(|b| v <= *b)
            .unwrap_or(SRTT_BUCKETS.len());
        self.counts[i] += 1;
        self.sum += v;
    }
}

/// The agent's own health.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Health {
    /// Programs attached (two or three per interface).
    pub programs_attached: u64,
    /// Entries / capacity per map.
    pub map_fill: BTreeMap<String, f64>,
    /// The flow table's size, entries and evictions since load.
    pub flow_table: crate::kernel::packet::flow_table::FlowTableUse,
    /// Whether the kernel's BPF statistics are on (`kernel.bpf_stats_enabled`; `None`:
    /// unreadable).
    pub bpf_stats_enabled: Option<bool>,
    /// Per loaded program: (run count, run time ns); empty unless the statistics are on.
    pub program_stats: BTreeMap<String, (u64, u64)>,
    /// Per loaded program: runs the kernel skipped (already running on that CPU), always
    /// read.
    pub program_misses: BTreeMap<String, u64>,
    /// Every BPF program netdoctor has, and whether it loaded on this kernel.
    pub programs_loaded: BTreeMap<String, bool>,
    /// End of the last evaluation, ms since the epoch.
    pub last_evaluation_ms: i64,
    /// Signals unavailable on this kernel, said once at start.
    pub notes: Vec<String>,
}

/// Everything the API and the metrics read.
#[derive(Debug, Default)]
pub struct View {
    /// Every interface of the namespace, by name.
    pub interfaces: BTreeMap<String, IfaceView>,
    /// The flows with packets in the last window, counted over it (the data plane's
    /// windows): the monitor's window itself, shared, not a copy.
    pub flows: Arc<Vec<Flow>>,
    /// Names of the interfaces watched at that reading, by index. Flows of others (a
    /// deleted interface's wait in the LRU table until evicted) are not served.
    pub flow_interfaces: HashMap<u32, String>,
    /// Local TCP connections of the last window.
    pub sockets: Vec<SocketView>,
    /// Drops by interface and reason.
    pub drops: Vec<DropView>,
    /// TCP totals by (interface, congestion control).
    pub tcp: BTreeMap<(String, String), TcpTotals>,
    /// Smoothed RTT of connections, observed once per window each, by interface.
    pub srtt: BTreeMap<String, Histogram>,
    /// Connections and bytes by (interface, what limited them).
    pub limits: BTreeMap<(String, &'static str), LimitTotals>,
    /// Active findings (all interfaces).
    pub active: Vec<StoredFinding>,
    /// WireGuard handshake ages by interface: (peer public key, age in seconds; -1 never).
    pub handshakes: BTreeMap<String, Vec<(String, i64)>>,
    /// The agent's health.
    pub health: Health,
}

/// State shared by the monitor, the API and the metrics.
#[derive(Debug)]
pub struct Shared {
    /// The resolved configuration.
    pub config: Config,
    /// The history.
    pub store: Arc<Store>,
    /// Set once the first evaluation has finished.
    pub ready: AtomicBool,
    /// Times the agent failed to attach to an interface.
    pub attach_failures: std::sync::atomic::AtomicU64,
    /// Durations of evaluations.
    pub evaluation_seconds: prometheus::Histogram,
    /// When the agent started.
    pub started: std::time::Instant,
    /// Configuration changes seen since start, by kind (every kind, from 0).
    pub config_changes: std::sync::Mutex<BTreeMap<&'static str, u64>>,
    view: RwLock<View>,
}

impl Shared {
    /// New shared state with an empty view.
    pub fn new(config: Config, store: Arc<Store>) -> anyhow::Result<Self> {
        Ok(Shared {
            config,
            store,
            ready: AtomicBool::new(false),
            attach_failures: std::sync::atomic::AtomicU64::new(0),
            evaluation_seconds: prometheus::Histogram::with_opts(
                prometheus::HistogramOpts::new(
                    "netdoctor_evaluation_duration_seconds",
                    "Time one evaluation of every watched interface took.",
                )
                .buckets(vec![
                    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                ]),
            )?,
            started: std::time::Instant::now(),
            config_changes: std::sync::Mutex::new(
                crate::daemon::timeline::Kind::ALL
                    .iter()
                    .map(|k| (k.as_str(), 0))
                    .collect(),
            ),
            view: RwLock::new(View::default()),
        })
    }

    /// Counts one configuration change of `kind` (`netdoctor_config_changes_total`).
    pub fn count_change(&self, kind: &str) {
        let mut counts = self
            .config_changes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(n) = counts.iter_mut().find(|(k, _)| **k == kind).map(|(_, n)| n) {
            *n += 1;
        }
    }

    /// Reads the view (a panicking writer leaves it readable: every write replaces whole
    /// fields).
    pub fn view(&self) -> RwLockReadGuard<'_, View> {
        self.view
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Changes the view.
    pub fn view_mut(&self) -> RwLockWriteGuard<'_, View> {
        self.view
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

//! Prometheus metrics, built at scrape time from what the monitor published (the pattern of
//! ebpf_exporter: kernel counters are exposed as they are, never copied into a second set
//! of counters that could drift). Every family is declared once in [`FAMILIES`]; labels are
//! bounded by design (interfaces, directions, congestion control modules, drop reasons,
//! connection limits, finding ids), never per flow, address or port.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use prometheus::core::{Collector, Desc};
use prometheus::proto::{self, LabelPair, Metric, MetricFamily, MetricType};
use prometheus::{Encoder, Registry, TextEncoder};

use crate::daemon::state::{Shared, View, SRTT_BUCKETS};
use crate::kernel::packet::counters::{DirCounters, SIZE_BUCKET_BOUNDS};

use MetricType::{COUNTER, GAUGE, HISTOGRAM};

/// One metric family: name, help, type, label names.
type Family = (
    &'static str,
    &'static str,
    MetricType,
    &'static [&'static str],
);

/// Every family the view produces.
pub const FAMILIES: &[Family] = &[
    ("netdoctor_interface_info", "Interfaces the agent watches (always 1), with their kind.", GAUGE, &["interface", "kind"]),
    ("netdoctor_interface_mtu_bytes", "Interface MTU.", GAUGE, &["interface"]),
    ("netdoctor_interface_packets_total", "Frames or skbs seen by the hooks (a GSO super-packet counts once).", COUNTER, &["interface", "direction"]),
    ("netdoctor_interface_segments_total", "Wire segments seen by the hooks (GSO-aware).", COUNTER, &["interface", "direction"]),
    ("netdoctor_interface_bytes_total", "Bytes seen by the hooks, L2 header included.", COUNTER, &["interface", "direction"]),
    ("netdoctor_interface_segment_size_total", "Segments by IP size bucket (le_bytes: upper bound, +Inf for larger).", COUNTER, &["interface", "direction", "le_bytes"]),
    ("netdoctor_interface_fragments_total", "IP fragments, first and later.", COUNTER, &["interface", "direction"]),
    ("netdoctor_interface_df_over_mtu_total", "DF-marked (or IPv6) segments larger than the interface MTU.", COUNTER, &["interface", "direction"]),
    ("netdoctor_interface_local_tcp_segments_total", "Of the segments, those of local TCP connections counted on the local path (no flow record; their sockets describe them).", COUNTER, &["interface", "direction"]),
    ("netdoctor_interface_local_tcp_retransmits_total", "Received local-path segments carrying data seen before (retransmitted or reordered); 0 on egress, where sockets count their retransmissions.", COUNTER, &["interface", "direction"]),
    ("netdoctor_interface_icmp_too_big_total", "ICMP fragmentation-needed and ICMPv6 packet-too-big messages received.", COUNTER, &["interface"]),
    ("netdoctor_tunnel_overhead_bytes", "Encapsulation overhead per packet: expected from the table, measured at full size.", GAUGE, &["interface", "source"]),
    ("netdoctor_tunnel_overhead_ratio", "Encapsulation overhead as a share of the underlay MTU.", GAUGE, &["interface", "source"]),
    ("netdoctor_tunnel_underlay_mtu_bytes", "MTU of the route toward the tunnel's endpoints.", GAUGE, &["interface"]),
    ("netdoctor_tunnel_max_mtu_bytes", "Largest tunnel MTU that fits the underlay.", GAUGE, &["interface"]),
    ("netdoctor_path_mtu_bytes", "Path MTU toward the tunnel's endpoints, from the last probe.", GAUGE, &["interface"]),
    ("netdoctor_path_mtu_blackhole", "1 if the last probe saw large packets vanish without ICMP too-big.", GAUGE, &["interface"]),
    ("netdoctor_tcp_data_segments_total", "Data segments sent by local TCP connections.", COUNTER, &["interface", "cc"]),
    ("netdoctor_tcp_retransmits_total", "Segments retransmitted by local TCP connections.", COUNTER, &["interface", "cc"]),
    ("netdoctor_tcp_retransmit_ratio", "Retransmitted share of data segments in the last window.", GAUGE, &["interface", "cc"]),
    ("netdoctor_tcp_forwarded_retransmit_ratio", "Share of the TCP segments crossing the interface that carried data sent before, last window: forwarded and received ones seen in packets, those local connections sent as their sockets counted them.", GAUGE, &["interface"]),
    ("netdoctor_tcp_connections", "Local TCP connections of the last window by what limited them most of it: receiver_window, send_buffer, congestion, application, unknown (too little traffic).", GAUGE, &["interface", "limit"]),
    ("netdoctor_tcp_limited_bytes_total", "Bytes local TCP connections had acknowledged, by what limited them in the window that carried them.", COUNTER, &["interface", "limit"]),
    ("netdoctor_tcp_srtt_seconds", "Smoothed RTT of local TCP connections, one observation per connection and window.", HISTOGRAM, &["interface"]),
    ("netdoctor_drops_total", "Packets the kernel dropped, by reason (skb_drop_reason).", COUNTER, &["interface", "reason"]),
    ("netdoctor_wireguard_peers", "WireGuard peers configured.", GAUGE, &["interface"]),
    ("netdoctor_wireguard_handshake_age_seconds", "Seconds since the peer's last handshake (only while peers are few).", GAUGE, &["interface", "peer"]),
    ("netdoctor_wireguard_handshake_age_max_seconds", "Oldest handshake among the interface's peers; peers never handshaken count from the agent's start.", GAUGE, &["interface"]),
    ("netdoctor_wireguard_peer_underlay_loss_ratio", "Share of what a WireGuard peer sent this host that the underlay lost (counters never seen; late messages are not lost), last window; measured where it arrives.", GAUGE, &["interface", "peer"]),
    ("netdoctor_wireguard_peer_underlay_messages", "WireGuard messages a peer sent this host in the last window (the advance of its counters).", GAUGE, &["interface", "peer"]),
    ("netdoctor_wireguard_peer_handshake_rtt_seconds", "Round trip of the latest handshake with the peer, timed on the underlay.", GAUGE, &["interface", "peer"]),
    ("netdoctor_wireguard_path_peers_omitted", "Peers whose path was measured but got no per-peer series (beyond --max-path-peers; the lossiest keep theirs).", GAUGE, &["interface"]),
    ("netdoctor_finding_active", "Active findings (always 1).", GAUGE, &["id", "severity", "interface"]),
    ("netdoctor_build_info", "netdoctor version (always 1).", GAUGE, &["version"]),
    ("netdoctor_bpf_programs_attached", "BPF programs attached to interfaces.", GAUGE, &[]),
    ("netdoctor_bpf_program_loaded", "Whether the BPF program loaded on this kernel (1) or its signal is missing (0).", GAUGE, &["program"]),
    ("netdoctor_attach_failures_total", "Attempts to attach to an interface that failed.", COUNTER, &[]),
    ("netdoctor_config_changes_total", "Configuration changes the timeline recorded since start, by kind (link.mtu, route, sysctl, ...; /api/v1/events).", COUNTER, &["kind"]),
    ("netdoctor_bpf_map_fill_ratio", "Entries in a BPF map over its capacity.", GAUGE, &["map"]),
    ("netdoctor_flow_table_capacity", "Flows the flow table holds (--max-flows).", GAUGE, &[]),
    ("netdoctor_flow_table_evictions_total", "Flows the full flow table evicted (their figures restarted from zero).", COUNTER, &[]),
    ("netdoctor_bpf_stats_enabled", "Whether the kernel's BPF statistics are on (kernel.bpf_stats_enabled): the programs' run figures are exported only while they are.", GAUGE, &[]),
    ("netdoctor_bpf_run_time_seconds_total", "Time the kernel spent in the program since it loaded, while its BPF statistics were on (exported only while kernel.bpf_stats_enabled=1).", COUNTER, &["program"]),
    ("netdoctor_bpf_run_count_total", "Runs of the program since it loaded, while the kernel's BPF statistics were on (exported only while kernel.bpf_stats_enabled=1).", COUNTER, &["program"]),
    ("netdoctor_last_evaluation_timestamp_seconds", "When the last evaluation finished.", GAUGE, &[]),
    ("netdoctor_store_healthy", "1 while the history database takes writes, 0 while they fail (a full file system).", GAUGE, &[]),
    ("netdoctor_store_errors_total", "Operations of the monitor on the history database that failed (writes, mostly).", COUNTER, &[]),
];

/// Builds the families of one scrape.
struct Out {
    families: BTreeMap<&'static str, MetricFamily>,
}

impl Out {
    fn new() -> Self {
        let mut families = BTreeMap::new();
        for (name, help, kind, _) in FAMILIES {
            let mut f = MetricFamily::default();
            f.set_name((*name).to_owned());
            f.set_help((*help).to_owned());
            f.set_field_type(*kind);
            families.insert(*name, f);
        }
        Out { families }
    }

    fn labels(name: &str, values: &[&str]) -> Vec<LabelPair> {
        let names = FAMILIES
            .iter()
            .find(|f| f.0 == name)
            .map_or(&[][..], |f| f.3);
        names
            .iter()
            .zip(values)
            .map(|(n, v)| {
                let mut l = LabelPair::default();
                l.set_name((*n).to_owned());
                l.set_value((*v).to_owned());
                l
            })
            .collect()
    }

    /// Adds a gauge or counter sample (by the family's declared type).
    fn put(&mut self, name: &'static str, values: &[&str], v: f64) {
        let Some(f) = self.families.get_mut(name) else {
            return;
        };
        let mut m = Metric::default();
        m.set_label(Self::labels(name, values));
        if f.get_field_type() == COUNTER {
            let mut c = proto::Counter::default();
            c.set_value(v);
            m.set_counter(c);
        } else {
            let mut g = proto::Gauge::default();
            g.set_value(v);
            m.set_gauge(g);
        }
        f.mut_metric().push(m);
    }

    fn histogram(
        &mut self,
        name: &'static str,
        values: &[&str],
        bounds: &[f64],
        counts: &[u64],
        sum: f64,
    ) {
        let Some(f) = self.families.get_mut(name) else {
            return;
        };
        let mut h = proto::Histogram::default();
        let mut cumulative = 0;
        let mut buckets = Vec::with_capacity(bounds.len());
        for (bound, n) in bounds.iter().zip(counts) {
            cumulative += n;
            let mut b = proto::Bucket::default();
            b.set_upper_bound(*bound);
            b.set_cumulative_count(cumulative);
            buckets.push(b);
        }
        h.set_bucket(buckets);
        h.set_sample_count(counts.iter().sum());
        h.set_sample_sum(sum);
        let mut m = Metric::default();
        m.set_label(Self::labels(name, values));
        m.set_histogram(h);
        f.mut_metric().push(m);
    }

    fn finish(self) -> Vec<MetricFamily> {
        self.families
            .into_values()
            .filter(|f| !f.get_metric().is_empty())
            .collect()
    }
}

fn direction(out: &mut Out, iface: &str, dir: &str, c: &DirCounters) {
    let f = |v: u64| v as f64;
    out.put(
        "netdoctor_interface_packets_total",
        &[iface, dir],
        f(c.packets),
    );
    out.put(
        "netdoctor_interface_segments_total",
        &[iface, dir],
        f(c.segments),
    );
    out.put("netdoctor_interface_bytes_total", &[iface, dir], f(c.bytes));
    out.put(
        "netdoctor_interface_fragments_total",
        &[iface, dir],
        f(c.fragments()),
    );
    out.put(
        "netdoctor_interface_df_over_mtu_total",
        &[iface, dir],
        f(c.df_over_mtu),
    );
    out.put(
        "netdoctor_interface_local_tcp_segments_total",
        &[iface, dir],
        f(c.local_tcp_segments),
    );
    out.put(
        "netdoctor_interface_local_tcp_retransmits_total",
        &[iface, dir],
        f(c.local_tcp_retransmits),
    );
    for (i, n) in c.size_buckets.iter().enumerate() {
        let le = SIZE_BUCKET_BOUNDS
            .get(i)
            .map_or_else(|| "+Inf".to_owned(), ToString::to_string);
        out.put(
            "netdoctor_interface_segment_size_total",
            &[iface, dir, &le],
            f(*n),
        );
    }
}

/// The families of the current view.
fn families(view: &View, shared: &Shared) -> Vec<MetricFamily> {
    let mut out = Out::new();
    let max_peer_labels = shared.config.max_peer_labels;
    for v in view.interfaces.values().filter(|v| v.watched) {
        let name = v.name.as_str();
        out.put("netdoctor_interface_info", &[name, &v.kind], 1.0);
        out.put("netdoctor_interface_mtu_bytes", &[name], f64::from(v.mtu));
        direction(&mut out, name, "rx", &v.counters.ingress);
        direction(&mut out, name, "tx", &v.counters.egress);
        out.put(
            "netdoctor_interface_icmp_too_big_total",
            &[name],
            (v.counters.ingress.icmp_frag_needed + v.counters.ingress.icmp6_packet_too_big) as f64,
        );
        let Some(facts) = &v.facts else { continue };
        out.put(
            "netdoctor_tcp_forwarded_retransmit_ratio",
            &[name],
            facts.traffic.tcp_retrans_ratio,
        );
        let t = &facts.tunnel;
        if t.present {
            for (source, bytes) in [
                ("expected", t.overhead_expected),
                ("measured", t.overhead_measured),
            ] {
                if bytes >= 0 {
                    out.put(
                        "netdoctor_tunnel_overhead_bytes",
                        &[name, source],
                        bytes as f64,
                    );
                    if t.effective_underlay_mtu > 0 {
                        out.put(
                            "netdoctor_tunnel_overhead_ratio",
                            &[name, source],
                            bytes as f64 / t.effective_underlay_mtu as f64,
                        );
                    }
                }
            }
            if t.underlay_mtu > 0 {
                out.put(
                    "netdoctor_tunnel_underlay_mtu_bytes",
                    &[name],
                    t.underlay_mtu as f64,
                );
            }
            if t.max_mtu > 0 {
                out.put("netdoctor_tunnel_max_mtu_bytes", &[name], t.max_mtu as f64);
            }
        }
        if facts.probe.ran {
            out.put(
                "netdoctor_path_mtu_bytes",
                &[name],
                facts.probe.path_mtu as f64,
            );
            out.put(
                "netdoctor_path_mtu_blackhole",
                &[name],
                f64::from(u8::from(facts.probe.blackhole)),
            );
        }
    }
    wg_path::peer_paths(&mut out, view, shared.config.max_path_peers);
    let uptime_s = shared.started.elapsed().as_secs() as i64;
    for (iface, peers) in &view.handshakes {
        out.put("netdoctor_wireguard_peers", &[iface], peers.len() as f64);
        // A peer that never completed a handshake is as stale as the agent is old.
        let age = |a: i64| if a < 0 { uptime_s } else { a };
        if let Some(max) = peers.iter().map(|(_, a)| age(*a)).max() {
            out.put(
                "netdoctor_wireguard_handshake_age_max_seconds",
                &[iface],
                max as f64,
            );
        }
        if peers.len() <= max_peer_labels {
            for (peer, a) in peers {
                out.put(
                    "netdoctor_wireguard_handshake_age_seconds",
                    &[iface, peer],
                    age(*a) as f64,
                );
            }
        }
    }
    for ((iface, cc), t) in &view.tcp {
        out.put(
            "netdoctor_tcp_data_segments_total",
            &[iface, cc],
            t.segments as f64,
        );
        out.put(
            "netdoctor_tcp_retransmits_total",
            &[iface, cc],
            t.retransmits as f64,
        );
        out.put("netdoctor_tcp_retransmit_ratio", &[iface, cc], t.last_ratio);
    }
    for ((iface, limit), t) in &view.limits {
        out.put(
            "netdoctor_tcp_connections",
            &[iface, limit],
            t.connections as f64,
        );
        out.put(
            "netdoctor_tcp_limited_bytes_total",
            &[iface, limit],
            t.bytes as f64,
        );
    }
    for (iface, h) in &view.srtt {
        // The encoder adds the +Inf bucket from the sample count.
        out.histogram(
            "netdoctor_tcp_srtt_seconds",
            &[iface],
            &SRTT_BUCKETS,
            &h.counts,
            h.sum,
        );
    }
    for d in &view.drops {
        out.put(
            "netdoctor_drops_total",
            &[&d.interface, &d.reason],
            d.packets_total as f64,
        );
    }
    // Findings about several subjects (peers, flows) make one series: the alert is about
    // the interface.
    let active: std::collections::BTreeSet<(&str, String, &str)> = view
        .active
        .iter()
        .map(|f| (f.id.as_str(), f.severity.to_string(), f.interface.as_str()))
        .collect();
    for (id, severity, iface) in &active {
        out.put("netdoctor_finding_active", &[id, severity, iface], 1.0);
    }
    out.put("netdoctor_build_info", &[env!("CARGO_PKG_VERSION")], 1.0);
    let h = &view.health;
    out.put(
        "netdoctor_bpf_programs_attached",
        &[],
        h.programs_attached as f64,
    );
    out.put(
        "netdoctor_attach_failures_total",
        &[],
        shared.attach_failures.load(Ordering::Relaxed) as f64,
    );
    let changes = shared
        .config_changes
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    for (kind, n) in changes {
        out.put("netdoctor_config_changes_total", &[kind], n as f64);
    }
    for (program, loaded) in &h.programs_loaded {
        out.put(
            "netdoctor_bpf_program_loaded",
            &[program],
            f64::from(u8::from(*loaded)),
        );
    }
    for (map, fill) in &h.map_fill {
        out.put("netdoctor_bpf_map_fill_ratio", &[map], *fill);
    }
    if h.flow_table.capacity > 0 {
        out.put(
            "netdoctor_flow_table_capacity",
            &[],
            h.flow_table.capacity as f64,
        );
        out.put(
            "netdoctor_flow_table_evictions_total",
            &[],
            h.flow_table.evictions as f64,
        );
    }
    if let Some(on) = h.bpf_stats_enabled {
        out.put("netdoctor_bpf_stats_enabled", &[], f64::from(u8::from(on)));
    }
    for (program, (runs, ns)) in &h.program_stats {
        out.put("netdoctor_bpf_run_count_total", &[program], *runs as f64);
        out.put(
            "netdoctor_bpf_run_time_seconds_total",
            &[program],
            *ns as f64 / 1e9,
        );
    }
    let store = shared.store.health();
    out.put(
        "netdoctor_store_healthy",
        &[],
        f64::from(u8::from(store.is_ok())),
    );
    out.put(
        "netdoctor_store_errors_total",
        &[],
        store.errors_total as f64,
    );
    if h.last_evaluation_ms > 0 {
        out.put(
            "netdoctor_last_evaluation_timestamp_seconds",
            &[],
            h.last_evaluation_ms as f64 / 1000.0,
        );
    }
    out.finish()
}

/// The collector registered with the registry.
#[derive(Debug)]
struct ViewCollector {
    shared: Arc<Shared>,
    descs: Vec<Desc>,
}

impl Collector for ViewCollector {
    fn desc(&self) -> Vec<&Desc> {
        self.descs.iter().collect()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let view = self.shared.view();
        families(&view, &self.shared)
    }
}

/// The agent's registry: the view's families and the evaluation-duration histogram.
#[derive(Debug, Clone)]
pub struct Metrics {
    registry: Registry,
}

impl Metrics {
    /// Registers everything.
    pub fn new(shared: Arc<Shared>) -> anyhow::Result<Self> {
        let descs = FAMILIES
            .iter()
            .map(|(name, help, _, labels)| {
                Desc::new(
                    (*name).to_owned(),
                    (*help).to_owned(),
                    labels.iter().map(|l| (*l).to_owned()).collect(),
                    HashMap::new(),
                )
            })
            .collect::<Result<Vec<_>, _>>()?;
        let registry = Registry::new();
        registry.register(Box::new(shared.evaluation_seconds.clone()))?;
        registry.register(Box::new(ViewCollector { shared, descs }))?;
        Ok(Metrics { registry })
    }

    /// The text exposition.
    pub fn render(&self) -> anyhow::Result<String> {
        let mut buf = Vec::new();
        TextEncoder::new().encode(&self.registry.gather(), &mut buf)?;
        Ok(String::from_utf8(buf)?)
    }
}

#[cfg(test)]
mod tests;
pub(crate) mod wg_path;

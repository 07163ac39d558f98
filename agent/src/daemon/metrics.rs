//! Prometheus metrics, built at scrape time from what the monitor published (the pattern of
//! ebpf_exporter: kernel counters are exposed as they are, never copied into a second set
//! of counters that could drift). Every family is declared once in [`FAMILIES`]; labels are
//! bounded by design (interfaces, directions, congestion control modules, drop reasons,
//! connection limits, finding ids), never per flow, address or port.

use std::collections::HashMap;
use std::sync::Arc;

use prometheus::core::{Collector, Desc};
use prometheus::proto::{MetricFamily, MetricType};
use prometheus::{Encoder, Registry, TextEncoder};

use crate::daemon::state::{Shared, View};
use out::Out;

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
    ("netdoctor_bpf_missed_runs_total", "Runs of the program the kernel skipped because it was already running on that CPU (an interrupt hit its hook again): the events they would have counted are missing. Always exported (0 before Linux 5.12).", COUNTER, &["program"]),
    ("netdoctor_last_evaluation_timestamp_seconds", "When the last evaluation finished.", GAUGE, &[]),
    ("netdoctor_store_healthy", "1 while the history database takes writes, 0 while they fail (a full file system).", GAUGE, &[]),
    ("netdoctor_store_errors_total", "Operations of the monitor on the history database that failed (writes, mostly).", COUNTER, &[]),
];

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

mod agent_health;
mod interfaces;
mod out;
mod tcp;
#[cfg(test)]
mod tests;
pub(crate) mod wg_path;

/// The families of the current view.
fn families(view: &View, shared: &Shared) -> Vec<MetricFamily> {
    let mut out = Out::new();
    interfaces::interfaces(&mut out, view);
    wg_path::peer_paths(&mut out, view, shared.config.max_path_peers);
    let uptime_s = shared.started.elapsed().as_secs() as i64;
    wg_path::handshakes(&mut out, view, uptime_s, shared.config.max_peer_labels);
    tcp::tcp_and_drops(&mut out, view);
    agent_health::agent_health(&mut out, view, shared);
    out.finish()
}

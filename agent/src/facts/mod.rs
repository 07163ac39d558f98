//! Facts about an interface and its path, derived from what the kernel counted
//! ([`crate::kernel`]) and the configuration read from the system ([`crate::config`]),
//! never guessed. [`Facts`] is the document rules are written against: its fields are the
//! variables a rule's CEL expressions read (`iface.mtu`, `tunnel.max_mtu`, `peer.…`,
//! `flow.…`), documented in `docs/rules.md`.

pub mod bridge;
pub mod build;
pub mod chain;
pub mod ecmp;
pub mod flows;
pub mod handshake;
pub mod nat;
pub mod overhead;
pub mod probe;
pub mod reorder;
mod tunnel;
pub mod underlay;
pub mod watch;

pub use tunnel::{PeerFacts, TunnelFacts};

use serde::Serialize;

use crate::config::host::Host;

/// The diagnosed interface.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct IfaceFacts {
    /// Name.
    pub name: String,
    /// Index.
    pub index: u32,
    /// Kind: wireguard, tun, tap, vxlan, geneve, veth, bridge, bond, physical, ...
    pub kind: String,
    /// MTU.
    pub mtu: i64,
    /// Administratively up.
    pub up: bool,
    /// Addresses with prefix length.
    pub addresses: Vec<String>,
    /// A tunnel interface (wireguard, tun, tap, vxlan, geneve, an IP tunnel).
    pub is_tunnel: bool,
    /// Largest MTU among the host's other non-tunnel interfaces (the LAN side of a gateway).
    pub lan_mtu: i64,
    /// The interface is a bond: its mode (balance-rr, active-backup, ...), "" if not.
    pub bond_mode: String,
    /// And its members, if a bond.
    pub bond_members: Vec<String>,
}

/// Traffic seen on the interface during the observation.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct TrafficFacts {
    /// Observation length.
    pub duration_s: f64,
    /// Packets (segments) in.
    pub rx_segments: i64,
    /// Packets (segments) out.
    pub tx_segments: i64,
    /// DF or IPv6 segments larger than the MTU, both directions.
    pub df_over_mtu: i64,
    /// IP fragments, both directions.
    pub fragments: i64,
    /// ICMP frag-needed and ICMPv6 packet-too-big received.
    pub too_big_received: i64,
    /// Largest segment sent, IP bytes.
    pub max_segment_out: i64,
    /// Full-size segments, those the MTU limits: segments in the size bucket holding the
    /// MTU (577-1280 bytes at 1280, 1421-1440 at 1440), in the direction with more of them.
    pub full_size_segments: i64,
    /// Their share of that direction's segments, 0.0 to 1.0.
    pub full_size_share: f64,
    /// Largest SYN MSS seen leaving through the interface (forwarded or local), 0 if none.
    pub syn_mss_max: i64,
    /// Largest MSS that fits the interface MTU: MTU - 40 (IPv4).
    pub mss_limit: i64,
    /// TCP flows crossing the interface whose SYN announced an MSS above `mss_limit`.
    pub syn_mss_over_limit: i64,
    /// TCP segments seen (forwarded and local), both directions.
    pub tcp_segments: i64,
    /// TCP segments carrying already-seen data: forwarded and received ones detected
    /// passively, those local connections sent counted by their sockets.
    pub tcp_retransmits: i64,
    /// tcp_retransmits / tcp_segments.
    pub tcp_retrans_ratio: f64,
    /// Of tcp_retransmits, those local connections' peers reported as needless (DSACK):
    /// reordered, not lost.
    pub tcp_spurious_retransmits: i64,
    /// tcp_spurious_retransmits / tcp_segments: `tcp_retrans_ratio - tcp_spurious_ratio` is
    /// the share of segments lost.
    pub tcp_spurious_ratio: f64,
    /// tcp_spurious_retransmits / tcp_retransmits, percent; -1 without retransmissions.
    pub tcp_spurious_percent: f64,
    /// Reordering events the local connections through the interface detected.
    pub tcp_reord_seen: i64,
    /// Local connections that detected reordering (or whose reordering metric grew past 3).
    pub tcp_reordering_connections: i64,
    /// The largest reordering metric among them (3, the kernel's default, if none grew).
    pub tcp_reordering_max: i64,
    /// Flows the flow table (shared by every watched interface) evicted during the
    /// observation because it was full: their figures restarted from zero.
    pub flow_evictions: i64,
    /// Flows the flow table holds (`--max-flows`).
    pub flow_table_capacity: i64,
}

/// A local TCP connection through the interface (see `sockets::window::SocketRow`).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct FlowFacts {
    /// "local -> remote".
    pub name: String,
    /// Congestion control algorithm.
    pub cc: String,
    /// Data segments sent in the window.
    pub data_segs_sent: i64,
    /// Segments retransmitted in the window.
    pub retransmits: i64,
    /// retransmits / data_segs_sent.
    pub retrans_ratio: f64,
    /// Full-MSS segments retransmitted.
    pub full_size_retransmits: i64,
    /// Shorter segments retransmitted.
    pub small_retransmits: i64,
    /// Retransmissions the peer reported as needless (DSACK: the original arrived late,
    /// reordered rather than lost), at most `retransmits`.
    pub spurious_retransmits: i64,
    /// spurious_retransmits / data_segs_sent: `retrans_ratio - spurious_ratio` is the share
    /// of segments lost.
    pub spurious_ratio: f64,
    /// Reordering events the connection detected in the window (`tcpi_reord_seen`).
    pub reord_seen: i64,
    /// The connection's reordering metric at the window's end: how many segments out of
    /// order it tolerates before calling one lost (3 until reordering is seen).
    pub reordering: i64,
    /// Path MTU the socket uses.
    pub pmtu: i64,
    /// MSS.
    pub mss: i64,
    /// Smoothed RTT, ms.
    pub srtt_ms: f64,
    /// Bits acknowledged per second in the window.
    pub throughput_bps: f64,
    /// What loss-based congestion control (cubic, reno) can sustain at this srtt and loss
    /// ratio (retransmissions less the spurious ones), bits/s (Mathis et al. 1997:
    /// MSS/RTT · 1.22/√p); -1 without loss.
    pub loss_based_limit_bps: f64,
    /// Bits/s acknowledged by every connection to the same remote host in the window:
    /// what the path delivered.
    pub host_throughput_bps: f64,
    /// The fastest bbr connection to the same remote host in the window, bits/s; -1 if none.
    pub host_bbr_bps: f64,
    /// The remote host's address.
    pub remote_host: String,
    /// What limited the connection most of the window: receiver_window, send_buffer,
    /// congestion, application, unknown ("" when not measured).
    pub limit: String,
    /// That limit's share of the time the connection was observed, 0 to 1.
    pub limit_share: f64,
    /// Share of the time sending at the pace of the congestion window or the network.
    pub busy_share: f64,
    /// Share of the time waiting for the peer's receive window.
    pub rwnd_limited_share: f64,
    /// Share of the time waiting for room in the send buffer.
    pub sndbuf_limited_share: f64,
    /// Share of the time with nothing to send.
    pub idle_share: f64,
    /// The window that set the ceiling of a window-limited connection, bytes; -1.
    pub window_bytes: i64,
    /// That window's ceiling, window / srtt, bits/s; -1.
    pub ceiling_bps: f64,
    /// The rate the path to the remote host has shown in the window, bits/s.
    pub path_rate_bps: f64,
    /// The window that rate needs at this srtt (bandwidth-delay product), bytes; -1.
    pub needed_window_bytes: i64,
    /// The buffer maximum (`tcp_rmem`'s third number for a receive window, `tcp_wmem`'s for a
    /// send buffer) that gives the needed window, bytes, rounded up to 64 KiB; -1.
    pub needed_buffer_bytes: i64,
    /// The receiving end is a socket of this host.
    pub receiver_local: bool,
    /// The underlay loss measured for the tunnel peer that carries the connection (its
    /// allowed IPs hold the remote address), percent; -1 if none is known.
    pub underlay_loss_percent: f64,
}

/// Kernel drops on the interface during the observation.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct DropFacts {
    /// All drops.
    pub total: i64,
    /// IP_INADDRERRORS: packets for other hosts arriving while forwarding is off.
    pub forwarding: i64,
    /// IP_RPFILTER: reverse-path filter.
    pub rpfilter: i64,
    /// PKT_TOO_BIG: too big for the next hop with DF set.
    pub too_big: i64,
    /// Every reason with its count.
    pub by_reason: std::collections::BTreeMap<String, i64>,
}

/// The active path-MTU probe toward the tunnel endpoints (or the given target).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ProbeFacts {
    /// Whether a probe ran and got answers.
    pub ran: bool,
    /// Target probed ("" if none).
    pub target: String,
    /// Its IP version, "ipv4" or "ipv6" ("" if none): which ICMP message (frag-needed or
    /// packet-too-big) the path must let through.
    pub family: String,
    /// Largest size that passed, -1 if unknown.
    pub path_mtu: i64,
    /// Larger sizes vanished without ICMP too-big.
    pub blackhole: bool,
    /// Routers reported a smaller MTU.
    pub too_big_reported: bool,
    /// Some probe ran into random loss; its figures were not used.
    pub lossy: bool,
}

/// Everything rules can read.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Facts {
    /// The interface.
    pub iface: IfaceFacts,
    /// Its tunnel, if any.
    pub tunnel: TunnelFacts,
    /// Tunnel peers (rules with `scope = "tunnel"` see each as `peer`).
    pub peers: Vec<PeerFacts>,
    /// Host settings.
    pub host: Host,
    /// Traffic seen.
    pub traffic: TrafficFacts,
    /// Local TCP connections (rules with `scope = "flow"` see each as `flow`).
    pub flows: Vec<FlowFacts>,
    /// Kernel drops on the interface.
    pub drops: DropFacts,
    /// The path-MTU probe.
    pub probe: ProbeFacts,
    /// Equal-cost multipath routes over the interface or its underlay.
    pub ecmp: ecmp::EcmpFacts,
    /// Source address translation of the tunnel's clients on the gateway's uplink.
    pub nat: nat::NatFacts,
    /// The bridge the interface is, or is a port of.
    pub bridge: bridge::BridgeFacts,
}

impl Facts {
    /// A document with every field and one peer and one flow, for validating rules
    /// (`netdoctor rules check`) without a live diagnosis.
    pub fn sample() -> Self {
        Facts {
            peers: vec![PeerFacts {
                online: Some(true),
                ..PeerFacts::default()
            }],
            flows: vec![FlowFacts::default()],
            ..Facts::default()
        }
    }

    /// The document as JSON, as rules see it.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }
}

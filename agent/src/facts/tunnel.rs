//! The tunnel document of the facts: the tunnel the interface carries, its underlay and
//! encapsulation (`tunnel.…` in rules), and each of its peers (`peer.…`).

use serde::Serialize;

use crate::config::{bond, cpu};

/// The tunnel carried by the interface and its underlay.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct TunnelFacts {
    /// Whether the interface is a tunnel netdoctor understands.
    pub present: bool,
    /// wireguard, vxlan, geneve, gre, gretap, ip6gre, ip6gretap, ipip, sit, ip6tnl, fastd,
    /// tinc, vpncloud, or "other" for other TUN/TAP daemons.
    pub kind: String,
    /// Local address of the outer packets, as configured ("" if not).
    pub local: String,
    /// Encapsulation settings as `ip -d link` names them: GRE's "key", "csum", "seq";
    /// ip6tnl/ip6gre's "encaplimit N"; ip6tnl's "mode ..."; GENEVE's "ttl N", "df set",
    /// "udpcsum", "external", ....
    pub options: Vec<String>,
    /// Underlay address family in use: "ipv4", "ipv6" (IPv6 if any endpoint is IPv6).
    pub family: String,
    /// Encapsulation overhead from the documented table, bytes.
    pub overhead_expected: i64,
    /// Overhead measured at full size (outer minus inner largest segment), -1 if unknown.
    pub overhead_measured: i64,
    /// Underlay interface toward the endpoints.
    pub underlay_iface: String,
    /// MTU of the route toward the endpoints (smallest among them).
    pub underlay_mtu: i64,
    /// When the underlay is itself a tunnel, the chain below this one down to an interface
    /// that is not ("wg0 (wireguard, 60 bytes, MTU 1420) over eth0 (MTU 1500)"); "" otherwise.
    pub underlay_chain: String,
    /// Path MTU the probe measured toward the endpoints (smallest), -1 if not probed.
    pub path_mtu: i64,
    /// The MTU limit used: the probed path MTU if known, else the route MTU; never more
    /// than an underlay chain carries unfragmented.
    pub effective_underlay_mtu: i64,
    /// Largest tunnel MTU that fits: effective underlay MTU minus the overhead.
    pub max_mtu: i64,
    /// The MTU the tunnel's software gives its interface by default (WireGuard 1420,
    /// Tailscale 1280), -1 if it has none or it is unknown.
    pub usual_mtu: i64,
    /// UDP port of the tunnel on the underlay (0 if unknown).
    pub port: i64,
    /// Remote endpoints ("address:port"; the address alone for tunnels without UDP).
    pub endpoints: Vec<String>,
    /// The serving process for TUN/TAP tunnels and userspace WireGuard (wireguard-go,
    /// boringtun, tailscaled); "" for kernel tunnels.
    pub daemon: String,
    /// The data methods the daemon is configured to offer, preferred first (fastd's
    /// `method` lines, VpnCloud's crypto algorithms, read from a root daemon's root-owned
    /// configuration or its command line); empty when not read or for other tunnels.
    pub methods: Vec<String>,
    /// IP fragments of tunnel packets seen on the underlay during the observation.
    pub underlay_fragments: i64,
    /// Underlay interface is a bond: its transmit hash policy ("" if not a bond).
    pub underlay_bond_policy: String,
    /// Bond mode ("" if not a bond).
    pub underlay_bond_mode: String,
    /// What each bond member sent during the observation (kernel link counters).
    pub underlay_bond_members: Vec<bond::MemberTraffic>,
    /// Bytes all members sent.
    pub underlay_bond_tx_bytes: i64,
    /// The member that sent the most ("" if none).
    pub underlay_bond_busiest: String,
    /// Its share of the bytes, percent.
    pub underlay_bond_busiest_percent: f64,
    /// All members' rate, Mbit/s.
    pub underlay_bond_rate_mbps: f64,
    /// What the tunnel carried and what its daemon used of the CPU (`daemon_pid`,
    /// `daemon_cpu_percent`, ..., `throughput_mbps`), at the same level as the fields above.
    #[serde(flatten)]
    pub load: cpu::TunnelLoad,
}

/// One tunnel peer (WireGuard peer, VXLAN remote, tinc/fastd endpoint).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct PeerFacts {
    /// WireGuard public key, or the endpoint for other tunnels.
    pub name: String,
    /// Endpoint "address:port" ("" if unknown).
    pub endpoint: String,
    /// Endpoint address family: "ipv4", "ipv6" or "".
    pub family: String,
    /// Allowed IPs (WireGuard).
    pub allowed_ips: Vec<String>,
    /// Seconds since the last handshake; -1 if never (WireGuard).
    pub handshake_age_s: i64,
    /// Persistent keepalive interval, 0 if off.
    pub keepalive_s: i64,
    /// Bytes sent to the peer during the observation.
    pub tx_bytes_delta: i64,
    /// Bytes received from the peer during the observation.
    pub rx_bytes_delta: i64,
    /// Handshake initiations sent toward the peer on the underlay during the observation.
    pub initiations_sent: i64,
    /// Handshake responses received from the peer during the observation.
    pub responses_received: i64,
    /// A handshake completed during the observation (or within a second after it, for
    /// initiations still in flight when it ended): a response crossed the underlay in
    /// either direction, or the peer's last handshake is newer than the observation's start.
    pub handshake_in_window: bool,
    /// Path MTU the probe measured toward the endpoint, -1 if not probed.
    pub path_mtu: i64,
    /// The probe saw larger packets vanish without an ICMP too-big report.
    pub blackhole: bool,
    /// The host name the peer announces (Tailscale), "" otherwise.
    pub host: String,
    /// How traffic reaches the peer, as its daemon reports it (Tailscale): "direct" (UDP to
    /// `endpoint`), "derp" (relayed by a DERP server over TCP), "peer_relay" (relayed by
    /// another node); "" when not connected, or for other tunnels.
    pub path: String,
    /// The peer's home DERP region, where traffic to it is relayed (Tailscale), "" if none.
    pub derp_region: String,
    /// The DERP servers (`address:port`) traffic with the peer crosses when relayed: its
    /// region's and this node's (Tailscale).
    pub derp_servers: Vec<String>,
    /// Bytes over TCP with those DERP servers on the underlay during the observation, both
    /// directions (the connections carry every peer relayed through them); -1 if no DERP
    /// server address is known, or for other tunnels.
    pub derp_bytes: i64,
    /// WireGuard bytes over UDP with the peer's known addresses (its candidate endpoints and
    /// the one in use) on the underlay during the observation, both directions
    /// (Tailscale); -1 when none is known, or for other tunnels.
    pub udp_bytes: i64,
    /// The control plane reports the peer connected (Tailscale); absent for other tunnels.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub online: Option<bool>,
    /// WireGuard messages the peer sent that reached this host's underlay during the
    /// observation or should have: the advance of its sessions' highest counters (every
    /// message, keepalives too, takes the next counter). -1 when not measured (not
    /// WireGuard, no underlay watched).
    pub underlay_expected: i64,
    /// Of those, received (a late message counts when it arrives; duplicates do not).
    pub underlay_received: i64,
    /// Expected and not received: lost on the way from the peer to this host.
    pub underlay_lost: i64,
    /// underlay_lost / underlay_expected in percent; -1 when nothing was expected or not
    /// measured.
    pub underlay_loss_percent: f64,
    /// Sessions (receiver indexes) of the peer that carried messages during the observation.
    pub rx_sessions: i64,
    /// The highest counter seen from the peer, in its latest session; -1 if none.
    pub rx_counter: i64,
    /// WireGuard transport-data messages (keepalives too) sent toward the peer on the
    /// underlay during the observation; -1 when not measured.
    pub tx_data_packets: i64,
    /// Round trip of the latest handshake with the peer the data plane timed, ms (an
    /// initiation to its response, or a response to the first data after it); -1 if none.
    pub rtt_ms: f64,
    /// How long ago that handshake completed, seconds; -1 if none.
    pub rtt_age_s: i64,
    /// Handshake initiations sent to the peer in the last 30 s of the observation (all of
    /// a shorter one), more than a second before its end, that no response answered.
    pub initiations_unanswered: i64,
    /// Handshake responses sent to the peer in the same span that no data followed.
    pub responses_unconfirmed: i64,
    /// Handshakes with the peer in the same span that were answered (initiations) or
    /// confirmed (responses).
    pub handshakes_answered: i64,
}

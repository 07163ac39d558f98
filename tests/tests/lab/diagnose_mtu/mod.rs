//! End-to-end scenarios for the MTU findings of `netdoctor diagnose IFACE --json`:
//! `mtu.tunnel_exceeds_underlay`, `mtu.tunnel_undersized`, `mtu.underlay_fragmentation`,
//! `pmtu.blackhole`, `mss.clamp_missing` and `mtu.bridge_port_mismatch`, each reproduced on
//! real namespaces, veths, bridges, wireguard-go and VXLAN devices with real traffic, each
//! beside a healthy twin that must
//! yield no warning or critical finding (exit 0). `netdoctor probe` is checked on a
//! blackhole, on a path with working PMTUD and on a direct link; [`pmtu6`] and
//! [`wg_over_hop6`] do the same over IPv6 (a 1280 hop, ICMPv6 packet-too-big).
//!
//! Needs root, BPF and the lab tools (wireguard-go, wg, iperf3, nft, ping); skips
//! elsewhere, fails under CI=true. Build the binary first: `cargo build -p netdoctor`.
//!
//! One module per subject. [`report`] runs `diagnose` and checks its reports for all of
//! them; [`hop_path`] is the client — router — server line whose router→server hop is 1400,
//! shared by the PMTU, probe and wall-time cases.

mod hop_path;
mod report;

mod bridge;
mod doctored;
mod gateway;
mod pmtu;
mod pmtu6;
mod probe_command;
mod stacked;
mod vxlan;
mod wall_time;
mod wg_over_hop;
mod wg_over_hop6;
mod wireguard;

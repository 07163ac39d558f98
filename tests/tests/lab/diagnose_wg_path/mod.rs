//! The WireGuard path measured passively on the underlay, end to end with
//! `netdoctor diagnose --json` (and `flows`) on real wireguard-go tunnels over a veth pair
//! (and over IPv6 through a router): the loss of what a peer sends, injected with nft
//! `numgen random` on the sender's underlay at 1 % and 5 % with steady UDP inside (paced
//! datagrams at a fixed rate, so no TCP retransmission tells), measured on the receiving
//! side within a point of what was injected, beside a clean twin; a path that passes one direction only, seen from both
//! ends, and the same path once the rule is gone; the agent's per-peer loss and handshake
//! RTT series on the receiving side.
//!
//! Needs root, BPF and the lab tools (wireguard-go, wg, iperf3, nft, ping); skips
//! elsewhere, fails under CI=true. Build the binary first: `cargo build -p netdoctor`.

mod lab;

mod agent;
mod loss;
mod one_way;

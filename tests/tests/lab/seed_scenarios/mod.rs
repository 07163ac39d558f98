//! The five seed situations of the project mission, end to end: each builds the broken
//! network in throw-away namespaces, runs `netdoctor diagnose IFACE --json` on the
//! interface an operator would ask about, and checks the finding id(s) — and that the
//! healthy twin of the same network does not get them.
//!
//! 1. A WireGuard MTU that ignores the encapsulation overhead → `mtu.tunnel_exceeds_underlay`.
//! 2. A PMTU blackhole (router drops its own ICMP frag-needed) → `pmtu.blackhole`.
//! 3. Packet loss hitting CUBIC where BBR copes → `tcp.cubic_on_lossy_path`, cubic flow only.
//! 4. A gateway with forwarding off → `forwarding.disabled`; strict rp_filter with
//!    asymmetric routing → `rpfilter.drops`.
//! 5. A bond hashing every flow onto one link under a WireGuard tunnel →
//!    `bond.single_link_hash`: in the kernel lane (tests/vm/tunnels.sh, `bond_xor_l2`),
//!    since this host's kernel has no bonding.
//!
//! Needs root, BPF and the lab tools; skips elsewhere, fails under CI=true.
//! Build the binary first: `cargo build -p netdoctor`.
//!
//! One module per seed situation; [`flow_fields`] reads the flows of their reports, and
//! `crate::common_mesh` (shared with other modules) runs the diagnosis.

mod flow_fields;

mod cubic_loss;
mod gateway;
mod pmtu_blackhole;
mod tunnel_mtu;

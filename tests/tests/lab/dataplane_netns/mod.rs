//! End-to-end tests of the packet data plane: the real `netdoctor` binary (or data
//! planes loaded in the test process), real BPF programs attached to interfaces of
//! throw-away network namespaces,
//! real traffic (ping, iperf3, wireguard-go), and the figures compared with
//! what the kernel and the traffic tools measured themselves.
//!
//! Needs root, BPF and the lab tools; skips elsewhere, fails under CI=true.
//! Build the binary first: `cargo build -p netdoctor`.
//!
//! One module per subject; [`helpers`] serves them all.

mod helpers;

mod forwarded_retransmissions;
mod icmp_frag_needed;
mod loopback;
mod sigkill;
mod signals;
mod two_dataplanes;
mod veth;
mod wireguard;

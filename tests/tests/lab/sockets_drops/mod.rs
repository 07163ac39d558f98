//! End-to-end tests of netdoctor's socket telemetry (`netdoctor flows ... --json`:
//! `sockets`, `congestion_control`, `congestion_control_sysctl`, `socket_signals`) and of
//! kernel drop reasons (`netdoctor drops --json`): real namespaces, real iperf3 / ping /
//! TCP traffic, real BPF, and the figures compared with what `ss`, iperf3 and the
//! kernel's own SNMP counters say.
//!
//! Needs root, BPF and the lab tools; skips elsewhere, fails under CI=true.
//! Build the binary first: `cargo build -p netdoctor`.
//!
//! One module per subject: [`rows`] reads the `sockets` rows of a flows report, [`ss`]
//! what `ss -tin` says, [`helpers`] serves them all; the tests sit in
//! [`congestion_control`], [`retransmit_ratio`], [`drops`], [`pmtu`] and [`short_lived`].

mod helpers;
mod rows;
mod ss;

mod congestion_control;
mod drops;
mod pmtu;
mod retransmit_ratio;
mod short_lived;

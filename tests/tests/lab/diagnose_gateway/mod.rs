//! End-to-end scenarios for `netdoctor diagnose IFACE --json`: each one builds a real
//! misconfiguration in network namespaces (lossy path with CUBIC, loss on a forwarded path,
//! forwarding disabled on a gateway, strict reverse-path filtering with asymmetric routing,
//! a WireGuard peer that never answers; the bond scenario is in the kernel lane,
//! tests/vm/tunnels.sh, since this host's kernel has no bonding), drives
//! traffic through it *during* the observation window, and requires the finding's id in
//! the JSON report and the matching exit code. Every scenario has a healthy twin that
//! differs in the one setting the rule is about and must not produce the finding.
//!
//! Exit codes end to end (Nagios convention): only warnings exit 1
//! (`cubic_on_lossy_path_*`, `high_retransmits_*`), a critical finding exits 2
//! (`forwarding_disabled_*`, `strict_rp_filter_*`, `wireguard_peer_*`), a healthy twin 0,
//! an unknown interface 3 (`unknown_interface_exits_3`). Every diagnosis additionally
//! checks that its exit code is the one of its worst finding.
//!
//! Traffic starts only once netdoctor printed "observing" (its start snapshot is taken),
//! and TCP tests keep their connection open past the window's end, so what the rules see
//! is exactly the scenario.
//!
//! Needs root, BPF and the lab tools; skips elsewhere, fails under CI=true.
//! Build the binary first: `cargo build -p netdoctor`.
//!
//! One module per finding, plus the active probe and the unknown interface; [`report`]
//! reads the JSON report, [`scenario`] drives the diagnosis and its traffic.

mod report;
mod scenario;

mod cubic;
mod exit_code;
mod forwarding;
mod probe;
mod retransmits;
mod rp_filter;
mod wireguard;

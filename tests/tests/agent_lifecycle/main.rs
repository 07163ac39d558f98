//! End-to-end tests of `netdoctor agent` over time, on real namespaces, veths and
//! wireguard-go tunnels: a finding's lifecycle (opened once, refreshed, resolved when the
//! MTU is fixed), interfaces that disappear and come back, `kill -9` (nothing stays
//! attached, the SQLite history survives intact and is served after a restart) and SIGTERM
//! (exit 0, nothing attached).
//!
//! Needs root, BPF and the lab tools; skips elsewhere, fails under CI=true.
//! Build the binary first: `cargo build -p netdoctor`.
//!
//! One module per subject; [`helpers`] and [`lab`] serve them all.

mod helpers;
mod lab;

mod churn;
mod finding;
mod sigkill;
mod sigterm;

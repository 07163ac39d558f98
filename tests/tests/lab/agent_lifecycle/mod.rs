//! End-to-end tests of `netdoctor agent` over time, on real namespaces, veths and
//! wireguard-go tunnels: a finding's lifecycle (opened once, refreshed, resolved when the
//! MTU is fixed), interfaces that disappear and come back, `kill -9` (nothing stays
//! attached, the SQLite history survives intact and is served after a restart), SIGTERM
//! (exit 0, nothing attached), the agent attached by netlink beside diagnoses of the same
//! interface (its filters stay and count), the history database another user prepared (a
//! forged WAL: exit 3), damaged (exit 3) or on a full file system (said once, `/readyz` 503);
//! rules at the limits of what `rules check` accepts evaluated by the monitor, and one
//! past them refused at start; the configuration timeline (changes served, stored across a
//! restart, cited by the finding they cause; none without a change).
//!
//! Needs root, BPF and the lab tools; skips elsewhere, fails under CI=true.
//! Build the binary first: `cargo build -p netdoctor`.
//!
//! One module per subject; [`helpers`] and [`lab`] serve them all.

mod helpers;
mod lab;

mod churn;
mod database;
mod finding;
mod netlink;
mod rule_limits;
mod sigkill;
mod sigterm;
mod timeline;
mod timeline_peers;

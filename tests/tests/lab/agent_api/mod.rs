//! End-to-end tests of `netdoctor agent`'s HTTP API (docs/api.md): the real binary in a
//! lab namespace, a wireguard-go tunnel over a veth underlay with ping and iperf3 traffic,
//! and every answer checked over real HTTP against what the lab set up (MTUs, addresses,
//! ports, congestion control). Also the security contract: no public address without a
//! token, bearer tokens, token files only root may write or read, and 400s naming the
//! bad parameter, never a 5xx.
//!
//! Needs root, BPF and the lab tools; skips elsewhere, fails under CI=true.
//! Build the binary first: `cargo build -p netdoctor`.
//!
//! One module per subject; [`helpers`] and [`lab`] serve them all.

mod helpers;
mod lab;

mod diagnose;
mod security;
mod token_file;
mod while_traffic;
mod wireguard;

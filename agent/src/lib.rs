//! netdoctor: eBPF network diagnostics for tunnels, overlays and gateways.
//!
//! The folders follow the data path, each depending only on those before it:
//!
//! - [`kernel`]: the BPF programs and what they count: loading, BTF, attachments, the views
//!   of the C structs, the packet data plane, socket telemetry and drop reasons.
//! - `config`: the configuration read from the system: interfaces, links and routes over
//!   netlink, sysctls, the firewall, WireGuard and the tunnel daemons, processes and CPUs.
//! - `facts`: what netdoctor knows about an interface and its path, derived from the two
//!   above: the tunnel's underlay, the overhead table, the path-MTU probe, and the
//!   observation turned into the facts document rules read.
//! - `rules`: the rules (TOML + CEL) and the findings they produce.
//! - `diagnose`: `netdoctor diagnose`, one observation of one interface.
//! - [`daemon`]: `netdoctor agent`: the monitor, the HTTP API, the SQLite history and the
//!   metrics.
//! - [`cli`]: the command line.

pub mod cli;
pub(crate) mod config;
pub mod daemon;
pub(crate) mod diagnose;
pub(crate) mod duration;
pub(crate) mod facts;
pub mod kernel;
#[cfg(test)]
mod layers;
pub(crate) mod rules;
#[cfg(test)]
pub(crate) mod testing;

/// The firewall as netdoctor reads it (nftables over netlink, legacy iptables over
/// `getsockopt`): which NAT and MSS clamping rules exist and what they cover. Public for
/// the lab's tests, which read rules that `nft` and `iptables` wrote in a namespace.
pub use config::{firewall, prefix};

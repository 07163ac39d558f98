//! netdoctor: eBPF network diagnostics for tunnels, overlays and gateways.
//!
//! Data flows one way: kernel ([`dataplane`]) → plain records ([`counters`], [`flows`],
//! [`tunnel`], [`pmtu`]) → reports ([`cli`]).

pub mod agent;
pub mod api;
pub mod attach;
pub mod bpf;
pub mod btf;
pub mod cli;
pub mod counters;
pub mod dataplane;
pub mod diagnose;
pub mod drops;
pub mod duration;
pub mod error;
pub mod facts;
pub mod features;
pub mod findings;
pub mod flow_cache;
pub mod flows;
pub mod iface;
pub mod logging;
pub mod metrics;
pub mod overhead;
pub mod pmtu;
pub mod probe;
pub mod route;
pub mod rules;
pub mod sockets;
pub mod store;
pub mod sysctl;
pub mod tunnel;
pub mod wire;

pub use error::{Error, Result};

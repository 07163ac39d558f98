//! The kernel side: the BPF programs of `ebpf/` (skeletons in [`bpf`]), loaded against
//! this kernel's BTF ([`btf`]), with the features it has ([`features`]), attached to
//! interfaces ([`attach`]), and read back through views of their C structs ([`views`]):
//!
//! - [`packet`]: the packet data plane on XDP/tc: per-interface counters, flows, tunnel
//!   traffic on underlays, ICMP too-big reports;
//! - [`sockets`]: per-connection TCP telemetry (iter/tcp, tp_btf);
//! - [`drops`]: packets the kernel drops, by reason;
//! - [`prog_stats`]: what those programs cost, from the kernel's BPF statistics.
//!
//! Nothing here knows about facts or rules: this layer counts, the next one interprets.

pub(crate) mod attach;
pub(crate) mod bpf;
pub mod btf;
mod clsact;
pub(crate) mod drops;
mod error;
pub mod features;
pub(crate) mod netns;
pub mod packet;
pub mod prog_stats;
pub mod sockets;
mod tc_filters;
pub mod views;

pub use attach::{AttachMethod, XdpMode};
pub use error::{Error, Result};

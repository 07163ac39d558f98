//! The packet data plane (`ebpf/packet.bpf.c`): XDP and tc programs on physical and
//! tunnel interfaces counting packets, segments, sizes, fragments and too-big messages per
//! interface, and flows with their TCP retransmissions, SYN MSS and tunnel messages.
//!
//! - [`dataplane`]: loading and watching, as [`options`] say; `attaching`: the hooks;
//! - [`snapshot`]: reading the maps into plain records ([`counters`], [`flows`],
//!   [`too_big`]); `window`: the difference of two readings, over the flows active in it;
//! - [`flow_cache`]: the per-CPU flow cache, added to the flow table when read;
//! - [`flow_table`]: the flow table's size, memory and evictions;
//! - `mapped`: mappable arrays read and written in place (the flow cache, headers);
//! - [`local_tcp`]: the local path, TCP of this host's own connections counted per
//!   interface (socket telemetry describes each connection);
//! - `iface_path`: what each watched interface's packets go through (tunnel ports, the
//!   families local), kept in its counters' header;
//! - [`tunnel_traffic`]: flows grouped into tunnel traffic between endpoints;
//! - [`wg_path`]: WireGuard sessions received (loss) and handshakes sent (round trips).

mod agent_windows;
mod attaching;
pub mod counters;
pub mod dataplane;
pub mod flow_cache;
mod flow_lookup;
pub mod flow_table;
pub mod flows;
mod iface_path;
#[cfg(test)]
mod limits;
pub mod local_tcp;
mod mapped;
pub mod options;
#[cfg(test)]
mod read_memory;
pub mod snapshot;
mod table_count;
pub mod too_big;
pub mod tunnel_traffic;
pub mod wg_path;
mod window;
mod window_ring;

pub use dataplane::{Dataplane, MAX_IFACES, MAX_TUNNEL_PORTS};
pub use local_tcp::LocalTcp;
pub use options::{Hooks, IngressHook, LinkType, Options, ProgramKind, Target, TunnelPort};
pub use snapshot::Snapshot;
pub use window_ring::{WindowReads, COUNT_EVERY as WINDOW_COUNT_EVERY};

//! The configuration read from the system, as it is: interfaces, links and routes
//! (rtnetlink), sysctls, the firewall (nftables, legacy iptables), WireGuard (generic
//! netlink, UAPI, tailscaled's LocalAPI), IP tunnels, bonds, the TUN/TAP daemons (tinc,
//! fastd, VpnCloud) and their processes, and what the host's CPUs and cgroups allow.
//!
//! Every reader here is bounded and trusts nothing another user controls ([`trusted`]).
//! Nothing here knows about facts or rules: this layer reads, `facts` derives.

pub mod bond;
pub mod bridge;
pub mod cpu;
mod error;
pub mod firewall;
pub mod host;
pub mod iface;
pub mod inventory;
pub mod ip_tunnel;
pub mod link;
pub mod prefix;
pub mod process;
pub mod route;
pub mod route_table;
pub mod sysctl;
pub mod tinc;
pub mod trusted;
pub mod tunnel;
pub mod tunnel_type;
pub mod uplink;
pub mod vpncloud;
pub mod wireguard;

pub use error::{Error, Result};

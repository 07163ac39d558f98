//! Test-lab harness for netdoctor's integration tests.
//!
//! Builds real, throw-away network topologies on the local machine (network
//! namespaces, veth pairs, routers, userspace WireGuard tunnels, nft packet
//! loss), drives traffic through them (`ping`, `iperf3`) and reads counters,
//! then tears everything down on `Drop`, also when a test panics.
//!
//! Every test that uses the lab must start with a requirement check, which
//! skips on a developer laptop without privileges but fails loudly in CI:
//!
//! ```no_run
//! use netdoctor_lab::{ci, LineTopology, LineConfig, traffic};
//!
//! # fn main() -> anyhow::Result<()> {
//! if !ci::require_root_or_skip() {
//!     return Ok(());
//! }
//! let line = LineTopology::new(&LineConfig::default())?;
//! let report = traffic::ping(&line.client, LineTopology::SERVER_IP, &traffic::PingOpts::default())?;
//! assert_eq!(report.received, report.transmitted);
//! # Ok(())
//! # }
//! ```
//!
//! Commands run inside a namespace through `nsenter --net=/run/netns/NAME`
//! (not `ip netns exec`, which remounts `/sys` and hides bpffs). Only
//! addresses inside the namespaces are used (10.200.0.0/16, 10.201.0.0/16,
//! 10.250.0.0/16); no traffic leaves the machine.

#![warn(missing_docs)]

pub mod agent;
pub mod attached;
pub mod bpf;
pub mod bridge;
pub mod cgroup;
pub mod chart;
pub mod ci;
pub mod cmd;
pub mod dashboard;
pub mod delay;
pub mod diagnosis;
pub mod grafana;
mod ids;
pub mod kernel_lane;
pub mod loss;
pub mod netdoctor;
pub mod netns;
pub mod observe;
pub mod packet;
pub mod podman;
pub mod proc_usage;
pub mod prometheus;
pub mod stats;
pub mod tailscale;
pub mod topology;
pub mod topology6;
pub mod traffic;
pub mod udp_stream;
pub mod units;
pub mod veth;
pub mod vpncloud;
pub mod wait;
pub mod wireguard;

pub use cmd::BgProcess;
pub use loss::{Direction, PacketLoss};
pub use netns::{cleanup_stale, Netns};
pub use stats::{interface_stats, IfStats};
pub use topology::{LineConfig, LineTopology, PairTopology};
pub use traffic::{Iperf3Opts, Iperf3Report, Iperf3Server, PingOpts, PingReport};
pub use veth::{Veth, VethEnd};
pub use wireguard::{wg_over_pair, WgConfig, WgInterface, WgTunnel};

//! Traffic generators: `ping` and `iperf3` (JSON output parsed).
//!
//! ```no_run
//! use netdoctor_lab::{traffic, LineTopology, LineConfig, Iperf3Opts, Iperf3Server};
//! # fn main() -> anyhow::Result<()> {
//! let line = LineTopology::new(&LineConfig::default())?;
//! let _server = Iperf3Server::start(&line.server, 5201)?;
//! let mut opts = Iperf3Opts::new(LineTopology::SERVER_IP);
//! opts.congestion = Some("cubic".into());
//! let report = traffic::iperf3_client(&line.client, &opts)?;
//! println!("{} bit/s, {:?} retransmits", report.received_bits_per_second, report.retransmits);
//! # Ok(())
//! # }
//! ```

mod iperf3;
mod ping;

pub use iperf3::{iperf3_client, parse_iperf3, Iperf3Opts, Iperf3Report, Iperf3Server};
pub use ping::{parse_ping, ping, wait_for_ping, PingOpts, PingReport};

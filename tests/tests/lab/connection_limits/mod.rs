//! What limits each connection (issue 30), end to end on this host: `netdoctor diagnose` and
//! `netdoctor flows --json` in a namespace sending through a 40 ms path (a delay line: this
//! kernel has no netem) to another, real iperf3 traffic, real BPF.
//!
//! - [`window`]: a receiver whose `net.ipv4.tcp_rmem` caps its window far below what the path
//!   carries → `receiver_window` and `tcp.receive_window_limited` with the tcp_rmem that lifts
//!   it; twins: the same receiver with an application-limited sender (`iperf3 -b`), and
//!   default buffers; `flows --json` gives every connection its limit and share.
//! - [`buffer`]: a sender whose `net.ipv4.tcp_wmem` caps its send buffer → `send_buffer` and
//!   `tcp.send_buffer_limited` with the tcp_wmem that lifts it.
//!
//! Needs root, BPF, iperf3; skips elsewhere, fails under CI=true. Build the binary first:
//! `cargo build -p netdoctor`.

mod buffer;
mod window;

use std::time::Duration;

use anyhow::{Context, Result};
use netdoctor_lab::delay::DelayLine;
use netdoctor_lab::diagnosis::Diagnosis;
use netdoctor_lab::{observe, traffic, Iperf3Opts, Iperf3Report, Iperf3Server, PairTopology};
use serde_json::Value;

/// The sender's end of the delayed path.
pub(crate) const A_IP: &str = "10.202.0.1";
/// The receiver's end.
pub(crate) const B_IP: &str = "10.202.0.2";
pub(crate) const PORT: u16 = 5201;
/// Half the round trip.
const ONE_WAY: Duration = Duration::from_millis(20);
/// The observation window.
pub(crate) const WINDOW_SECS: u64 = 5;
/// The limits a connection can have.
pub(crate) const LIMITS: [&str; 5] = [
    "receiver_window",
    "send_buffer",
    "congestion",
    "application",
    "unknown",
];

/// Two namespaces joined by a 40 ms path, an iperf3 server on the far end.
pub(crate) struct Path {
    pub(crate) pair: PairTopology,
    _line: DelayLine,
    _server: Iperf3Server,
}

impl Path {
    /// The path, with `rmem` as the receiver's `net.ipv4.tcp_rmem` and `wmem` as the
    /// sender's `net.ipv4.tcp_wmem` when given.
    pub(crate) fn new(rmem: Option<&str>, wmem: Option<&str>) -> Result<Path> {
        let pair = PairTopology::new(1500)?;
        let line = DelayLine::new(&pair.a, A_IP, &pair.b, B_IP, ONE_WAY)?;
        if let Some(r) = rmem {
            pair.b.sysctl("net.ipv4.tcp_rmem", r)?;
        }
        if let Some(w) = wmem {
            pair.a.sysctl("net.ipv4.tcp_wmem", w)?;
        }
        let server = Iperf3Server::start(&pair.b, PORT)?;
        traffic::wait_for_ping(&pair.a, B_IP, Duration::from_secs(5))?;
        Ok(Path {
            pair,
            _line: line,
            _server: server,
        })
    }

    /// iperf3 from the sender: `parallel` streams, past the window's end, with `extra`.
    pub(crate) fn iperf(&self, parallel: u32, extra: &[&str]) -> Result<Iperf3Report> {
        let mut opts = Iperf3Opts::new(B_IP);
        opts.port = PORT;
        opts.parallel = parallel;
        opts.duration_secs = u32::try_from(WINDOW_SECS + 2).unwrap_or(7);
        opts.extra_args = extra.iter().map(|s| (*s).to_owned()).collect();
        traffic::iperf3_client(&self.pair.a, &opts)
    }

    /// `diagnose` of the sender's end of the path while `load` runs.
    pub(crate) fn diagnose<T: Send>(
        &self,
        load: impl FnOnce() -> Result<T> + Send,
    ) -> Result<(Diagnosis, T)> {
        observe::diagnose_during(
            &self.pair.a,
            DelayLine::IFNAME,
            Duration::from_secs(WINDOW_SECS),
            &["--no-probe"],
            load,
        )
    }
}

/// iperf3's server, as flows name their remote end.
pub(crate) fn server() -> String {
    format!("{B_IP}:{PORT}")
}

pub(crate) fn num(v: &Value, key: &str) -> Result<f64> {
    v[key]
        .as_f64()
        .with_context(|| format!("{key} is not a number in {v}"))
}

pub(crate) fn text<'a>(v: &'a Value, key: &str) -> Result<&'a str> {
    v[key]
        .as_str()
        .with_context(|| format!("{key} is not a string in {v}"))
}

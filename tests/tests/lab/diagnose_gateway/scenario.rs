//! What every scenario shares: its observation window, the diagnosis held to the
//! scenario's traffic, and that traffic (iperf3, ping).

use std::time::Duration;

use anyhow::Result;
use netdoctor_lab::diagnosis::Diagnosis;
use netdoctor_lab::observe;
use netdoctor_lab::{traffic, Iperf3Opts, Iperf3Report, Netns, PingOpts, PingReport};

/// Observation window of TCP scenarios.
pub(crate) const TCP_WINDOW_SECS: u32 = 4;
/// Observation window of ping scenarios.
pub(crate) const PING_WINDOW_SECS: u32 = 3;
/// Observation window of WireGuard scenarios: wireguard-go resends an unanswered
/// initiation every ~5 s.
pub(crate) const WG_WINDOW_SECS: u32 = 6;
/// iperf3 bitrate cap: keeps the 2-core machine from saturating (parallel tests) so the
/// loss-free twins see no queue-induced retransmissions; lossy CUBIC stays far below it.
const BITRATE: &str = "300M";
pub(crate) const IPERF_PORT: u16 = 5201;

/// `netdoctor diagnose IFACE --duration WINDOW --json EXTRA...` inside `ns` while `load`
/// (the scenario's traffic) runs, held to its time ([`observe::diagnose_during`]).
pub(crate) fn diagnose_during<T, F>(
    ns: &Netns,
    iface: &str,
    window_secs: u32,
    extra: &[&str],
    load: F,
) -> Result<(Diagnosis, T)>
where
    T: Send,
    F: FnOnce() -> Result<T> + Send,
{
    let window = Duration::from_secs(u64::from(window_secs));
    observe::diagnose_during(ns, iface, window, extra, load)
}

/// An iperf3 client from `ns` to `server` with congestion control `cc` (system default if
/// `None`), lasting past the observation window so the connection is open at its end.
pub(crate) fn iperf(
    ns: &Netns,
    server: &str,
    cc: Option<&str>,
    window_secs: u32,
) -> Result<Iperf3Report> {
    let mut opts = Iperf3Opts::new(server);
    opts.port = IPERF_PORT;
    opts.duration_secs = window_secs + 3;
    opts.congestion = cc.map(str::to_owned);
    opts.bitrate = Some(BITRATE.to_owned());
    traffic::iperf3_client(ns, &opts)
}

/// Pings `dst` from `ns` every 0.2 s for the window plus one second.
pub(crate) fn ping_window(ns: &Netns, dst: &str, window_secs: u32) -> Result<PingReport> {
    let opts = PingOpts {
        count: window_secs * 5 + 5,
        interval_secs: 0.2,
        ..PingOpts::default()
    };
    traffic::ping(ns, dst, &opts)
}

/// At least 80 % of the echoes answered. Not all: on this 2-core machine, busy with
/// parallel tests, wireguard-go replies were measured up to 0.9 s late (with and without
/// netdoctor running), and ping counts a reply that misses its final wait as lost.
pub(crate) fn mostly_answered(ping: &PingReport) -> bool {
    ping.transmitted > 0 && ping.received * 10 >= ping.transmitted * 8
}

//! What limits each connection over a window, from the kernel's chronographs
//! (`tcp_get_info_chrono_stats()`): the share of the window the connection spent busy
//! (sending at the pace of its congestion window or the network), limited by the peer's
//! receive window, limited by its own send buffer, or idle (nothing to send: the
//! application); then one dominant limit with its share, and for a window-limited
//! connection the ceiling that window allows and the window the path would need.
//!
//! The rate "the path has shown", against which a window's ceiling is judged, is the
//! highest of two rates measured in the window, never a link speed: what every connection
//! to the same remote host carried together (bytes acknowledged over the window), and the
//! fastest of them while it was sending (bytes acknowledged over its time busy or
//! window-limited). A single connection alone on its path shows no more than its own
//! ceiling: its limit is reported, but nothing says the path would carry more.

use std::collections::HashMap;
use std::net::IpAddr;

use serde::Serialize;

use super::{Clock, Socket};

/// Fewer bytes acknowledged in the window than this, and fewer data segments sent than
/// [`MIN_SEGMENTS`], is too little traffic to say what limits a connection.
pub const MIN_ACKED_BYTES: u64 = 64 * 1024;

/// See [`MIN_ACKED_BYTES`]: 45 full-size segments are 64 KiB.
pub const MIN_SEGMENTS: u64 = 45;

/// Less sending time than this (ms) is a few ticks of the chronographs: too coarse to
/// divide by, so the sending rate is then the window's average.
const MIN_SENDING_MS: f64 = 100.0;

/// The share of its send buffer's memory a connection's data fills when nothing says
/// otherwise: the kernel sizes the buffer at twice the congestion window's skb memory
/// (`tcp_sndbuf_expand`).
const DEFAULT_DATA_PER_BUFFER: f64 = 0.5;

/// What held a connection back during the window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Limit {
    /// Data waited for the peer's receive window.
    ReceiverWindow,
    /// The application waited for room in the send buffer, everything in it sent.
    SendBuffer,
    /// Sending at the pace of the congestion window or the network (busy).
    Congestion,
    /// Nothing to send: the application did not write faster.
    Application,
    /// Too little traffic to say.
    #[default]
    Unknown,
}

impl Limit {
    /// Every limit, in the order reports list them.
    pub const ALL: [Limit; 5] = [
        Limit::ReceiverWindow,
        Limit::SendBuffer,
        Limit::Congestion,
        Limit::Application,
        Limit::Unknown,
    ];

    /// The name documents and metrics use (`receiver_window`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Limit::ReceiverWindow => "receiver_window",
            Limit::SendBuffer => "send_buffer",
            Limit::Congestion => "congestion",
            Limit::Application => "application",
            Limit::Unknown => "unknown",
        }
    }
}

impl std::fmt::Display for Limit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The window's bounds in the kernel's clocks.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Window {
    /// Length, seconds.
    pub secs: f64,
    /// When it began (the baseline snapshot), if socket snapshots carry clocks.
    pub start: Option<Clock>,
    /// The kernel's HZ, if measured.
    pub hz: Option<f64>,
}

impl Window {
    /// A window of `secs` seconds without clocks: no chronograph shares.
    pub fn secs(secs: f64) -> Self {
        Window {
            secs,
            ..Window::default()
        }
    }
}

/// What limited one connection over the window (flattened into its row).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Limits {
    /// The dominant limit.
    pub limit: Limit,
    /// Its share of the time the connection was observed, 0 to 1.
    pub limit_share: f64,
    /// Share of the time sending at the pace of the congestion window or the network.
    pub busy_share: f64,
    /// Share of the time waiting for the peer's receive window.
    pub rwnd_limited_share: f64,
    /// Share of the time waiting for send buffer space.
    pub sndbuf_limited_share: f64,
    /// Share of the time with nothing to send.
    pub idle_share: f64,
    /// How long the connection was observed in the window (from its start, or the
    /// window's, to its close, or the window's end), ms; -1 unknown.
    pub observed_ms: f64,
    /// Time busy in the window, ms (-1: the kernel's HZ is not measured yet).
    pub busy_ms: f64,
    /// Time limited by the peer's receive window, ms (-1 unknown).
    pub rwnd_limited_ms: f64,
    /// Time limited by the send buffer, ms (-1 unknown).
    pub sndbuf_limited_ms: f64,
    /// Retransmitted in the window: a congestion limit under loss.
    pub under_loss: bool,
    /// Bits acknowledged per second of sending time (busy or window-limited); the window's
    /// average when that time is unknown or under 100 ms.
    pub sending_rate_bps: f64,
    /// The window that set the ceiling, bytes: the largest window the peer advertised
    /// (receiver_window), the data the send buffer holds when full (send_buffer); -1.
    pub window_bytes: i64,
    /// What that window allows: window / srtt, bits per second; -1.
    pub ceiling_bps: f64,
    /// The rate the path has shown in the window, bits per second (see the module doc).
    pub path_rate_bps: f64,
    /// The window that rate needs at this srtt (bandwidth-delay product), bytes; -1.
    pub needed_window_bytes: i64,
    /// The receiving end is a socket of this host (its window is this host's to change).
    pub receiver_local: bool,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            limit: Limit::Unknown,
            limit_share: 0.0,
            busy_share: 0.0,
            rwnd_limited_share: 0.0,
            sndbuf_limited_share: 0.0,
            idle_share: 0.0,
            observed_ms: -1.0,
            busy_ms: -1.0,
            rwnd_limited_ms: -1.0,
            sndbuf_limited_ms: -1.0,
            under_loss: false,
            sending_rate_bps: 0.0,
            window_bytes: -1,
            ceiling_bps: -1.0,
            path_rate_bps: 0.0,
            needed_window_bytes: -1,
            receiver_local: false,
        }
    }
}

/// The chronographs' shares for a connection last seen as `end` and seen as `start` at the
/// window's beginning (None: it opened during the window, or was not seen then).
pub fn shares(start: Option<&Socket>, end: &Socket, window: &Window) -> Limits {
    let mut out = Limits::default();
    let Some(begin) = start_jiffies(start, end, window) else {
        return out;
    };
    let span = end.clock.jiffies.saturating_sub(begin);
    if span == 0 {
        return out;
    }
    let [busy, rwnd, sndbuf] = end
        .chrono
        .since(&start.map(|s| s.chrono).unwrap_or_default());
    let share = |j: u32| (f64::from(j) / span as f64).min(1.0);
    out.busy_share = share(busy);
    out.rwnd_limited_share = share(rwnd);
    out.sndbuf_limited_share = share(sndbuf);
    out.idle_share =
        (1.0 - out.busy_share - out.rwnd_limited_share - out.sndbuf_limited_share).max(0.0);
    if let Some(hz) = window.hz.filter(|hz| *hz > 0.0) {
        let ms = |j: f64| j * 1000.0 / hz;
        out.observed_ms = ms(span as f64);
        out.busy_ms = ms(f64::from(busy));
        out.rwnd_limited_ms = ms(f64::from(rwnd));
        out.sndbuf_limited_ms = ms(f64::from(sndbuf));
    }
    out
}

/// Where the connection's part of the window begins, in jiffies: its figures at the
/// window's start, else the later of the window's start and its opening.
fn start_jiffies(start: Option<&Socket>, end: &Socket, window: &Window) -> Option<u64> {
    if let Some(s) = start {
        return Some(s.clock.jiffies);
    }
    let window_start = window.start?.jiffies;
    let born = match (end.born_ns, window.hz) {
        (Some(born), Some(hz)) => {
            let age_s = end.clock.ns.saturating_sub(born) as f64 / 1e9;
            end.clock
                .jiffies
                .saturating_sub((age_s * hz).round() as u64)
        }
        _ => 0,
    };
    Some(window_start.max(born))
}

/// One connection's figures that classifying needs, besides its shares.
#[derive(Debug, Clone, Copy)]
pub struct Traffic<'a> {
    /// Its latest figures.
    pub socket: &'a Socket,
    /// Its figures at the window's start, if it existed then.
    pub start: Option<&'a Socket>,
    /// Closed during the window.
    pub closed: bool,
    /// Bytes acknowledged in the window.
    pub acked: u64,
    /// Data segments sent in the window.
    pub segments: u64,
    /// Segments retransmitted in the window.
    pub retransmits: u64,
    /// Bits acknowledged per second over the window.
    pub throughput_bps: f64,
}

/// The dominant limit of one connection from its shares, and its sending rate.
pub fn dominant(limits: &mut Limits, t: &Traffic<'_>) {
    limits.under_loss = t.retransmits > 0;
    let sending_ms = limits.busy_ms + limits.rwnd_limited_ms + limits.sndbuf_limited_ms;
    limits.sending_rate_bps = if limits.busy_ms >= 0.0 && sending_ms >= MIN_SENDING_MS {
        t.acked as f64 * 8.0 / (sending_ms / 1000.0)
    } else {
        t.throughput_bps
    };
    let too_little = t.acked < MIN_ACKED_BYTES && t.segments < MIN_SEGMENTS;
    // Shares that were measured add up to the whole (idle is the rest).
    let measured = limits.busy_share
        + limits.rwnd_limited_share
        + limits.sndbuf_limited_share
        + limits.idle_share
        > 0.0;
    if too_little || !measured {
        limits.limit = Limit::Unknown;
        limits.limit_share = 0.0;
        return;
    }
    // A paced sender (bbr) held by the peer's window splits that time between the two
    // chronographs: each pacing wait stops the receiver-window one (tcp_write_xmit checks
    // the pacing first), so the kernel counts it busy. When the window was smaller than
    // the congestion window with data waiting, at the window's end and at its start, the
    // busy time was the window's too.
    let window_bound = !t.closed
        && limits.rwnd_limited_share >= MIN_RWND_SHARE_PACED
        && window_bound(t.socket)
        && t.start.is_none_or(window_bound);
    let (rwnd, busy) = if window_bound {
        (limits.rwnd_limited_share + limits.busy_share, 0.0)
    } else {
        (limits.rwnd_limited_share, limits.busy_share)
    };
    let candidates = [
        (Limit::ReceiverWindow, rwnd),
        (Limit::SendBuffer, limits.sndbuf_limited_share),
        (Limit::Congestion, busy),
        (Limit::Application, limits.idle_share),
    ];
    let (mut limit, mut share) = candidates[0];
    for (l, s) in candidates.into_iter().skip(1) {
        if s > share {
            (limit, share) = (l, s);
        }
    }
    // Busy with data in flight, yet the delivery samples were application-limited at
    // the window's end or start: the sender trickled at the application's pace (a paced or
    // request-response sender on a long path). Figures at close say nothing of this: the
    // end of every transfer is application-limited.
    if limit == Limit::Congestion
        && !t.closed
        && (app_paced(t.socket) || t.start.is_some_and(app_paced))
    {
        limit = Limit::Application;
        share = limits.busy_share + limits.idle_share;
    }
    limits.limit = limit;
    limits.limit_share = share;
}

/// A receiver-window-limited share from which a full window at both ends of the window
/// makes the busy time the window's too (see [`dominant`]).
const MIN_RWND_SHARE_PACED: f64 = 0.1;

/// The peer's window binds now: data waits to be sent and the window is smaller than the
/// congestion window, so it, not the congestion window, caps what may be in flight.
fn window_bound(s: &Socket) -> bool {
    s.notsent_bytes > 0 && u64::from(s.snd_wnd) < u64::from(s.cwnd) * u64::from(s.mss)
}

/// The application sets the pace now: the kernel marked the delivery samples
/// application-limited (it does when less than a segment waits to be sent and the
/// congestion window is not full: `tcp_rate_check_app_limited`), and less than a congestion
/// window of data waits (a sender with a backlog is never the application's).
fn app_paced(s: &Socket) -> bool {
    s.delivery_rate_app_limited && u64::from(s.notsent_bytes) < u64::from(s.cwnd) * u64::from(s.mss)
}

/// The data a full send buffer holds, bytes: its size scaled by how much of its memory
/// data filled at the snapshot (skb overhead takes the rest), else by half.
fn send_buffer_data(s: &Socket) -> f64 {
    let data = f64::from(s.unacked_bytes) + f64::from(s.notsent_bytes);
    let ratio = if s.wmem_queued >= 4096 && data > 0.0 {
        (data / f64::from(s.wmem_queued)).clamp(0.25, 1.0)
    } else {
        DEFAULT_DATA_PER_BUFFER
    };
    f64::from(s.sndbuf) * ratio
}

/// For a window-limited connection: the window, its ceiling, the path's rate and the
/// window that rate needs. `path_rate_bps` is what the path to its host has shown.
pub fn ceiling(limits: &mut Limits, s: &Socket, path_rate_bps: f64, receiver_local: bool) {
    limits.path_rate_bps = path_rate_bps;
    let window = match limits.limit {
        Limit::ReceiverWindow => f64::from(s.max_window.max(s.snd_wnd)),
        Limit::SendBuffer => send_buffer_data(s),
        _ => return,
    };
    limits.receiver_local = receiver_local;
    limits.window_bytes = window.round() as i64;
    let srtt_s = f64::from(s.srtt_us) / 1e6;
    if srtt_s <= 0.0 || window <= 0.0 {
        return;
    }
    limits.ceiling_bps = window * 8.0 / srtt_s;
    limits.needed_window_bytes = (path_rate_bps / 8.0 * srtt_s).ceil() as i64;
}

/// What the path to each remote host has shown in the window (see the module doc), from
/// every connection's (remote host, throughput over the window, sending rate).
pub fn path_rates(rows: &[(IpAddr, f64, f64)]) -> HashMap<IpAddr, f64> {
    let mut together: HashMap<IpAddr, f64> = HashMap::new();
    let mut fastest: HashMap<IpAddr, f64> = HashMap::new();
    for (host, throughput, sending) in rows {
        *together.entry(*host).or_default() += throughput;
        let f = fastest.entry(*host).or_default();
        *f = f.max(*sending);
    }
    together
        .into_iter()
        .map(|(host, sum)| (host, sum.max(fastest.get(&host).copied().unwrap_or(0.0))))
        .collect()
}

#[cfg(test)]
mod tests;

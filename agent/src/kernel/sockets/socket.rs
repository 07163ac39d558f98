//! Plain types for TCP sockets.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use serde::Serialize;

use crate::kernel::bpf::sockets::types::{
    nd_retrans_stats, nd_sock_close, nd_sock_info, nd_sock_key,
};

/// One TCP connection as the kernel sees it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Socket {
    /// Socket cookie: the kernel's unique id for this socket.
    pub cookie: u64,
    /// Local address and port (IPv4-mapped IPv6 shown as IPv4).
    pub local: SocketAddr,
    /// Remote address and port.
    pub remote: SocketAddr,
    /// TCP state name, e.g. "established".
    pub state: &'static str,
    /// Egress interface index (cached route, else bound device; 0 if unknown).
    pub ifindex: u32,
    /// Congestion control algorithm, e.g. "cubic" or "bbr".
    pub cc: String,
    /// Congestion-avoidance state: open, disorder, cwr, recovery, loss.
    pub ca_state: &'static str,
    /// Smoothed RTT in microseconds.
    pub srtt_us: u32,
    /// RTT variation in microseconds.
    pub rttvar_us: u32,
    /// Minimum RTT seen, microseconds.
    pub min_rtt_us: u32,
    /// Congestion window, segments.
    pub cwnd: u32,
    /// Slow-start threshold, segments (huge until the first loss).
    pub ssthresh: u32,
    /// Segments retransmitted over the connection's life.
    pub total_retrans: u32,
    /// Segments currently considered lost.
    pub lost: u32,
    /// Segments currently retransmitted and unacknowledged.
    pub retrans_out: u32,
    /// Segments sent (data and control).
    pub segs_out: u32,
    /// Data segments sent.
    pub data_segs_out: u32,
    /// Current MSS.
    pub mss: u32,
    /// Path MTU the socket uses.
    pub pmtu: u32,
    /// Reordering metric (3 by default; higher means reordering was seen).
    pub reordering: u32,
    /// Delivery rate estimate, bits per second.
    pub delivery_rate_bps: u64,
    /// Bytes acknowledged by the peer.
    pub bytes_acked: u64,
    /// Bytes received from the peer.
    pub bytes_received: u64,
    /// Bytes sent, retransmissions included.
    pub bytes_sent: u64,
    /// Bytes retransmitted.
    pub bytes_retrans: u64,
    /// Whether TCP MTU probing (RFC 4821) is active on this socket.
    pub mtu_probing: bool,
    /// The peer's advertised window, bytes (`tcpi_snd_wnd`).
    pub snd_wnd: u32,
    /// The largest window the peer ever advertised, bytes.
    pub max_window: u32,
    /// The window this end advertises, bytes (`tcpi_rcv_wnd`).
    pub rcv_wnd: u32,
    /// The largest window this end will advertise, bytes.
    pub window_clamp: u32,
    /// This end's current window threshold, bytes (`tcpi_rcv_ssthresh`).
    pub rcv_ssthresh: u32,
    /// The send buffer's size, bytes of kernel memory (`SO_SNDBUF`, autotuned up to
    /// `net.ipv4.tcp_wmem`'s maximum).
    pub sndbuf: u32,
    /// The receive buffer's size, bytes of kernel memory.
    pub rcvbuf: u32,
    /// Send buffer memory in use, bytes.
    pub wmem_queued: u32,
    /// Bytes written by the application and not sent yet (`tcpi_notsent_bytes`).
    pub notsent_bytes: u32,
    /// Bytes sent and not acknowledged yet.
    pub unacked_bytes: u32,
    /// Segments delivered (`tcpi_delivered`).
    pub delivered: u32,
    /// The last delivery-rate sample was application-limited
    /// (`tcpi_delivery_rate_app_limited`).
    pub delivery_rate_app_limited: bool,
    /// Segments the peer reported received twice (DSACK).
    pub dsack_dups: u32,
    /// Reordering events seen.
    pub reord_seen: u32,
    /// The kernel's chronographs: time spent in each sending state.
    #[serde(skip)]
    pub chrono: Chrono,
    /// When the figures were read.
    #[serde(skip)]
    pub clock: Clock,
    /// When netdoctor saw the connection open (`bpf_ktime_get_ns`), if it did.
    #[serde(skip)]
    pub born_ns: Option<u64>,
}

/// The time a connection spent in each sending state since it opened, as
/// `tcp_get_info_chrono_stats()` keeps it: jiffies, the running state's time included.
/// Each counter is 32 bits and wraps; differences are taken wrapping.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Chrono {
    /// Sending, limited by neither the peer's window nor the send buffer: the congestion
    /// window, the pacing rate or the network sets the pace (`TCP_CHRONO_BUSY`).
    pub busy: u32,
    /// Data waiting for the peer's window (`TCP_CHRONO_RWND_LIMITED`).
    pub rwnd_limited: u32,
    /// Everything written was sent and the application waits for send buffer space
    /// (`TCP_CHRONO_SNDBUF_LIMITED`).
    pub sndbuf_limited: u32,
    /// The running state: 0 idle, 1 busy, 2 receiver-window-limited, 3 send-buffer-limited.
    pub state: u8,
}

impl Chrono {
    /// The time in each state since `earlier` (busy, rwnd-limited, sndbuf-limited).
    pub fn since(&self, earlier: &Chrono) -> [u32; 3] {
        [
            self.busy.wrapping_sub(earlier.busy),
            self.rwnd_limited.wrapping_sub(earlier.rwnd_limited),
            self.sndbuf_limited.wrapping_sub(earlier.sndbuf_limited),
        ]
    }
}

/// A moment in the kernel's two clocks: jiffies (what the chronographs count) and the
/// monotonic clock in nanoseconds. Two moments give the kernel's HZ.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Clock {
    /// `bpf_jiffies64()`.
    pub jiffies: u64,
    /// `bpf_ktime_get_ns()`.
    pub ns: u64,
}

/// The tick rates Linux is configured with (`CONFIG_HZ`) on the architectures it runs on.
const KNOWN_HZ: [f64; 9] = [
    24.0, 48.0, 100.0, 128.0, 250.0, 256.0, 300.0, 1000.0, 1024.0,
];

impl Clock {
    /// The kernel's tick rate measured between `earlier` and `self`: the nearest configured
    /// rate within 2 %, else the measurement itself; `None` under 200 ms apart (a tick of
    /// error is then too much).
    pub fn hz_since(&self, earlier: &Clock) -> Option<f64> {
        let ns = self.ns.checked_sub(earlier.ns)?;
        let jiffies = self.jiffies.checked_sub(earlier.jiffies)?;
        if ns < 200_000_000 {
            return None;
        }
        let measured = jiffies as f64 * 1e9 / ns as f64;
        Some(
            KNOWN_HZ
                .into_iter()
                .find(|hz| (measured - hz).abs() <= hz * 0.02)
                .unwrap_or(measured),
        )
    }
}

/// A connection that closed, with its last figures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClosedSocket {
    /// The figures at close.
    #[serde(flatten)]
    pub socket: Socket,
    /// How long it lived, if netdoctor saw it open.
    pub duration_ms: Option<u64>,
    /// The state it closed from.
    pub closed_from: &'static str,
}

/// Retransmissions of one connection, aggregated by the tcp_retransmit_skb tracepoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RetransStats {
    /// Local address and port.
    pub local: SocketAddr,
    /// Remote address and port.
    pub remote: SocketAddr,
    /// Retransmission events (skbs).
    pub events: u64,
    /// Segments retransmitted.
    pub segments: u64,
    /// Bytes retransmitted.
    pub bytes: u64,
    /// Of those segments, full-MSS ones: a PMTU blackhole retransmits these endlessly.
    pub full_segments: u64,
    /// Shorter ones.
    pub small_segments: u64,
    /// Egress interface index at the last retransmission.
    pub ifindex: u32,
    /// MSS at the last retransmission.
    pub mss: u32,
}

fn ip(family: u8, raw: &[u8; 16]) -> IpAddr {
    if family == 4 {
        return IpAddr::V4(Ipv4Addr::new(raw[0], raw[1], raw[2], raw[3]));
    }
    let v6 = Ipv6Addr::from(*raw);
    v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4)
}

fn endpoints(k: &nd_sock_key) -> (SocketAddr, SocketAddr) {
    (
        SocketAddr::new(ip(k.family, &k.saddr), k.sport),
        SocketAddr::new(ip(k.family, &k.daddr), k.dport),
    )
}

/// Name of a TCP state number (include/net/tcp_states.h).
pub fn state_name(state: u32) -> &'static str {
    match state {
        1 => "established",
        2 => "syn-sent",
        3 => "syn-recv",
        4 => "fin-wait-1",
        5 => "fin-wait-2",
        6 => "time-wait",
        7 => "close",
        8 => "close-wait",
        9 => "last-ack",
        10 => "listen",
        11 => "closing",
        12 => "new-syn-recv",
        _ => "unknown",
    }
}

fn ca_state_name(state: u8) -> &'static str {
    match state {
        0 => "open",
        1 => "disorder",
        2 => "cwr",
        3 => "recovery",
        4 => "loss",
        _ => "unknown",
    }
}

impl Socket {
    pub(crate) fn from_raw(r: &nd_sock_info) -> Self {
        let (local, remote) = endpoints(&r.key);
        let cc_bytes: Vec<u8> =
            r.cc.iter()
                .take_while(|c| **c != 0)
                .map(|c| *c as u8)
                .collect();
        // delivered segments * MSS per interval, as ss(8) computes delivery_rate.
        let delivery_rate_bps = if r.rate_interval_us > 0 {
            u64::from(r.rate_delivered) * u64::from(r.mss_cache) * 8 * 1_000_000
                / u64::from(r.rate_interval_us)
        } else {
            0
        };
        Socket {
            cookie: r.cookie,
            local,
            remote,
            state: state_name(r.state),
            ifindex: r.ifindex,
            cc: String::from_utf8_lossy(&cc_bytes).into_owned(),
            ca_state: ca_state_name(r.ca_state),
            srtt_us: r.srtt_us,
            rttvar_us: r.rttvar_us,
            min_rtt_us: r.min_rtt_us,
            cwnd: r.snd_cwnd,
            ssthresh: r.snd_ssthresh,
            total_retrans: r.total_retrans,
            lost: r.lost_out,
            retrans_out: r.retrans_out,
            segs_out: r.segs_out,
            data_segs_out: r.data_segs_out,
            mss: r.mss_cache,
            pmtu: r.pmtu,
            reordering: r.reordering,
            delivery_rate_bps,
            bytes_acked: r.bytes_acked,
            bytes_received: r.bytes_received,
            bytes_sent: r.bytes_sent,
            bytes_retrans: r.bytes_retrans,
            mtu_probing: r.mtu_probing != 0,
            snd_wnd: r.snd_wnd,
            max_window: r.max_window,
            rcv_wnd: r.rcv_wnd,
            window_clamp: r.window_clamp,
            rcv_ssthresh: r.rcv_ssthresh,
            sndbuf: u32::try_from(r.sndbuf).unwrap_or(0),
            rcvbuf: u32::try_from(r.rcvbuf).unwrap_or(0),
            wmem_queued: u32::try_from(r.wmem_queued).unwrap_or(0),
            notsent_bytes: r.notsent_bytes,
            unacked_bytes: r.unacked_bytes,
            delivered: r.delivered,
            delivery_rate_app_limited: r.rate_app_limited != 0,
            dsack_dups: r.dsack_dups,
            reord_seen: r.reord_seen,
            chrono: Chrono {
                busy: r.chrono_busy,
                rwnd_limited: r.chrono_rwnd_limited,
                sndbuf_limited: r.chrono_sndbuf_limited,
                state: r.chrono_type,
            },
            clock: Clock {
                jiffies: r.jiffies,
                ns: r.now_ns,
            },
            born_ns: (r.born_ns > 0).then_some(r.born_ns),
        }
    }
}

#[cfg(test)]
impl Socket {
    /// An established cubic connection 10.0.0.1:40000 -> 10.0.0.2:5201 out of interface 3
    /// with no traffic, for tests to change.
    pub(crate) fn sample(cookie: u64) -> Socket {
        Socket {
            cookie,
            local: SocketAddr::from(([10, 0, 0, 1], 40000)),
            remote: SocketAddr::from(([10, 0, 0, 2], 5201)),
            state: "established",
            ifindex: 3,
            cc: "cubic".into(),
            ca_state: "open",
            srtt_us: 1000,
            rttvar_us: 100,
            min_rtt_us: 900,
            cwnd: 10,
            ssthresh: 7,
            total_retrans: 0,
            lost: 0,
            retrans_out: 0,
            segs_out: 0,
            data_segs_out: 0,
            mss: 1448,
            pmtu: 1500,
            reordering: 3,
            delivery_rate_bps: 0,
            bytes_acked: 0,
            bytes_received: 0,
            bytes_sent: 0,
            bytes_retrans: 0,
            mtu_probing: false,
            snd_wnd: 65535,
            max_window: 65535,
            rcv_wnd: 65535,
            window_clamp: 65535,
            rcv_ssthresh: 65535,
            sndbuf: 87040,
            rcvbuf: 131072,
            wmem_queued: 0,
            notsent_bytes: 0,
            unacked_bytes: 0,
            delivered: 0,
            delivery_rate_app_limited: false,
            dsack_dups: 0,
            reord_seen: 0,
            chrono: Chrono::default(),
            clock: Clock::default(),
            born_ns: None,
        }
    }
}

impl ClosedSocket {
    pub(crate) fn from_raw(r: &nd_sock_close) -> Self {
        ClosedSocket {
            socket: Socket::from_raw(&r.info),
            duration_ms: (r.duration_ns > 0).then_some(r.duration_ns / 1_000_000),
            closed_from: state_name(r.old_state),
        }
    }
}

impl RetransStats {
    pub(crate) fn from_raw(k: &nd_sock_key, v: &nd_retrans_stats) -> Self {
        let (local, remote) = endpoints(k);
        RetransStats {
            local,
            remote,
            events: v.events,
            segments: v.segs,
            bytes: v.bytes,
            full_segments: v.full_segs,
            small_segments: v.small_segs,
            ifindex: v.ifindex,
            mss: v.mss,
        }
    }
}

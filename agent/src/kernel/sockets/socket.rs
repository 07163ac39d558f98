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

//! ICMP "fragmentation needed" and ICMPv6 "packet too big" messages seen by the data
//! plane: who reported a smaller path MTU, which MTU, for which flow.

use std::net::IpAddr;

use serde::Serialize;

use crate::kernel::views::{addr, monotonic_to_unix_ms, nd_ptb_key, nd_ptb_stats, Direction};

/// Too-big reports from one router about one quoted flow.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TooBig {
    /// Interface index where the ICMP message was seen.
    pub ifindex: u32,
    /// Direction of the ICMP message on that interface.
    pub direction: Direction,
    /// The router (or host) that sent the ICMP message.
    pub from: IpAddr,
    /// The MTU the last message announced.
    pub mtu: u32,
    /// Messages seen.
    pub count: u64,
    /// Last message, milliseconds since the UNIX epoch.
    pub last_seen_ms: u64,
    /// Protocol of the quoted packet.
    pub protocol: u8,
    /// Source of the quoted (too big) packet.
    pub src: IpAddr,
    /// Source port of the quoted packet (TCP/UDP).
    pub src_port: u16,
    /// Destination of the quoted packet.
    pub dst: IpAddr,
    /// Destination port of the quoted packet.
    pub dst_port: u16,
}

impl TooBig {
    pub(crate) fn from_raw(k: &nd_ptb_key, v: &nd_ptb_stats) -> Self {
        TooBig {
            ifindex: k.ifindex,
            direction: Direction::from_raw(k.dir),
            from: addr(k.family, &k.from),
            mtu: v.mtu,
            count: v.count,
            last_seen_ms: monotonic_to_unix_ms(v.last_ns),
            protocol: k.inner_proto,
            src: addr(k.family, &k.inner_saddr),
            src_port: k.inner_sport,
            dst: addr(k.family, &k.inner_daddr),
            dst_port: k.inner_dport,
        }
    }
}

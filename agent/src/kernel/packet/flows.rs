//! Per-flow records from the `flows` map: what crossed an interface, in which direction,
//! how big, with which TCP MSS, and how often TCP data was seen twice.

use std::net::IpAddr;

use serde::Serialize;

use crate::kernel::views::{
    addr, nd_flow_key, nd_flow_stats, nd_flow_win, Clocks, Direction, Encap,
};

/// WireGuard messages seen on an underlay flow, by type.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct WireguardMessages {
    /// Type 1, 148 bytes: a peer asks for a session.
    pub initiation: u32,
    /// Type 2, 92 bytes: the answer; missing answers mean the handshake never completes.
    pub response: u32,
    /// Type 3, 64 bytes: cookie reply under load.
    pub cookie: u32,
    /// Type 4: encrypted data (and keepalives).
    pub data: u32,
}

/// One flow on one interface in one direction.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Flow {
    /// Interface index.
    pub ifindex: u32,
    /// Direction on that interface.
    pub direction: Direction,
    /// IP protocol number (6 TCP, 17 UDP, 1 ICMP, 58 ICMPv6).
    pub protocol: u8,
    /// Source address.
    pub src: IpAddr,
    /// Source port (ICMP: type << 8 | code).
    pub src_port: u16,
    /// Destination address.
    pub dst: IpAddr,
    /// Destination port (ICMP echo: identifier).
    pub dst_port: u16,
    /// Frames or skbs.
    pub packets: u64,
    /// Wire segments (GSO-aware).
    pub segments: u64,
    /// Bytes including the L2 header.
    pub bytes: u64,
    /// First packet, milliseconds since the UNIX epoch.
    pub first_seen_ms: u64,
    /// Last packet, milliseconds since the UNIX epoch.
    pub last_seen_ms: u64,
    /// OR of every TCP flag seen.
    pub tcp_flags: u8,
    /// MSS option of the last SYN, if any.
    pub syn_mss: Option<u16>,
    /// Largest IP length of one segment.
    pub max_segment: u16,
    /// TCP segments carrying data seen before on this flow: retransmitted or reordered.
    pub retransmits: u32,
    /// Encapsulation recognised in this flow's payload.
    pub encap: Encap,
    /// WireGuard message counts (all zero unless `encap` is wireguard).
    pub wireguard: WireguardMessages,
}

/// What identifies a flow in the table.
pub type FlowKey = (u32, Direction, u8, IpAddr, u16, IpAddr, u16);

impl Flow {
    /// The table key of this flow.
    pub fn key(&self) -> FlowKey {
        (
            self.ifindex,
            self.direction,
            self.protocol,
            self.src,
            self.src_port,
            self.dst,
            self.dst_port,
        )
    }

    /// This flow's traffic since `earlier`, the same flow read before. A flow the table
    /// evicted and recreated in between (a later `first_seen_ms`) counts from zero. The
    /// SYN's MSS belongs to the window only when the flow began in it; the largest
    /// segment stays the flow's lifetime maximum.
    pub fn since(&self, earlier: &Flow) -> Flow {
        // Timestamps are converted from the monotonic clock at each read: allow the
        // conversion's jitter.
        let recreated = self.first_seen_ms.abs_diff(earlier.first_seen_ms) > 5;
        if recreated || earlier.packets > self.packets {
            return self.clone();
        }
        let w = &earlier.wireguard;
        Flow {
            packets: self.packets - earlier.packets,
            segments: self.segments.saturating_sub(earlier.segments),
            bytes: self.bytes.saturating_sub(earlier.bytes),
            retransmits: self.retransmits.saturating_sub(earlier.retransmits),
            syn_mss: None,
            wireguard: WireguardMessages {
                initiation: self.wireguard.initiation.saturating_sub(w.initiation),
                response: self.wireguard.response.saturating_sub(w.response),
                cookie: self.wireguard.cookie.saturating_sub(w.cookie),
                data: self.wireguard.data.saturating_sub(w.data),
            },
            ..self.clone()
        }
    }

    pub(crate) fn from_raw(k: &nd_flow_key, v: &nd_flow_stats) -> Self {
        Self::from_raw_at(k, v, &Clocks::now())
    }

    /// As [`Flow::from_raw`], with the clocks read once for a whole reading.
    pub(crate) fn from_raw_at(k: &nd_flow_key, v: &nd_flow_stats, clocks: &Clocks) -> Self {
        Flow {
            ifindex: k.ifindex,
            direction: Direction::from_raw(k.dir),
            protocol: k.proto,
            src: addr(k.family, &k.saddr),
            src_port: k.sport,
            dst: addr(k.family, &k.daddr),
            dst_port: k.dport,
            packets: v.packets,
            segments: v.segs,
            bytes: v.bytes,
            first_seen_ms: clocks.unix_ms(v.first_ns),
            last_seen_ms: clocks.unix_ms(v.last_ns),
            tcp_flags: v.tcp_flags,
            syn_mss: (v.syn_mss != 0).then_some(v.syn_mss),
            max_segment: v.max_seg,
            retransmits: v.retrans_segs,
            encap: Encap::from_raw(v.encap),
            wireguard: WireguardMessages {
                initiation: v.wg_msgs[0],
                response: v.wg_msgs[1],
                cookie: v.wg_msgs[2],
                data: v.wg_msgs[3],
            },
        }
    }

    /// Name of the IP protocol, for display.
    pub fn protocol_name(&self) -> String {
        match self.protocol {
            1 => "icmp".into(),
            6 => "tcp".into(),
            17 => "udp".into(),
            58 => "icmpv6".into(),
            n => n.to_string(),
        }
    }

    /// Retransmitted share of the data segments, 0.0 to 1.0.
    pub fn retransmit_ratio(&self) -> f64 {
        if self.segments == 0 {
            0.0
        } else {
            f64::from(self.retransmits) / self.segments as f64
        }
    }
}

/// The `n` flows with the most bytes, largest first.
pub fn top_by_bytes(mut flows: Vec<Flow>, n: usize) -> Vec<Flow> {
    flows.sort_by(|a, b| {
        b.bytes
            .cmp(&a.bytes)
            .then(a.first_seen_ms.cmp(&b.first_seen_ms))
    });
    flows.truncate(n);
    flows
}

/// A table value as window `n` saw it: its counts those of the window (zero if it carried
/// nothing in it), the rest (first and last seen, flags, MSS, largest segment) as it is.
pub(super) fn value_in_window(v: &nd_flow_stats, n: u32) -> nd_flow_stats {
    let w = v
        .win
        .iter()
        .find(|w| w.window == n)
        .copied()
        .unwrap_or_default();
    nd_flow_stats {
        packets: u64::from(w.packets),
        segs: u64::from(w.segs),
        bytes: w.bytes,
        retrans_segs: w.retrans_segs,
        wg_msgs: w.wg_msgs,
        win: [nd_flow_win::default(); 2],
        ..*v
    }
}

/// A flow for tests: `bytes` in one packet-sized lump per 1000 bytes, UDP, no encapsulation.
#[cfg(test)]
pub(crate) fn test_flow(
    ifindex: u32,
    direction: Direction,
    src: &str,
    src_port: u16,
    dst: &str,
    bytes: u64,
) -> Flow {
    let ip = |a: &str| a.parse::<IpAddr>().unwrap_or(IpAddr::from([0, 0, 0, 0]));
    Flow {
        ifindex,
        direction,
        protocol: 17,
        src: ip(src),
        src_port,
        dst: ip(dst),
        dst_port: 5201,
        packets: bytes.div_ceil(1000),
        segments: bytes.div_ceil(1000),
        bytes,
        first_seen_ms: 0,
        last_seen_ms: 0,
        tcp_flags: 0,
        syn_mss: None,
        max_segment: 1000,
        retransmits: 0,
        encap: Encap::None,
        wireguard: WireguardMessages::default(),
    }
}

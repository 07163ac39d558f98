//! The records of a report: flows, tunnels and too-big entries, each parsed from its JSON
//! object. A direction's counters are the agent's own type (`DirCounters`, read with serde).

use std::net::IpAddr;

use anyhow::{Context, Result};
use serde_json::Value;

use super::fields::{field, ip_field, str_field, u16_field, u64_field};

/// WireGuard message counts of a flow or tunnel.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WgMessages {
    /// Handshake initiations (type 1).
    pub initiation: u64,
    /// Handshake responses (type 2).
    pub response: u64,
    /// Cookie replies (type 3).
    pub cookie: u64,
    /// Transport data (type 4).
    pub data: u64,
}

impl WgMessages {
    fn from_json(v: &Value) -> Result<Self> {
        Ok(WgMessages {
            initiation: u64_field(v, "initiation")?,
            response: u64_field(v, "response")?,
            cookie: u64_field(v, "cookie")?,
            data: u64_field(v, "data")?,
        })
    }
}

/// One entry of `flows`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Flow {
    /// Interface index.
    pub ifindex: u64,
    /// "ingress" or "egress".
    pub direction: String,
    /// IP protocol number.
    pub protocol: u64,
    /// Source address.
    pub src: IpAddr,
    /// Source port.
    pub src_port: u16,
    /// Destination address.
    pub dst: IpAddr,
    /// Destination port.
    pub dst_port: u16,
    /// skbs/frames.
    pub packets: u64,
    /// Wire segments.
    pub segments: u64,
    /// Bytes, L2 header included.
    pub bytes: u64,
    /// First packet, ms since the epoch.
    pub first_seen_ms: u64,
    /// Last packet, ms since the epoch.
    pub last_seen_ms: u64,
    /// OR of the TCP flags seen.
    pub tcp_flags: u64,
    /// MSS option of the last SYN (`null` when none).
    pub syn_mss: Option<u64>,
    /// Largest IP length of one segment.
    pub max_segment: u64,
    /// TCP segments with already-seen data.
    pub retransmits: u64,
    /// Encapsulation name ("none", "wireguard", ...).
    pub encap: String,
    /// WireGuard message counts.
    pub wireguard: WgMessages,
}

impl Flow {
    pub(super) fn from_json(v: &Value) -> Result<Self> {
        let syn_mss = field(v, "syn_mss")?;
        Ok(Flow {
            ifindex: u64_field(v, "ifindex")?,
            direction: str_field(v, "direction")?.to_owned(),
            protocol: u64_field(v, "protocol")?,
            src: ip_field(v, "src")?,
            src_port: u16_field(v, "src_port")?,
            dst: ip_field(v, "dst")?,
            dst_port: u16_field(v, "dst_port")?,
            packets: u64_field(v, "packets")?,
            segments: u64_field(v, "segments")?,
            bytes: u64_field(v, "bytes")?,
            first_seen_ms: u64_field(v, "first_seen_ms")?,
            last_seen_ms: u64_field(v, "last_seen_ms")?,
            tcp_flags: u64_field(v, "tcp_flags")?,
            syn_mss: if syn_mss.is_null() {
                None
            } else {
                Some(
                    syn_mss
                        .as_u64()
                        .context("syn_mss is neither null nor a number")?,
                )
            },
            max_segment: u64_field(v, "max_segment")?,
            retransmits: u64_field(v, "retransmits")?,
            encap: str_field(v, "encap")?.to_owned(),
            wireguard: WgMessages::from_json(field(v, "wireguard")?)?,
        })
    }

    /// Retransmitted share of the segments, 0.0 to 1.0.
    pub fn retransmit_ratio(&self) -> f64 {
        if self.segments == 0 {
            0.0
        } else {
            self.retransmits as f64 / self.segments as f64
        }
    }

    /// One line for test output.
    pub fn describe(&self) -> String {
        format!(
            "{} proto {} {}:{} -> {}:{} pkts {} segs {} bytes {} mss {:?} maxseg {} retrans {} encap {} wg {:?}",
            self.direction,
            self.protocol,
            self.src,
            self.src_port,
            self.dst,
            self.dst_port,
            self.packets,
            self.segments,
            self.bytes,
            self.syn_mss,
            self.max_segment,
            self.retransmits,
            self.encap,
            self.wireguard
        )
    }
}

/// One entry of `tunnels`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tunnel {
    /// "ingress" or "egress".
    pub direction: String,
    /// Encapsulation name.
    pub encap: String,
    /// Outer source.
    pub src: IpAddr,
    /// Outer source port.
    pub src_port: u16,
    /// Outer destination.
    pub dst: IpAddr,
    /// Outer destination port.
    pub dst_port: u16,
    /// Outer packets.
    pub packets: u64,
    /// Outer bytes.
    pub bytes: u64,
    /// WireGuard message counts.
    pub wireguard: WgMessages,
}

impl Tunnel {
    pub(super) fn from_json(v: &Value) -> Result<Self> {
        Ok(Tunnel {
            direction: str_field(v, "direction")?.to_owned(),
            encap: str_field(v, "encap")?.to_owned(),
            src: ip_field(v, "src")?,
            src_port: u16_field(v, "src_port")?,
            dst: ip_field(v, "dst")?,
            dst_port: u16_field(v, "dst_port")?,
            packets: u64_field(v, "packets")?,
            bytes: u64_field(v, "bytes")?,
            wireguard: WgMessages::from_json(field(v, "wireguard")?)?,
        })
    }
}

/// One entry of `too_big`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TooBig {
    /// "ingress" or "egress".
    pub direction: String,
    /// Who sent the ICMP message.
    pub from: IpAddr,
    /// Announced MTU.
    pub mtu: u64,
    /// Messages seen.
    pub count: u64,
    /// Protocol of the quoted packet.
    pub protocol: u64,
    /// Quoted source.
    pub src: IpAddr,
    /// Quoted destination.
    pub dst: IpAddr,
}

impl TooBig {
    pub(super) fn from_json(v: &Value) -> Result<Self> {
        u64_field(v, "last_seen_ms")?;
        u16_field(v, "src_port")?;
        u16_field(v, "dst_port")?;
        Ok(TooBig {
            direction: str_field(v, "direction")?.to_owned(),
            from: ip_field(v, "from")?,
            mtu: u64_field(v, "mtu")?,
            count: u64_field(v, "count")?,
            protocol: u64_field(v, "protocol")?,
            src: ip_field(v, "src")?,
            dst: ip_field(v, "dst")?,
        })
    }
}

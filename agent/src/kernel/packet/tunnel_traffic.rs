//! Tunnel traffic seen on an underlay: outer packets and bytes per endpoint pair, grouped
//! from flows whose payload the data plane recognised as an encapsulation.

use std::collections::BTreeMap;
use std::net::IpAddr;

use serde::Serialize;

use crate::kernel::packet::flows::{Flow, WireguardMessages};
use crate::kernel::views::{Direction, Encap};

/// Outer traffic between two tunnel endpoints in one direction on one interface.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TunnelTraffic {
    /// Interface index of the underlay.
    pub ifindex: u32,
    /// Direction on the underlay.
    pub direction: Direction,
    /// Encapsulation.
    pub encap: Encap,
    /// Outer source.
    pub src: IpAddr,
    /// Outer source port.
    pub src_port: u16,
    /// Outer destination.
    pub dst: IpAddr,
    /// Outer destination port.
    pub dst_port: u16,
    /// Outer packets (segments).
    pub packets: u64,
    /// Outer bytes, L2 header included.
    pub bytes: u64,
    /// WireGuard message counts.
    pub wireguard: WireguardMessages,
}

/// Groups the encapsulated flows among `flows` by endpoint pair, busiest first.
pub fn from_flows(flows: &[Flow]) -> Vec<TunnelTraffic> {
    type Key = (u32, Direction, Encap, IpAddr, u16, IpAddr, u16);
    let mut groups: BTreeMap<Key, TunnelTraffic> = BTreeMap::new();
    for f in flows.iter().filter(|f| f.encap != Encap::None) {
        let key = (
            f.ifindex,
            f.direction,
            f.encap,
            f.src,
            f.src_port,
            f.dst,
            f.dst_port,
        );
        let t = groups.entry(key).or_insert_with(|| TunnelTraffic {
            ifindex: f.ifindex,
            direction: f.direction,
            encap: f.encap,
            src: f.src,
            src_port: f.src_port,
            dst: f.dst,
            dst_port: f.dst_port,
            packets: 0,
            bytes: 0,
            wireguard: WireguardMessages::default(),
        });
        t.packets += f.segments;
        t.bytes += f.bytes;
        t.wireguard.initiation += f.wireguard.initiation;
        t.wireguard.response += f.wireguard.response;
        t.wireguard.cookie += f.wireguard.cookie;
        t.wireguard.data += f.wireguard.data;
    }
    let mut out: Vec<_> = groups.into_values().collect();
    out.sort_by_key(|t| std::cmp::Reverse(t.bytes));
    out
}

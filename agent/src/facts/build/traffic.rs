//! The `traffic`, `drops` and `iface` sections of the facts: what crossed the interface
//! during the window, what the kernel dropped on it, and the interface itself.

use std::collections::BTreeMap;

use super::{full_size, to_i64, Observation, Seen};
use crate::config::iface::IfaceKind;
use crate::facts::reorder::{self, Local};
use crate::facts::underlay::is_tunnel_kind;
use crate::facts::{DropFacts, FlowFacts, IfaceFacts, TrafficFacts};
use crate::kernel::drops;
use crate::kernel::packet::flows::Flow;
use crate::kernel::views::Direction;

impl Observation<'_> {
    /// The `traffic` section; `flows` are the local connections' facts.
    pub(super) fn traffic(&self, seen: &Seen<'_>, flows: &[FlowFacts]) -> TrafficFacts {
        let counters = &seen.counters;
        let mss_limit = i64::from(self.me.mtu) - 40;
        let syn: Vec<&&Flow> = seen
            .mine
            .iter()
            .filter(|f| f.direction == Direction::Egress && f.syn_mss.is_some())
            .collect();
        let limit_for = |f: &Flow| {
            if f.src.is_ipv4() {
                mss_limit
            } else {
                i64::from(self.me.mtu) - 60
            }
        };
        let local = reorder::local(flows, counters.egress.local_tcp_segments > 0);
        let (tcp_segments, tcp_retransmits) = tcp_totals(seen, &local);
        let full = full_size::full_size(counters, self.me.mtu);
        let mut traffic = TrafficFacts {
            duration_s: self.elapsed.as_secs_f64(),
            rx_segments: to_i64(counters.ingress.segments),
            tx_segments: to_i64(counters.egress.segments),
            df_over_mtu: to_i64(counters.ingress.df_over_mtu + counters.egress.df_over_mtu),
            fragments: to_i64(counters.fragments()),
            too_big_received: to_i64(
                counters.ingress.icmp_frag_needed + counters.ingress.icmp6_packet_too_big,
            ),
            max_segment_out: seen.my_max_segment(Direction::Egress),
            full_size_segments: full.segments,
            full_size_share: full.share,
            syn_mss_max: syn
                .iter()
                .filter_map(|f| f.syn_mss)
                .map(i64::from)
                .max()
                .unwrap_or(0),
            mss_limit,
            syn_mss_over_limit: syn
                .iter()
                .filter(|f| f.syn_mss.map(i64::from).unwrap_or(0) > limit_for(f))
                .count() as i64,
            tcp_segments: to_i64(tcp_segments),
            tcp_retransmits: to_i64(tcp_retransmits),
            tcp_retrans_ratio: if tcp_segments > 0 {
                tcp_retransmits as f64 / tcp_segments as f64
            } else {
                0.0
            },
            flow_evictions: to_i64(self.window.flow_table.evictions),
            flow_table_capacity: to_i64(self.window.flow_table.capacity),
            ..TrafficFacts::default()
        };
        reorder::fill(&mut traffic, &local);
        traffic
    }

    /// The `drops` section: the kernel's drops on the interface during the window.
    pub(super) fn drops(&self) -> DropFacts {
        let mut by_reason: BTreeMap<String, i64> = BTreeMap::new();
        for d in drops::delta(&self.start.drops, &self.end.drops)
            .iter()
            .filter(|d| d.ifindex == self.me.index)
        {
            *by_reason.entry(d.reason.clone()).or_default() += to_i64(d.packets);
        }
        let reason = |r: &str| by_reason.get(r).copied().unwrap_or(0);
        DropFacts {
            total: by_reason.values().sum(),
            forwarding: reason("IP_INADDRERRORS"),
            rpfilter: reason("IP_RPFILTER"),
            too_big: reason("PKT_TOO_BIG"),
            by_reason: by_reason.clone(),
        }
    }

    /// The `iface` section; the LAN MTU is the largest among the host's other interfaces
    /// that are up and neither tunnels nor the underlay.
    pub(super) fn iface_facts(&self, seen: &Seen<'_>) -> IfaceFacts {
        let underlay = seen.underlay_iface.as_ref();
        let lan_mtu = self
            .all
            .iter()
            .filter(|i| {
                i.index != self.me.index
                    && i.up
                    && i.kind != IfaceKind::Loopback
                    && !is_tunnel_kind(&i.kind)
            })
            .filter(|i| underlay.is_none_or(|u| u.index != i.index))
            .map(|i| i64::from(i.mtu))
            .max()
            .unwrap_or(0);
        let bond = self.details.bond.clone().unwrap_or_default();
        IfaceFacts {
            name: self.me.name.clone(),
            index: self.me.index,
            kind: self.me.kind.to_string(),
            mtu: i64::from(self.me.mtu),
            up: self.me.up,
            addresses: self.details.addresses.clone(),
            is_tunnel: is_tunnel_kind(&self.me.kind),
            lan_mtu,
            bond_mode: bond.mode,
            bond_members: bond.members,
        }
    }
}

/// TCP segments and retransmissions on the interface: flow records, and the local
/// connections' segments counted per interface. What those connections sent again their
/// sockets counted (`local`, one per socket through the interface: the local path checks
/// only what it receives); they count where the local path took what they sent.
fn tcp_totals(seen: &Seen<'_>, local: &Local) -> (u64, u64) {
    let counters = &seen.counters;
    let tcp: Vec<&&Flow> = seen.mine.iter().filter(|f| f.protocol == 6).collect();
    let segments: u64 = tcp.iter().map(|f| f.segments).sum::<u64>()
        + counters.ingress.local_tcp_segments
        + counters.egress.local_tcp_segments;
    let retransmits: u64 = tcp.iter().map(|f| u64::from(f.retransmits)).sum::<u64>()
        + counters.ingress.local_tcp_retransmits
        + counters.egress.local_tcp_retransmits
        + local.retransmits;
    (segments, retransmits)
}

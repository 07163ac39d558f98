//! The `tunnel` section of the facts: the tunnel as configured, its underlay as the window
//! saw it (the interface that carried its traffic, the route's MTU, a chain of tunnels
//! below), the overhead expected and measured, and a bonded underlay's members.

use std::net::SocketAddr;

use super::{endpoint_name, to_i64, Observation, Seen};
use crate::config::bond::{self, BondTraffic};
use crate::config::iface::{IfaceKind, Interface};
use crate::config::link::{self, Bond};
use crate::config::tunnel::family_name;
use crate::facts::overhead::{self, AddrFamily};
use crate::facts::TunnelFacts;
use crate::kernel::packet::counters::IfaceCounters;
use crate::kernel::packet::flows::Flow;
use crate::kernel::views::{Direction, Encap};

/// The largest segment among `flows` in direction `dir` (0 if none).
pub(super) fn max_segment(flows: &[&Flow], dir: Direction) -> i64 {
    flows
        .iter()
        .filter(|f| f.direction == dir)
        .map(|f| i64::from(f.max_segment))
        .max()
        .unwrap_or(0)
}

impl Seen<'_> {
    /// This interface's largest segment: its flows', and its local connections' (the
    /// local path counts those per interface, not per flow).
    pub(super) fn my_max_segment(&self, dir: Direction) -> i64 {
        let local = match dir {
            Direction::Egress => self.counters.egress.local_tcp_max_segment,
            Direction::Ingress => self.counters.ingress.local_tcp_max_segment,
        };
        max_segment(&self.mine, dir).max(to_i64(local))
    }
}

/// The tunnel's endpoints: as configured, else where its outer flows went.
pub(super) fn endpoints(configured: &[SocketAddr], outer: &[&Flow]) -> Vec<SocketAddr> {
    let mut endpoints = configured.to_vec();
    if endpoints.is_empty() {
        for f in outer.iter().filter(|f| f.direction == Direction::Egress) {
            let ep = SocketAddr::new(f.dst, f.dst_port);
            if !endpoints.contains(&ep) {
                endpoints.push(ep);
            }
        }
    }
    endpoints
}

/// Of the `fragments` the underlay `underlay` carried in the window, those of this tunnel.
/// A later fragment has no transport header: the data plane records it as a flow of its
/// protocol with ports 0, between the addresses of the packet it belongs to. UDP with both
/// ports 0 is nothing else, so the share of the underlay's later UDP fragments exchanged with
/// the tunnel's endpoints is the share of its fragments that are the tunnel's: a neighbour
/// tunnel (or any other host) fragmenting on the same underlay is not this tunnel's doing.
/// Without later UDP fragments to attribute (a GRE or IPIP tunnel's fragments, whose packets
/// have no ports anyway), every fragment of the underlay counts.
fn tunnel_fragments(
    fragments: u64,
    flows: &[Flow],
    underlay: u32,
    endpoints: &[SocketAddr],
) -> u64 {
    let later = flows.iter().filter(|f| {
        f.ifindex == underlay && f.protocol == 17 && f.src_port == 0 && f.dst_port == 0
    });
    let (mut all, mut ours) = (0u64, 0u64);
    for f in later {
        let remote = match f.direction {
            Direction::Egress => f.dst,
            Direction::Ingress => f.src,
        };
        all = all.saturating_add(f.packets);
        if endpoints.iter().any(|e| e.ip() == remote) {
            ours = ours.saturating_add(f.packets);
        }
    }
    if all == 0 {
        return fragments;
    }
    // fragments x ours / all, in u128 so that the product cannot overflow.
    u64::try_from(u128::from(fragments) * u128::from(ours) / u128::from(all)).unwrap_or(u64::MAX)
}

impl Observation<'_> {
    /// The `tunnel` section.
    pub(super) async fn tunnel_facts(&self, seen: &Seen<'_>) -> TunnelFacts {
        let underlay_iface = seen.underlay_iface.as_ref();
        let route_mtu = match (self.underlay.route_mtu, underlay_iface) {
            (Some(m), _) => i64::from(m),
            (None, Some(i)) => i64::from(i.mtu),
            (None, None) => -1,
        };
        // An underlay that is itself a tunnel carries no more than its own chain fits.
        let chain = crate::facts::chain::below(underlay_iface, self.all).await;
        let effective_mtu = match chain.carries() {
            Some(c) if route_mtu > 0 => route_mtu.min(i64::from(c)),
            _ => route_mtu,
        };
        let family = if seen.endpoints.iter().any(|e| family_name(e.ip()) == "ipv6") {
            "ipv6"
        } else {
            "ipv4"
        };
        let fam = AddrFamily::from_name(family);
        let at_mtu = u32::try_from(effective_mtu)
            .ok()
            .filter(|m| *m > 0)
            .unwrap_or(1500);
        let underlay_counters = underlay_iface
            .map(|u| self.window.counters(u.index))
            .unwrap_or_default();
        let (bond, bond_traffic) = self.bond(underlay_iface).await;
        TunnelFacts {
            present: self.tun.kind.is_some(),
            kind: self.tun.kind_name(),
            local: self.tun.local.map(|l| l.to_string()).unwrap_or_default(),
            options: self.tun.options.clone(),
            family: family.into(),
            overhead_expected: self
                .tun
                .kind
                .map_or(-1, |k| i64::from(overhead::overhead(k, fam, at_mtu))),
            overhead_measured: self.measured_overhead(seen, &underlay_counters),
            underlay_iface: underlay_iface.map(|u| u.name.clone()).unwrap_or_default(),
            underlay_mtu: route_mtu,
            underlay_chain: chain.describe(),
            path_mtu: -1,
            effective_underlay_mtu: effective_mtu,
            max_mtu: match self.tun.kind {
                Some(k) if effective_mtu > 0 => i64::from(overhead::max_tunnel_mtu(k, fam, at_mtu)),
                _ => -1,
            },
            usual_mtu: self
                .tun
                .kind
                .and_then(overhead::usual_mtu)
                .map_or(-1, i64::from),
            port: i64::from(self.tun.port),
            endpoints: seen.endpoints.iter().map(endpoint_name).collect(),
            daemon: self
                .tun
                .daemon
                .as_ref()
                .map(|d| d.command.clone())
                .unwrap_or_default(),
            methods: self.tun.methods.clone(),
            underlay_fragments: to_i64(tunnel_fragments(
                underlay_counters.fragments(),
                underlay_iface.map_or(&[][..], |_| &self.window.flows[..]),
                underlay_iface.map_or(0, |u| u.index),
                &seen.endpoints,
            )),
            underlay_bond_policy: bond
                .as_ref()
                .map(|b| b.xmit_hash_policy.clone())
                .unwrap_or_default(),
            underlay_bond_mode: bond.as_ref().map(|b| b.mode.clone()).unwrap_or_default(),
            underlay_bond_tx_bytes: bond_traffic.tx_bytes,
            underlay_bond_busiest: bond_traffic.busiest,
            underlay_bond_busiest_percent: bond_traffic.busiest_percent,
            underlay_bond_rate_mbps: bond_traffic.rate_mbps,
            underlay_bond_members: bond_traffic.members,
            load: self.load(),
        }
    }

    /// Overhead at full size, in a direction where full-size inner packets flowed and the
    /// underlay did not fragment them: smaller packets carry WireGuard's padding to 16
    /// bytes, and a fragment's size says nothing about the overhead. tinc sends its own
    /// path-MTU probes of any size on the data flow, so its largest outer packet says
    /// nothing either. -1 when not measured.
    fn measured_overhead(&self, seen: &Seen<'_>, underlay: &IfaceCounters) -> i64 {
        let full_size = i64::from(self.me.mtu) - 16;
        let probes_on_data_flow = self.tun.encap == Some(Encap::Tinc);
        [Direction::Egress, Direction::Ingress]
            .into_iter()
            .filter_map(|dir| {
                let c = match dir {
                    Direction::Egress => &underlay.egress,
                    Direction::Ingress => &underlay.ingress,
                };
                let o = max_segment(&seen.outer, dir);
                let i = seen.my_max_segment(dir);
                let unfragmented = c.fragments() == 0;
                (!probes_on_data_flow && unfragmented && i >= full_size && o > i).then_some(o - i)
            })
            .max()
            .unwrap_or(-1)
    }

    /// The underlay's bond settings and what its members sent, when it is a bond.
    async fn bond(&self, underlay: Option<&Interface>) -> (Option<Bond>, BondTraffic) {
        let bond = match underlay {
            Some(u) if u.kind == IfaceKind::Bond => {
                link::details(u.index).await.ok().and_then(|d| d.bond)
            }
            _ => None,
        };
        let traffic = bond
            .as_ref()
            .map(|b| {
                bond::measure(
                    &b.members,
                    self.all,
                    &self.start.links,
                    &self.end.links,
                    self.elapsed.as_secs_f64(),
                )
            })
            .unwrap_or_default();
        (bond, traffic)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A later fragment's flow: UDP, ports 0, from `src` to `dst` on interface 2.
    fn later(dir: Direction, src: &str, dst: &str, packets: u64) -> Flow {
        Flow {
            ifindex: 2,
            direction: dir,
            protocol: 17,
            src: src.parse().expect("src"),
            src_port: 0,
            dst: dst.parse().expect("dst"),
            dst_port: 0,
            packets,
            segments: packets,
            bytes: packets * 100,
            first_seen_ms: 0,
            last_seen_ms: 0,
            tcp_flags: 0,
            syn_mss: None,
            max_segment: 100,
            retransmits: 0,
            encap: Encap::None,
            wireguard: Default::default(),
        }
    }

    #[test]
    fn a_neighbours_fragments_are_not_this_tunnels() {
        let me: Vec<SocketAddr> = vec!["192.0.2.2:51820".parse().expect("endpoint")];
        let v6: Vec<SocketAddr> = vec!["[2001:db8::2]:51820".parse().expect("endpoint")];
        // The neighbour's peer, 198.51.100.7, fragments; this tunnel's does not.
        let flows = [later(Direction::Egress, "192.0.2.1", "198.51.100.7", 500)];
        assert_eq!(tunnel_fragments(1000, &flows, 2, &me), 0);
        // This tunnel fragments alone: every fragment is its own, in either direction.
        let flows = [later(Direction::Ingress, "192.0.2.2", "192.0.2.1", 500)];
        assert_eq!(tunnel_fragments(1000, &flows, 2, &me), 1000);
        // Both: the share of the later fragments.
        let flows = [
            later(Direction::Egress, "192.0.2.1", "192.0.2.2", 100),
            later(Direction::Egress, "192.0.2.1", "198.51.100.7", 300),
        ];
        assert_eq!(tunnel_fragments(800, &flows, 2, &me), 200);
        // IPv6 endpoints; another interface's fragments do not count.
        let flows = [
            later(Direction::Egress, "2001:db8::1", "2001:db8::2", 10),
            Flow {
                ifindex: 3,
                ..later(Direction::Egress, "192.0.2.1", "198.51.100.7", 90)
            },
        ];
        assert_eq!(tunnel_fragments(20, &flows, 2, &v6), 20);
        // Nothing to attribute by (no later UDP fragment seen): all of the underlay's.
        let mut gre = later(Direction::Egress, "192.0.2.1", "198.51.100.7", 5);
        gre.protocol = 47;
        assert_eq!(tunnel_fragments(7, &[gre], 2, &me), 7);
        assert_eq!(tunnel_fragments(7, &[], 2, &me), 7);
    }
}

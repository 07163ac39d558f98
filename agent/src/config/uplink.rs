//! A forwarding gateway's uplinks: the interfaces its tunnel's clients' traffic leaves by.
//!
//! The uplink is where the kernel forwards what the clients send, not necessarily the
//! default route's interface: a gateway may reach the far side by a static or connected
//! route and have no default route at all, or send some destinations one way and others
//! another. So the flows the data plane saw entering the tunnel from its ranges toward
//! addresses outside them are looked up as the kernel forwards them (`RTM_GETROUTE` with
//! the source, the tunnel as input interface, the protocol and ports, see
//! [`super::route::Arrival`]), and each output interface is an uplink, weighed by the
//! bytes routed through it. Without such flows the default route's interface stands in.

use std::collections::BTreeMap;

use super::iface::Interface;
use super::prefix::Prefix;
use super::route::{Arrival, Resolver, RouteKind};
use super::route_table::TableRoute;
use crate::kernel::packet::flows::Flow;
use crate::kernel::views::Direction;

/// At most this many of the clients' flows, the busiest, are looked up per observation.
pub const MAX_LOOKUPS: usize = 64;

/// An interface the clients' traffic is routed out of, and the bytes of their flows that
/// took it during the observation.
#[derive(Debug, Clone)]
pub struct Uplink {
    /// The interface.
    pub iface: Interface,
    /// Bytes of the clients' flows routed through it (as they entered the tunnel).
    pub bytes: u64,
}

/// The interface of the main table's default route (IPv4 first), unless it is `me`.
pub fn default_route<'a>(
    routes: &[TableRoute],
    all: &'a [Interface],
    me: &Interface,
) -> Option<&'a Interface> {
    let default = |v4: bool| {
        routes
            .iter()
            .filter(|r| r.is_default() && r.destination.is_ipv4() == v4)
            .flat_map(|r| r.nexthops.first())
            .next()
    };
    let hop = default(true).or_else(|| default(false))?;
    all.iter()
        .find(|i| i.index == hop.ifindex)
        .filter(|i| i.index != me.index)
}

/// The clients' flows: entering `me` from one of the tunnel's `sources` toward an address
/// outside them, busiest first, at most [`MAX_LOOKUPS`].
pub fn client_flows<'a>(me: &Interface, sources: &[Prefix], flows: &'a [Flow]) -> Vec<&'a Flow> {
    let from_client = |f: &&Flow| {
        f.ifindex == me.index
            && f.direction == Direction::Ingress
            && sources.iter().any(|p| p.contains(f.src))
            && !sources.iter().any(|p| p.contains(f.dst))
    };
    let mut out: Vec<&Flow> = flows.iter().filter(from_client).collect();
    out.sort_by_key(|f| std::cmp::Reverse(f.bytes));
    out.truncate(MAX_LOOKUPS);
    out
}

/// Adds up the flows' bytes per output interface (`None`: not forwarded), leaving out `me`
/// (back into the tunnel) and interfaces not in `all`; busiest first, then by name.
pub fn tally<'f>(
    routed: impl IntoIterator<Item = (&'f Flow, Option<u32>)>,
    me: &Interface,
    all: &[Interface],
) -> Vec<Uplink> {
    let mut bytes: BTreeMap<u32, u64> = BTreeMap::new();
    for (flow, out) in routed {
        if let Some(index) = out.filter(|i| *i != me.index) {
            *bytes.entry(index).or_default() += flow.bytes;
        }
    }
    let mut out: Vec<Uplink> = bytes
        .into_iter()
        .filter_map(|(index, bytes)| {
            let iface = all.iter().find(|i| i.index == index)?.clone();
            Some(Uplink { iface, bytes })
        })
        .collect();
    out.sort_by(|a, b| b.bytes.cmp(&a.bytes).then(a.iface.name.cmp(&b.iface.name)));
    out
}

/// Where the kernel forwards the clients' flows: each flow of [`client_flows`] looked up
/// as it arrived, busiest uplink first. Flows the kernel delivers locally, would not
/// forward, or sends back into the tunnel name no uplink; without rtnetlink, none does.
pub async fn forwarded(
    me: &Interface,
    sources: &[Prefix],
    flows: &[Flow],
    all: &[Interface],
) -> Vec<Uplink> {
    let clients = client_flows(me, sources, flows);
    if clients.is_empty() {
        return Vec::new();
    }
    let resolver = match Resolver::new() {
        Ok(r) => r,
        Err(e) => {
            tracing::debug!("routes of the tunnel's clients unknown: {e}");
            return Vec::new();
        }
    };
    let mut routed = Vec::with_capacity(clients.len());
    for f in clients {
        let arrival = Arrival {
            source: f.src,
            iif: me.index,
            protocol: f.protocol,
            sport: f.src_port,
            dport: f.dst_port,
        };
        let out = match resolver.get(f.dst, Some(&arrival), all).await {
            Ok(r) if r.kind != RouteKind::Local => Some(r.ifindex),
            Ok(_) => None,
            Err(e) => {
                tracing::debug!("{} -> {}: not forwarded: {e}", f.src, f.dst);
                None
            }
        };
        routed.push((f, out));
    }
    tally(routed, me, all)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::packet::flows::test_flow;

    fn iface(name: &str, index: u32) -> Interface {
        Interface::test_named(name, index)
    }

    fn sources() -> Vec<Prefix> {
        ["10.250.0.0/24", "fd00:250::/64"]
            .iter()
            .map(|p| p.parse().expect("prefix"))
            .collect()
    }

    #[test]
    fn client_flows_enter_the_tunnel_from_its_ranges_toward_elsewhere() {
        let wg = iface("wg0", 7);
        let flows = [
            test_flow(
                7,
                Direction::Ingress,
                "10.250.0.2",
                1000,
                "198.51.100.7",
                2000,
            ),
            test_flow(
                7,
                Direction::Ingress,
                "fd00:250::2",
                1001,
                "2001:db8::7",
                9000,
            ),
            // Replies leaving toward the clients, a client talking to another one or to
            // the gateway's tunnel address, traffic on another interface, and a source
            // outside the tunnel's ranges: none of them.
            test_flow(
                7,
                Direction::Egress,
                "198.51.100.7",
                2000,
                "10.250.0.2",
                5000,
            ),
            test_flow(
                7,
                Direction::Ingress,
                "10.250.0.2",
                1002,
                "10.250.0.3",
                5000,
            ),
            test_flow(
                7,
                Direction::Ingress,
                "10.250.0.2",
                1003,
                "10.250.0.1",
                5000,
            ),
            test_flow(
                3,
                Direction::Ingress,
                "10.250.0.2",
                1004,
                "198.51.100.7",
                5000,
            ),
            test_flow(
                7,
                Direction::Ingress,
                "192.0.2.9",
                1005,
                "198.51.100.7",
                5000,
            ),
        ];
        let got: Vec<(String, u64)> = client_flows(&wg, &sources(), &flows)
            .iter()
            .map(|f| (f.dst.to_string(), f.bytes))
            .collect();
        assert_eq!(
            got,
            [
                ("2001:db8::7".to_owned(), 9000),
                ("198.51.100.7".into(), 2000)
            ]
        );
    }

    #[test]
    fn client_flows_are_bounded_to_the_busiest() {
        let wg = iface("wg0", 7);
        let flows: Vec<Flow> = (0..200u16)
            .map(|i| {
                let dst = format!("198.51.100.{}", i % 250);
                test_flow(7, Direction::Ingress, "10.250.0.2", i, &dst, u64::from(i))
            })
            .collect();
        let got = client_flows(&wg, &sources(), &flows);
        assert_eq!(got.len(), MAX_LOOKUPS);
        assert_eq!(got[0].bytes, 199);
        assert_eq!(got[MAX_LOOKUPS - 1].bytes, 200 - MAX_LOOKUPS as u64);
    }

    #[test]
    fn uplinks_are_weighed_by_the_bytes_routed_through_them() {
        let (wg, up0, up1) = (iface("wg0", 7), iface("up0", 3), iface("up1", 4));
        let all = [wg.clone(), up0.clone(), up1.clone()];
        let flows = [
            test_flow(7, Direction::Ingress, "10.250.0.2", 1, "198.51.100.7", 3000),
            test_flow(7, Direction::Ingress, "10.250.0.2", 2, "203.0.113.9", 5000),
            test_flow(7, Direction::Ingress, "10.250.0.3", 3, "198.51.100.8", 4000),
            test_flow(7, Direction::Ingress, "10.250.0.3", 4, "192.0.2.1", 9000),
            test_flow(7, Direction::Ingress, "10.250.0.3", 5, "10.99.0.1", 9000),
        ];
        let routed = [
            (&flows[0], Some(3)),
            (&flows[1], Some(4)),
            (&flows[2], Some(3)),
            (&flows[3], None),    // not forwarded (local, unreachable)
            (&flows[4], Some(7)), // back into the tunnel
        ];
        let got: Vec<(String, u64)> = tally(routed, &wg, &all)
            .into_iter()
            .map(|u| (u.iface.name, u.bytes))
            .collect();
        assert_eq!(got, [("up0".to_owned(), 7000), ("up1".into(), 5000)]);
    }

    #[test]
    fn the_default_route_stands_in_unless_it_is_the_tunnel() {
        use crate::config::route_table::Nexthop;
        let (wg, up0) = (iface("wg0", 7), iface("up0", 3));
        let all = [wg.clone(), up0.clone()];
        let default_via = |ifindex| TableRoute {
            destination: "0.0.0.0/0".parse().expect("prefix"),
            table: 254,
            nexthops: vec![Nexthop {
                ifindex,
                weight: 1,
                gateway: None,
            }],
        };
        let name = |routes: &[TableRoute]| default_route(routes, &all, &wg).map(|i| i.name.clone());
        assert_eq!(name(&[default_via(3)]).as_deref(), Some("up0"));
        assert_eq!(name(&[default_via(7)]), None);
        assert_eq!(name(&[]), None);
    }
}

//! Which interfaces `netdoctor diagnose` looks at when none is named: every tunnel and
//! overlay interface that is up (the kinds the configuration layer classifies as tunnels:
//! WireGuard and Tailscale, TUN/TAP, VXLAN, GENEVE, GRE/IPIP/SIT/ip6tnl), the bridges those
//! are ports of, and the interfaces of the main table's default routes (IPv4 and IPv6,
//! every nexthop of a multipath one), each once, in the kernel's order.

use std::collections::HashSet;

use crate::config::iface::{IfaceKind, Interface};
use crate::config::route_table::TableRoute;
use crate::facts::underlay::is_tunnel_kind;

/// The names of the interfaces to diagnose among `all`, given the routing table and every
/// link's controller (`(index, controller)`).
pub(super) fn every(
    all: &[Interface],
    routes: &[TableRoute],
    controllers: &[(u32, u32)],
) -> Vec<String> {
    let tunnels: HashSet<u32> = all
        .iter()
        .filter(|i| i.up && is_tunnel_kind(&i.kind))
        .map(|i| i.index)
        .collect();
    let bridges = controllers
        .iter()
        .filter(|(port, _)| tunnels.contains(port))
        .map(|(_, controller)| *controller)
        .filter(|c| {
            all.iter()
                .any(|i| i.index == *c && i.up && i.kind == IfaceKind::Bridge)
        });
    let defaults = routes
        .iter()
        .filter(|r| r.is_default())
        .flat_map(|r| r.nexthops.iter().map(|h| h.ifindex));
    let chosen: HashSet<u32> = tunnels
        .iter()
        .copied()
        .chain(bridges)
        .chain(defaults)
        .collect();
    all.iter()
        .filter(|i| chosen.contains(&i.index) && i.kind != IfaceKind::Loopback)
        .map(|i| i.name.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::route_table::Nexthop;

    fn iface(name: &str, index: u32, kind: IfaceKind, up: bool) -> Interface {
        Interface {
            kind,
            up,
            ..Interface::test_named(name, index)
        }
    }

    fn route(destination: &str, table: u32, ifindexes: &[u32]) -> TableRoute {
        TableRoute {
            destination: destination.parse().expect("prefix"),
            table,
            nexthops: ifindexes
                .iter()
                .map(|&ifindex| Nexthop {
                    ifindex,
                    weight: 1,
                    gateway: None,
                })
                .collect(),
        }
    }

    #[test]
    fn tunnels_their_bridges_and_the_default_routes_are_chosen() {
        let all = [
            iface("lo", 1, IfaceKind::Loopback, true),
            iface("eth0", 2, IfaceKind::Physical, true),
            iface("eth1", 3, IfaceKind::Physical, true),
            iface("eth2", 4, IfaceKind::Physical, true),
            iface("wg0", 5, IfaceKind::Wireguard, true),
            iface("vx0", 6, IfaceKind::Vxlan, true),
            iface("br0", 7, IfaceKind::Bridge, true),
            iface("br1", 8, IfaceKind::Bridge, true),
            iface("tunl0", 9, IfaceKind::IpTunnel("ipip".into()), false),
            iface("veth0", 10, IfaceKind::Veth, true),
            iface("tap0", 11, IfaceKind::Tap, true),
        ];
        let routes = [
            route("0.0.0.0/0", 254, &[2]),
            route("::/0", 254, &[3, 2]),
            route("0.0.0.0/0", 100, &[4]),
            route("10.0.0.0/8", 254, &[10]),
        ];
        // vx0 is a port of br0; veth0 of br1, which carries no tunnel.
        let controllers = [(6, 7), (10, 8)];
        assert_eq!(
            every(&all, &routes, &controllers),
            ["eth0", "eth1", "wg0", "vx0", "br0", "tap0"],
            "tunnels that are up, the bridge carrying one, the main table's default routes"
        );
        assert_eq!(
            every(&all[..4], &[], &[]),
            Vec::<String>::new(),
            "no tunnel and no default route: nothing"
        );
    }
}

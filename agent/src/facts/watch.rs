//! Which interfaces the data plane watches besides the diagnosed one and its underlay:
//! every nexthop of a multipath route over them (to measure how flows spread, see
//! [`super::ecmp`]), and a forwarding gateway's uplinks (to see its tunnel's clients leave
//! them, see [`super::nat`]): the default route's interface, and those the clients'
//! traffic was seen routed out of ([`crate::config::uplink`]); and a bridge with every port, when
//! the interface is one or a port of one ([`super::bridge`]).

use super::ecmp;
use super::underlay::{is_tunnel_kind, Underlay};
use crate::config::bridge::Bridge;
use crate::config::iface::Interface;
use crate::config::route_table::TableRoute;
use crate::config::uplink;

/// The interfaces to watch besides `me` and the underlay candidates, each once. `uplinks`
/// names those a gateway's clients' traffic was routed out of (`nat.uplinks` of an
/// observation so far, or of the previous window).
pub fn also_watch(
    me: &Interface,
    underlay: &Underlay,
    routes: &[TableRoute],
    all: &[Interface],
    forwarding: bool,
    uplinks: &[String],
) -> Vec<Interface> {
    let mut indexes: Vec<u32> = ecmp::routes(routes, me, underlay.iface.as_ref())
        .iter()
        .flat_map(|r| r.nexthops.iter().map(|h| h.ifindex))
        .collect();
    if forwarding && is_tunnel_kind(&me.kind) {
        indexes.extend(uplink::default_route(routes, all, me).map(|u| u.index));
        let named = all.iter().filter(|i| uplinks.contains(&i.name));
        indexes.extend(named.map(|i| i.index));
    }
    let mut out: Vec<Interface> = Vec::new();
    for i in indexes {
        let known = i == me.index
            || underlay.watch.iter().any(|u| u.index == i)
            || out.iter().any(|o| o.index == i);
        if !known {
            out.extend(all.iter().find(|a| a.index == i).cloned());
        }
    }
    out
}

/// The bridge `me` is or is a port of, and its ports, those not watched yet (`me`, the
/// underlay candidates and `also`): segments above the smallest port's MTU are measured
/// where they enter, on the larger ports.
pub fn bridge_ports(
    me: &Interface,
    underlay: &Underlay,
    also: &[Interface],
    bridge: Option<&Bridge>,
) -> Vec<Interface> {
    let Some(b) = bridge else {
        return Vec::new();
    };
    let members = std::iter::once(&b.bridge).chain(b.ports.iter());
    let mut out: Vec<Interface> = Vec::new();
    for i in members {
        let known = i.index == me.index
            || underlay.watch.iter().any(|u| u.index == i.index)
            || also.iter().chain(out.iter()).any(|o| o.index == i.index);
        if !known {
            out.push(i.clone());
        }
    }
    out
}

//! Which interfaces the data plane watches besides the diagnosed one and its underlay:
//! every nexthop of a multipath route over them (to measure how flows spread, see
//! [`super::ecmp`]), and a forwarding gateway's uplinks (to see its tunnel's clients leave
//! them, see [`super::nat`]): the default route's interface, and those the clients'
//! traffic was seen routed out of ([`super::uplink`]).

use super::iface::Interface;
use super::route_table::TableRoute;
use super::underlay::{is_tunnel_kind, Underlay};
use super::{ecmp, uplink};

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

//! Which interfaces the data plane watches besides the diagnosed one and its underlay:
//! every nexthop of a multipath route over them (to measure how flows spread, see
//! [`super::ecmp`]), and a forwarding gateway's uplink (to see its tunnel's clients leave
//! it, see [`super::nat`]).

use super::iface::Interface;
use super::route_table::TableRoute;
use super::underlay::{is_tunnel_kind, Underlay};
use super::{ecmp, nat};

/// The interfaces to watch besides `me` and the underlay candidates, each once.
pub fn also_watch(
    me: &Interface,
    underlay: &Underlay,
    routes: &[TableRoute],
    all: &[Interface],
    forwarding: bool,
) -> Vec<Interface> {
    let mut indexes: Vec<u32> = ecmp::routes(routes, me, underlay.iface.as_ref())
        .iter()
        .flat_map(|r| r.nexthops.iter().map(|h| h.ifindex))
        .collect();
    if forwarding && is_tunnel_kind(&me.kind) {
        indexes.extend(nat::uplink(routes, all, me).map(|u| u.index));
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

//! Which interfaces carry a tunnel's encapsulated packets: the routes toward its
//! configured endpoints (and relays), the device a VXLAN/GENEVE or IP tunnel is pinned to,
//! or, for TUN/TAP daemons whose endpoints are not configured, every plausible candidate
//! (the one carrying the tunnel's port is chosen from the observation).

use crate::config::iface::{IfaceKind, Interface};
use crate::config::link::LinkDetails;
use crate::config::tunnel::ConfiguredTunnel;

/// At most this many candidate underlays are watched when the tunnel's endpoints are not
/// configured (TUN/TAP daemons): the one carrying the tunnel's port is chosen afterwards.
const MAX_UNDERLAY_CANDIDATES: usize = 8;

/// The underlay as far as configuration tells.
#[derive(Debug, Default)]
pub struct Underlay {
    /// Interfaces to watch: the route's interface, or candidates.
    pub watch: Vec<Interface>,
    /// The route's interface when endpoints are known.
    pub iface: Option<Interface>,
    /// Smallest route MTU toward the endpoints.
    pub route_mtu: Option<u32>,
}

pub(crate) fn is_tunnel_kind(k: &IfaceKind) -> bool {
    matches!(
        k,
        IfaceKind::Wireguard
            | IfaceKind::Tun
            | IfaceKind::Tap
            | IfaceKind::Vxlan
            | IfaceKind::Geneve
            | IfaceKind::IpTunnel(_)
    )
}

/// Finds the underlay: routes toward known endpoints, else every plausible interface.
pub async fn underlay(
    tun: &ConfiguredTunnel,
    details: &LinkDetails,
    all: &[Interface],
) -> Underlay {
    if tun.kind.is_none() && tun.encap.is_none() {
        return Underlay::default();
    }
    let mut u = Underlay::default();
    for ep in &tun.endpoints {
        if let Ok(route) = crate::config::route::get_among(ep.ip().to_canonical(), all).await {
            u.route_mtu = Some(u.route_mtu.map_or(route.mtu, |m: u32| m.min(route.mtu)));
            if u.iface.is_none() {
                u.iface = all.iter().find(|i| i.index == route.ifindex).cloned();
            }
        }
    }
    // Relayed traffic (Tailscale's DERP) leaves toward the relays: watched too, and the
    // underlay when no endpoint is known (every peer relayed).
    let mut toward_relays = Vec::new();
    for relay in &tun.relays {
        if let Ok(route) = crate::config::route::get_among(relay.ip().to_canonical(), all).await {
            if let Some(i) = all.iter().find(|i| i.index == route.ifindex) {
                toward_relays.push(i.clone());
            }
        }
    }
    if u.iface.is_none() {
        u.iface = toward_relays.first().cloned();
    }
    let pinned = details
        .vxlan
        .as_ref()
        .or(details.geneve.as_ref())
        .and_then(|o| o.underlay_ifindex)
        .or_else(|| details.ip_tunnel.as_ref()?.underlay_ifindex);
    if let Some(idx) = pinned {
        u.iface = all.iter().find(|i| i.index == idx).cloned().or(u.iface);
    }
    if let Some(i) = &u.iface {
        u.route_mtu.get_or_insert(i.mtu);
        u.watch.push(i.clone());
        for r in toward_relays {
            if !u.watch.iter().any(|w| w.index == r.index) {
                u.watch.push(r);
            }
        }
    } else {
        u.watch = all
            .iter()
            .filter(|i| i.up && i.kind != IfaceKind::Loopback && !is_tunnel_kind(&i.kind))
            .take(MAX_UNDERLAY_CANDIDATES)
            .cloned()
            .collect();
    }
    u
}

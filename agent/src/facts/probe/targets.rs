//! Where a diagnosis probes the path MTU, what cannot be probed, and what the results
//! change in the facts.

use std::net::{IpAddr, SocketAddr};

use super::ProbeResult;
use crate::config::iface::Interface;
use crate::config::route::{Route, RouteKind};
use crate::config::tunnel::ConfiguredTunnel;
use crate::facts::underlay::Underlay;
use crate::facts::Facts;

/// Each endpoint of a tunnel, probed up to the underlay's MTU (1500 if unknown).
pub fn endpoint_targets(endpoints: &[SocketAddr], mtu: Option<u32>) -> Vec<(String, IpAddr, u32)> {
    endpoints
        .iter()
        .map(|ep| {
            let max = mtu.unwrap_or(1500);
            (format!("endpoint {ep}"), ep.ip().to_canonical(), max)
        })
        .collect()
}

/// Where to probe: each tunnel endpoint over the underlay, then remote ends of
/// connections retransmitting full-size segments, through the interface.
pub fn probe_targets(
    facts: &Facts,
    underlay: &Underlay,
    me: &Interface,
) -> Vec<(String, IpAddr, u32)> {
    let underlay_mtu = u32::try_from(facts.tunnel.underlay_mtu)
        .ok()
        .filter(|m| *m > 0);
    let endpoints: Vec<SocketAddr> = facts
        .tunnel
        .endpoints
        .iter()
        .filter_map(|e| e.parse::<SocketAddr>().ok())
        .collect();
    let mut targets = endpoint_targets(&endpoints, underlay_mtu.or(underlay.route_mtu));
    for f in facts.flows.iter().filter(|f| f.full_size_retransmits > 0) {
        if let Some(remote) = f
            .name
            .rsplit(" -> ")
            .next()
            .and_then(|r| r.parse::<SocketAddr>().ok())
        {
            let ip = remote.ip().to_canonical();
            if !targets.iter().any(|(_, t, _)| *t == ip) {
                targets.push((format!("flow {}", f.name), ip, me.mtu));
            }
        }
    }
    targets
}

/// Why the destination of `route` (the kernel's answer for a probe's target) has no path to
/// probe, if it has none: an address of this host is delivered locally and never sent; a
/// broadcast or multicast address is not one host (and the kernel refuses ICMP echo to a
/// broadcast address from a socket without `SO_BROADCAST`: "Permission denied").
pub fn unprobeable(route: &Route) -> Option<String> {
    let (target, dev, mtu) = (route.target, &route.iface, route.mtu);
    match route.kind {
        RouteKind::Unicast | RouteKind::Other => None,
        RouteKind::Local => Some(format!(
            "{target} is an address of this host: the kernel delivers packets to it locally \
             (through {dev}, MTU {mtu}) and never sends them, so there is no path to probe; \
             probe another host's address, such as a tunnel's endpoint or a gateway"
        )),
        RouteKind::Broadcast => Some(format!(
            "{target} is a broadcast address (on {dev}), not a host: the kernel \
             refuses ICMP echo to it without SO_BROADCAST (\"Permission denied\"), and every \
             host of the subnet would answer one; probe one host's address instead, such as \
             the gateway (`ip route show dev {dev}`)"
        )),
        RouteKind::Multicast => Some(format!(
            "{target} is a multicast address (through {dev}), not a host: every member of the \
             group would answer, so no one path is measured; probe one host's address instead"
        )),
    }
}

/// Adds probe results to the facts: per peer, for the tunnel, and in `probe`.
pub fn apply_probes(facts: &mut Facts, tun: &ConfiguredTunnel, results: &[(String, ProbeResult)]) {
    // A probe that met random loss, or ran out of time, gives only a lower bound: no MTU
    // conclusion from it.
    let answered: Vec<&(String, ProbeResult)> = results
        .iter()
        .filter(|(_, r)| r.path_mtu.is_some() && !r.lossy && !r.incomplete)
        .collect();
    facts.probe.lossy = results.iter().any(|(_, r)| r.lossy);
    for (label, r) in &answered {
        let mtu = r.path_mtu.map_or(-1, i64::from);
        if let Some(ep) = label.strip_prefix("endpoint ") {
            for p in facts.peers.iter_mut().filter(|p| p.endpoint == ep) {
                p.path_mtu = mtu;
                p.blackhole = r.blackhole;
            }
            if facts.tunnel.path_mtu < 0 || mtu < facts.tunnel.path_mtu {
                facts.tunnel.path_mtu = mtu;
            }
        }
    }
    // Through an underlay that is itself a tunnel, the probe may be answered at a size the
    // outer tunnel only carries in fragments: the chain's limit stays.
    let mut path = facts.tunnel.path_mtu;
    if !facts.tunnel.underlay_chain.is_empty() && facts.tunnel.effective_underlay_mtu > 0 {
        path = path.min(facts.tunnel.effective_underlay_mtu);
    }
    if let (Ok(path_mtu), Some(kind)) = (u32::try_from(path), tun.kind) {
        if path_mtu > 0 {
            let fam = crate::facts::overhead::AddrFamily::from_name(&facts.tunnel.family);
            facts.tunnel.effective_underlay_mtu = i64::from(path_mtu);
            facts.tunnel.overhead_expected =
                i64::from(crate::facts::overhead::overhead(kind, fam, path_mtu));
            facts.tunnel.max_mtu =
                i64::from(crate::facts::overhead::max_tunnel_mtu(kind, fam, path_mtu));
        }
    }
    if let Some((_, first)) = answered.iter().min_by_key(|(_, r)| r.path_mtu) {
        facts.probe.ran = true;
        facts.probe.target = first.target.to_string();
        facts.probe.family = if first.target.to_canonical().is_ipv4() {
            "ipv4"
        } else {
            "ipv6"
        }
        .into();
        facts.probe.path_mtu = first.path_mtu.map_or(-1, i64::from);
    }
    facts.probe.blackhole = answered.iter().any(|(_, r)| r.blackhole);
    facts.probe.too_big_reported = answered.iter().any(|(_, r)| !r.too_big.is_empty());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(target: &str, iface: &str, mtu: u32, kind: RouteKind) -> Route {
        Route {
            target: target.parse().expect("address"),
            ifindex: 1,
            iface: iface.into(),
            mtu,
            cached_pmtu: None,
            gateway: None,
            source: None,
            kind,
        }
    }

    /// What the kernel answers for 127.0.0.1 (or the host's own address), a subnet's
    /// broadcast address and a multicast group each says why there is no path to probe,
    /// and never mentions a --max-size nobody gave; a host is probed.
    #[test]
    fn local_broadcast_and_multicast_destinations_are_named() {
        let local = unprobeable(&route("127.0.0.1", "lo", 65536, RouteKind::Local));
        let local = local.expect("a local address is not probed");
        assert!(
            local.contains("address of this host") && local.contains("lo, MTU 65536"),
            "{local}"
        );
        let brd = unprobeable(&route("10.1.2.255", "eth0", 1500, RouteKind::Broadcast));
        let brd = brd.expect("a broadcast address is not probed");
        assert!(
            brd.contains("broadcast address")
                && brd.contains("SO_BROADCAST")
                && brd.contains("probe one host's address"),
            "{brd}"
        );
        let group = unprobeable(&route("224.0.0.1", "eth0", 1500, RouteKind::Multicast));
        assert!(group.is_some_and(|m| m.contains("multicast address")));
        for message in [&local, &brd] {
            assert!(!message.contains("--max-size"), "{message}");
        }
        assert_eq!(
            unprobeable(&route("10.1.2.3", "eth0", 1500, RouteKind::Unicast)),
            None
        );
    }
}

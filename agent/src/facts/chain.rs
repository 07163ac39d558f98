//! Tunnels inside tunnels: when a tunnel's underlay is itself a tunnel (VXLAN or GENEVE
//! over WireGuard, WireGuard over WireGuard), the chain of underlays down to the first
//! interface that is not a tunnel, and the largest packet that chain carries unfragmented:
//! each tunnel's own MTU, and what the one below it carries minus its overhead.

use super::overhead::{self, AddrFamily};
use super::underlay::{self, is_tunnel_kind};
use crate::config::iface::Interface;
use crate::config::{link, tunnel};

/// At most this many interfaces are followed (a loop of routes ends here too).
const MAX_HOPS: usize = 6;

/// One interface below the tunnel.
#[derive(Debug, Clone, PartialEq)]
pub struct Hop {
    /// Interface name.
    pub name: String,
    /// Its tunnel kind ("wireguard", "vxlan", …); "" for the interface at the bottom.
    pub kind: String,
    /// Bytes its encapsulation adds (0 at the bottom, or when its kind is unknown).
    pub overhead: u32,
    /// Its MTU.
    pub mtu: u32,
}

/// The interfaces below a tunnel, outermost last; empty when the underlay is no tunnel.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Chain {
    /// The underlay first, then its underlay, down to the interface that is not a tunnel.
    pub hops: Vec<Hop>,
}

impl Chain {
    /// The largest packet the chain carries without fragmenting (None when empty).
    pub fn carries(&self) -> Option<u32> {
        self.hops.iter().rev().fold(None, |below, hop| {
            let fits = below.map_or(hop.mtu, |b: u32| b.saturating_sub(hop.overhead));
            Some(fits.min(hop.mtu))
        })
    }

    /// "wg0 (wireguard, 60 bytes, MTU 1420) over eth0 (MTU 1500)"; "" when empty.
    pub fn describe(&self) -> String {
        self.hops
            .iter()
            .map(|h| match (h.kind.is_empty(), h.overhead) {
                (true, _) => format!("{} (MTU {})", h.name, h.mtu),
                (false, 0) => format!("{} ({}, MTU {})", h.name, h.kind, h.mtu),
                (false, o) => format!("{} ({}, {o} bytes, MTU {})", h.name, h.kind, h.mtu),
            })
            .collect::<Vec<_>>()
            .join(" over ")
    }
}

/// The chain below a tunnel whose underlay is `underlay`: empty unless that is a tunnel.
/// Each tunnel in it is identified as the tunnel being diagnosed is (its configuration,
/// under the same trust rules), and its underlay found by its endpoints' routes.
pub async fn below(underlay: Option<&Interface>, all: &[Interface]) -> Chain {
    let mut chain = Chain::default();
    let Some(first) = underlay.filter(|u| is_tunnel_kind(&u.kind)) else {
        return chain;
    };
    let mut next = Some(first.clone());
    while let Some(iface) = next.take() {
        if chain.hops.len() >= MAX_HOPS || chain.hops.iter().any(|h| h.name == iface.name) {
            break;
        }
        if !is_tunnel_kind(&iface.kind) {
            chain.hops.push(hop(&iface, String::new(), 0));
            break;
        }
        let Ok(details) = link::details(iface.index).await else {
            chain.hops.push(hop(&iface, "other".into(), 0));
            break;
        };
        let tun = tunnel::identify(&iface, &details).await;
        let under = underlay::underlay(&tun, &details, all).await;
        let fam = if tun
            .endpoints
            .iter()
            .any(|e| !e.ip().to_canonical().is_ipv4())
        {
            AddrFamily::V6
        } else {
            AddrFamily::V4
        };
        let at = under.route_mtu.unwrap_or(1500);
        let bytes = tun.kind.map_or(0, |k| overhead::overhead(k, fam, at));
        chain.hops.push(hop(&iface, tun.kind_name(), bytes));
        next = under.iface;
    }
    chain
}

fn hop(iface: &Interface, kind: String, overhead: u32) -> Hop {
    Hop {
        name: iface.name.clone(),
        kind,
        overhead,
        mtu: iface.mtu,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(name: &str, kind: &str, overhead: u32, mtu: u32) -> Hop {
        Hop {
            name: name.into(),
            kind: kind.into(),
            overhead,
            mtu,
        }
    }

    #[test]
    fn a_chain_carries_its_narrowest_fit() {
        // VXLAN inside a 1420 WireGuard over a 1500 veth: 1420 (1370 for VXLAN's MTU).
        let wg = Chain {
            hops: vec![h("wg0", "wireguard", 60, 1420), h("eth0", "", 0, 1500)],
        };
        assert_eq!(wg.carries(), Some(1420));
        assert_eq!(
            wg.describe(),
            "wg0 (wireguard, 60 bytes, MTU 1420) over eth0 (MTU 1500)"
        );
        // A WireGuard left at 1500 itself fits only 1440 on the veth.
        let wide = Chain {
            hops: vec![h("wg0", "wireguard", 60, 1500), h("eth0", "", 0, 1500)],
        };
        assert_eq!(wide.carries(), Some(1440));
        // WireGuard over WireGuard over a 1400 link.
        let two = Chain {
            hops: vec![
                h("wg1", "wireguard", 60, 1420),
                h("wg0", "wireguard", 60, 1420),
                h("eth0", "", 0, 1400),
            ],
        };
        assert_eq!(two.carries(), Some(1280));
        assert_eq!(Chain::default().carries(), None);
        assert_eq!(Chain::default().describe(), "");
    }
}

//! Route look-ups over rtnetlink: which interface and MTU the kernel would use toward an
//! address, including a cached path-MTU exception learnt from ICMP.

use std::net::IpAddr;

use futures::TryStreamExt;
use rtnetlink::packet_route::route::{RouteAddress, RouteAttribute, RouteMetric};
use rtnetlink::RouteMessageBuilder;
use serde::Serialize;

use super::error::{Error, Result};

/// The kernel's answer to "how do I reach this address?".
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Route {
    /// The destination asked about.
    pub target: IpAddr,
    /// Output interface index.
    pub ifindex: u32,
    /// Output interface name.
    pub iface: String,
    /// MTU toward the target: the route's (or cached exception's) MTU, else the device's.
    pub mtu: u32,
    /// A path MTU learnt from an ICMP too-big message and cached for this destination.
    pub cached_pmtu: Option<u32>,
    /// Next hop, when not directly connected.
    pub gateway: Option<IpAddr>,
    /// Preferred source address.
    pub source: Option<IpAddr>,
}

fn address(a: &RouteAddress) -> Option<IpAddr> {
    match a {
        RouteAddress::Inet(v4) => Some(IpAddr::V4(*v4)),
        RouteAddress::Inet6(v6) => Some(IpAddr::V6(*v6)),
        _ => None,
    }
}

/// Resolves the route toward `target` in the caller's network namespace.
pub async fn get(target: IpAddr) -> Result<Route> {
    get_among(target, &crate::facts::iface::list().await?).await
}

/// Like [`get`], with the namespace's interfaces already listed (`links`), for callers that
/// resolve several routes at once.
pub async fn get_among(target: IpAddr, links: &[crate::facts::iface::Interface]) -> Result<Route> {
    let (conn, handle, _) =
        rtnetlink::new_connection().map_err(|e| Error::Netlink(e.to_string()))?;
    let task = tokio::spawn(conn);
    let prefix = if target.is_ipv4() { 32 } else { 128 };
    let message = RouteMessageBuilder::<IpAddr>::new()
        .destination_prefix(target, prefix)
        .map_err(|e| Error::Netlink(e.to_string()))?
        .build();
    let answer: Vec<_> = handle
        .route()
        .get(message)
        .execute()
        .try_collect()
        .await
        .map_err(|e| Error::Netlink(format!("no route to {target}: {e}")))?;
    task.abort();
    let msg = answer
        .first()
        .ok_or_else(|| Error::Netlink(format!("no route to {target}")))?;
    let mut ifindex = 0;
    let mut cached_pmtu = None;
    let mut gateway = None;
    let mut source = None;
    for attr in &msg.attributes {
        match attr {
            RouteAttribute::Oif(i) => ifindex = *i,
            RouteAttribute::Gateway(g) => gateway = address(g),
            RouteAttribute::PrefSource(s) => source = address(s),
            RouteAttribute::Metrics(metrics) => {
                cached_pmtu = metrics.iter().find_map(|m| match m {
                    RouteMetric::Mtu(mtu) if *mtu > 0 => Some(*mtu),
                    _ => None,
                })
            }
            _ => {}
        }
    }
    let dev = links
        .iter()
        .find(|i| i.index == ifindex)
        .cloned()
        .ok_or_else(|| {
            Error::Netlink(format!(
                "route to {target} uses unknown interface {ifindex}"
            ))
        })?;
    Ok(Route {
        target,
        ifindex,
        mtu: cached_pmtu.map_or(dev.mtu, |p| p.min(dev.mtu)),
        iface: dev.name,
        cached_pmtu,
        gateway,
        source,
    })
}

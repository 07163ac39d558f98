//! Route look-ups over rtnetlink (`RTM_GETROUTE`, as `ip route get` asks): which interface
//! and MTU the kernel would use toward an address, including a cached path-MTU exception
//! learnt from ICMP, or which way it forwards a packet that arrived on an interface.

use std::net::IpAddr;
use std::time::Duration;

use futures::TryStreamExt;
use rtnetlink::packet_route::route::{RouteAddress, RouteAttribute, RouteMetric, RouteType};
use rtnetlink::RouteMessageBuilder;
use serde::Serialize;

use super::error::{Error, Result};
use super::iface::Interface;

/// How long one look-up may take: the kernel answers at once, this only bounds the wait.
const LOOKUP_TIMEOUT: Duration = Duration::from_secs(1);

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
    /// What the kernel takes the destination for.
    pub kind: RouteKind,
}

/// A packet that arrived on an interface, for the route the kernel forwards it by (`ip
/// route get TARGET from SOURCE iif IFACE ipproto P sport S dport D`): policy rules that
/// match on where it came from, its protocol or ports choose the table as for the packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arrival {
    /// Its source address.
    pub source: IpAddr,
    /// The interface it arrived on.
    pub iif: u32,
    /// IP protocol number.
    pub protocol: u8,
    /// Ports, for TCP, UDP and SCTP (0 otherwise).
    pub sport: u16,
    /// Destination port.
    pub dport: u16,
}

/// The type of the route the kernel answers with: what it takes the destination for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RouteKind {
    /// Another host, directly or through a gateway.
    Unicast,
    /// An address of this host: delivered locally, never sent.
    Local,
    /// A broadcast address (of a subnet, or 255.255.255.255).
    Broadcast,
    /// A multicast group.
    Multicast,
    /// Anything else (unreachable, prohibited, blackhole...).
    Other,
}

impl From<RouteType> for RouteKind {
    fn from(t: RouteType) -> Self {
        match t {
            RouteType::Unicast => RouteKind::Unicast,
            RouteType::Local => RouteKind::Local,
            RouteType::Broadcast => RouteKind::Broadcast,
            RouteType::Multicast => RouteKind::Multicast,
            _ => RouteKind::Other,
        }
    }
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
    get_among(target, &crate::config::iface::list().await?).await
}

/// Like [`get`], with the namespace's interfaces already listed (`links`).
pub async fn get_among(target: IpAddr, links: &[Interface]) -> Result<Route> {
    Resolver::new()?.get(target, None, links).await
}

/// One rtnetlink connection for several look-ups.
pub struct Resolver {
    handle: rtnetlink::Handle,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Resolver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Resolver {
    /// Opens the connection (in the caller's network namespace).
    pub fn new() -> Result<Self> {
        let (conn, handle, _) =
            rtnetlink::new_connection().map_err(|e| Error::Netlink(e.to_string()))?;
        Ok(Resolver {
            handle,
            task: tokio::spawn(conn),
        })
    }

    /// The route toward `target`: the one this host's own packets take, or with `arrival`
    /// the one a packet that arrived that way is forwarded by (an error when the kernel
    /// would not forward it: forwarding off, no route, reverse-path filter). `links` are
    /// the namespace's interfaces.
    pub async fn get(
        &self,
        target: IpAddr,
        arrival: Option<&Arrival>,
        links: &[Interface],
    ) -> Result<Route> {
        let prefix = if target.is_ipv4() { 32 } else { 128 };
        let nl = |e| Error::Netlink(format!("route to {target}: {e}"));
        let mut builder = RouteMessageBuilder::<IpAddr>::new()
            .destination_prefix(target, prefix)
            .map_err(nl)?;
        if let Some(a) = arrival {
            builder = builder
                .source_prefix(a.source, prefix)
                .map_err(nl)?
                .input_interface(a.iif)
                .ip_protocol(a.protocol);
            if matches!(a.protocol, 6 | 17 | 132) {
                builder = builder.sport(a.sport).dport(a.dport);
            }
        }
        let request = self.handle.route().get(builder.build()).execute();
        let answer: Vec<_> = tokio::time::timeout(LOOKUP_TIMEOUT, request.try_collect())
            .await
            .map_err(|_| Error::Netlink(format!("no answer about the route to {target}")))?
            .map_err(|e| Error::Netlink(format!("no route to {target}: {e}")))?;
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
            kind: msg.header.kind.into(),
        })
    }
}

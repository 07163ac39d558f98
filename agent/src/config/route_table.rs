//! The routing table as rtnetlink dumps it (both families, every table but `local`): a
//! gateway's default route (its uplink) and multipath routes (ECMP) with their nexthops.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use futures::TryStreamExt;
use rtnetlink::packet_route::route::{
    RouteAddress, RouteAttribute, RouteHeader, RouteMessage, RouteType,
};
use rtnetlink::RouteMessageBuilder;
use serde::Serialize;

use super::error::{Error, Result};
use super::prefix::Prefix;

/// `RT_TABLE_LOCAL`: the host's own addresses, not forwarding.
const TABLE_LOCAL: u32 = 255;

/// One way out of a route.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Nexthop {
    /// Output interface index.
    pub ifindex: u32,
    /// Relative weight (`ip route … weight N`; 1 without one).
    pub weight: u32,
    /// Next router, if not directly connected.
    pub gateway: Option<IpAddr>,
}

/// A unicast route.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TableRoute {
    /// Destination prefix (`0.0.0.0/0` for a default route).
    pub destination: Prefix,
    /// Routing table.
    pub table: u32,
    /// One nexthop, or several for a multipath route.
    pub nexthops: Vec<Nexthop>,
}

impl TableRoute {
    /// More than one nexthop: the kernel spreads flows by hashing.
    pub fn is_multipath(&self) -> bool {
        self.nexthops.len() > 1
    }

    /// A default route of the main table.
    pub fn is_default(&self) -> bool {
        self.destination.is_default() && self.table == u32::from(RouteHeader::RT_TABLE_MAIN)
    }
}

fn address(a: &RouteAddress) -> Option<IpAddr> {
    match a {
        RouteAddress::Inet(v4) => Some(IpAddr::V4(*v4)),
        RouteAddress::Inet6(v6) => Some(IpAddr::V6(*v6)),
        _ => None,
    }
}

/// A route message as a [`TableRoute`], if it is a unicast route outside `local`.
fn parse(msg: &RouteMessage) -> Option<TableRoute> {
    if msg.header.kind != RouteType::Unicast {
        return None;
    }
    let mut table = u32::from(msg.header.table);
    let mut destination = None;
    let mut oif = None;
    let mut gateway = None;
    let mut nexthops = Vec::new();
    for attr in &msg.attributes {
        match attr {
            RouteAttribute::Table(t) => table = *t,
            RouteAttribute::Destination(d) => destination = address(d),
            RouteAttribute::Oif(i) => oif = Some(*i),
            RouteAttribute::Gateway(g) => gateway = address(g),
            RouteAttribute::MultiPath(hops) => {
                nexthops = hops
                    .iter()
                    .map(|h| Nexthop {
                        ifindex: h.interface_index,
                        weight: u32::from(h.hops) + 1,
                        gateway: h.attributes.iter().find_map(|a| match a {
                            RouteAttribute::Gateway(g) => address(g),
                            _ => None,
                        }),
                    })
                    .collect();
            }
            _ => {}
        }
    }
    if table == TABLE_LOCAL {
        return None;
    }
    let unspecified = match msg.header.address_family {
        rtnetlink::packet_route::AddressFamily::Inet6 => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
        _ => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
    };
    let destination = Prefix::new(
        destination.unwrap_or(unspecified),
        msg.header.destination_prefix_length,
    );
    if nexthops.is_empty() {
        nexthops.push(Nexthop {
            ifindex: oif?,
            weight: 1,
            gateway,
        });
    }
    Some(TableRoute {
        destination,
        table,
        nexthops,
    })
}

/// Every unicast route of the caller's namespace, IPv4 then IPv6.
pub async fn dump() -> Result<Vec<TableRoute>> {
    let (conn, handle, _) =
        rtnetlink::new_connection().map_err(|e| Error::Netlink(e.to_string()))?;
    let task = tokio::spawn(conn);
    let netlink = |e: rtnetlink::Error| Error::Netlink(format!("dumping routes: {e}"));
    let mut messages: Vec<RouteMessage> = handle
        .route()
        .get(RouteMessageBuilder::<Ipv4Addr>::new().build())
        .execute()
        .try_collect()
        .await
        .map_err(netlink)?;
    let v6: Vec<RouteMessage> = handle
        .route()
        .get(RouteMessageBuilder::<Ipv6Addr>::new().build())
        .execute()
        .try_collect()
        .await
        .map_err(netlink)?;
    task.abort();
    messages.extend(v6);
    Ok(messages.iter().filter_map(parse).collect())
}

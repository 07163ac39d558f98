//! A bridge and its ports, for an interface that is a bridge or a port of one: read from
//! the links' controllers over rtnetlink. What crossed the ports is `facts::bridge`'s.

use rtnetlink::packet_route::link::LinkAttribute;

use super::iface::{IfaceKind, Interface};
use super::link::LinkDetails;
use super::Result;

/// A bridge and the interfaces attached to it.
#[derive(Debug, Clone)]
pub struct Bridge {
    /// The bridge device.
    pub bridge: Interface,
    /// Its ports that are up (a port that is down forwards nothing), smallest MTU first.
    pub ports: Vec<Interface>,
}

/// Every link's controller (the bridge or bond it is attached to): (index, controller).
pub(crate) async fn controllers() -> Result<Vec<(u32, u32)>> {
    let links = crate::config::link::all("reading bridge ports").await?;
    Ok(links
        .iter()
        .filter_map(|l| {
            l.attributes.iter().find_map(|a| match a {
                LinkAttribute::Controller(c) => Some((l.header.index, *c)),
                _ => None,
            })
        })
        .collect())
}

/// The bridge `me` is, or is a port of (`details.controller`), with its ports; `None`
/// when it is neither.
pub async fn of(
    me: &Interface,
    details: &LinkDetails,
    all: &[Interface],
) -> Result<Option<Bridge>> {
    let bridge = if me.kind == IfaceKind::Bridge {
        me.clone()
    } else {
        let controller = details
            .controller
            .and_then(|c| all.iter().find(|i| i.index == c));
        match controller {
            Some(c) if c.kind == IfaceKind::Bridge => c.clone(),
            _ => return Ok(None),
        }
    };
    let attached = controllers().await?;
    Ok(Some(ports_of(bridge, &attached, all)))
}

/// The bridge's ports among `all` (`attached`: every link's controller), up ones only,
/// smallest MTU first.
pub(crate) fn ports_of(bridge: Interface, attached: &[(u32, u32)], all: &[Interface]) -> Bridge {
    let mut ports: Vec<Interface> = attached
        .iter()
        .filter(|(_, c)| *c == bridge.index)
        .filter_map(|(i, _)| all.iter().find(|a| a.index == *i && a.up).cloned())
        .collect();
    ports.sort_by_key(|p| (p.mtu, p.index));
    Bridge { bridge, ports }
}

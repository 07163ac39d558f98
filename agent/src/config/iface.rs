//! Interfaces as the kernel describes them over rtnetlink: index, MTU, kind, link type.
//!
//! Netlink answers for the caller's network namespace, unlike `/sys/class/net`, which shows
//! the namespace /sys was mounted in (wrong under `nsenter --net`).

use futures::TryStreamExt;
use rtnetlink::packet_route::link::{
    InfoKind, LinkAttribute, LinkFlags, LinkInfo, LinkLayerType, LinkMessage,
};
use serde::Serialize;

pub use crate::kernel::packet::LinkType;
use crate::kernel::packet::Target;

use super::error::{Error, Result};

/// What kind of device an interface is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum IfaceKind {
    /// A NIC driven by hardware (no rtnetlink kind).
    Physical,
    /// The loopback device.
    Loopback,
    /// Kernel WireGuard, or a TUN device served by a userspace WireGuard: one with a UAPI
    /// socket (wireguard-go, boringtun), or tailscaled.
    Wireguard,
    /// A layer-3 TUN device (OpenVPN, fastd/tinc in TUN mode, ...).
    Tun,
    /// A layer-2 TAP device (tinc, fastd in TAP mode, ...).
    Tap,
    /// VXLAN.
    Vxlan,
    /// GENEVE.
    Geneve,
    /// An IP tunnel: gre, gretap, ip6gre, ip6gretap, ipip, sit or ip6tnl.
    IpTunnel(String),
    /// One end of a veth pair.
    Veth,
    /// A bridge.
    Bridge,
    /// A bond.
    Bond,
    /// Anything else rtnetlink names.
    Other(String),
}

impl std::fmt::Display for IfaceKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = match self {
            IfaceKind::Physical => "physical",
            IfaceKind::Loopback => "loopback",
            IfaceKind::Wireguard => "wireguard",
            IfaceKind::Tun => "tun",
            IfaceKind::Tap => "tap",
            IfaceKind::Vxlan => "vxlan",
            IfaceKind::Geneve => "geneve",
            IfaceKind::IpTunnel(kind) => kind,
            IfaceKind::Veth => "veth",
            IfaceKind::Bridge => "bridge",
            IfaceKind::Bond => "bond",
            IfaceKind::Other(kind) => kind,
        };
        f.write_str(name)
    }
}

/// One network interface.
#[derive(Debug, Clone, Serialize)]
pub struct Interface {
    /// Name, e.g. `wg0`.
    pub name: String,
    /// Kernel interface index.
    pub index: u32,
    /// MTU in bytes (IP packet size).
    pub mtu: u32,
    /// Device kind.
    pub kind: IfaceKind,
    /// Framing of packets the hooks see.
    pub link: LinkType,
    /// Administratively up.
    pub up: bool,
}

impl Interface {
    /// The interface as the data plane attaches to it.
    pub fn target(&self) -> Target {
        Target {
            index: self.index,
            name: self.name.clone(),
            mtu: self.mtu,
            link: self.link,
        }
    }

    /// The interface a link message describes (`None` without a name).
    pub(crate) fn parse(msg: &LinkMessage) -> Option<Self> {
        Self::from_message(msg)
    }

    fn from_message(msg: &LinkMessage) -> Option<Self> {
        let mut name = None;
        let mut mtu = 0;
        let mut info_kind = None;
        for attr in &msg.attributes {
            match attr {
                LinkAttribute::IfName(n) => name = Some(n.clone()),
                LinkAttribute::Mtu(m) => mtu = *m,
                LinkAttribute::LinkInfo(infos) => {
                    info_kind = infos.iter().find_map(|i| match i {
                        LinkInfo::Kind(k) => Some(k.clone()),
                        _ => None,
                    })
                }
                _ => {}
            }
        }
        let name = name?;
        let layer = msg.header.link_layer_type;
        // Loopback frames carry a (zeroed) Ethernet header too.
        let link = if layer == LinkLayerType::Ether || layer == LinkLayerType::Loopback {
            LinkType::Ether
        } else {
            LinkType::RawIp
        };
        let kind = match info_kind {
            None if layer == LinkLayerType::Loopback => IfaceKind::Loopback,
            None => IfaceKind::Physical,
            Some(InfoKind::Wireguard) => IfaceKind::Wireguard,
            Some(InfoKind::Tun)
                if crate::config::wireguard::has_wireguard_uapi(&name)
                    || crate::config::wireguard::tailscale::serves(&name) =>
            {
                IfaceKind::Wireguard
            }
            Some(InfoKind::Tun) if link == LinkType::Ether => IfaceKind::Tap,
            Some(InfoKind::Tun) => IfaceKind::Tun,
            Some(InfoKind::Vxlan) => IfaceKind::Vxlan,
            Some(InfoKind::Geneve) => IfaceKind::Geneve,
            Some(
                k @ (InfoKind::GreTun
                | InfoKind::GreTap
                | InfoKind::GreTun6
                | InfoKind::GreTap6
                | InfoKind::IpIp
                | InfoKind::SitTun
                | InfoKind::Ip6Tnl),
            ) => IfaceKind::IpTunnel(k.to_string()),
            Some(InfoKind::Veth) => IfaceKind::Veth,
            Some(InfoKind::Bridge) => IfaceKind::Bridge,
            Some(InfoKind::Bond) => IfaceKind::Bond,
            Some(other) => IfaceKind::Other(other.to_string()),
        };
        Some(Interface {
            name,
            index: msg.header.index,
            mtu,
            kind,
            link,
            up: msg.header.flags.contains(LinkFlags::Up),
        })
    }
}

/// Lists every interface of the caller's network namespace.
pub async fn list() -> Result<Vec<Interface>> {
    let (conn, handle, _) =
        rtnetlink::new_connection().map_err(|e| Error::Netlink(e.to_string()))?;
    let task = tokio::spawn(conn);
    let links: Vec<LinkMessage> = handle
        .link()
        .get()
        .execute()
        .try_collect()
        .await
        .map_err(|e| Error::Netlink(e.to_string()))?;
    task.abort();
    Ok(links.iter().filter_map(Interface::from_message).collect())
}

/// Looks up one interface by name.
pub async fn by_name(name: &str) -> Result<Interface> {
    list()
        .await?
        .into_iter()
        .find(|i| i.name == name)
        .ok_or_else(|| Error::UnknownInterface(name.to_owned()))
}

#[cfg(test)]
impl Interface {
    /// An up veth-like interface with index 0 and MTU 1500, for tests to fill in.
    pub(crate) fn test_default() -> Self {
        Interface {
            name: String::new(),
            index: 0,
            mtu: 1500,
            kind: IfaceKind::Veth,
            link: LinkType::Ether,
            up: true,
        }
    }

    /// A test veth named `name` with index `index`, MTU 1500, up.
    pub(crate) fn test_named(name: &str, index: u32) -> Self {
        Interface {
            name: name.into(),
            index,
            ..Self::test_default()
        }
    }
}

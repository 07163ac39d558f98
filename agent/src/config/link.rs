//! Link details rtnetlink knows beyond name and MTU: addresses, VXLAN/GENEVE remotes,
//! underlay devices and options, IP tunnels' settings ([`super::ip_tunnel`]), bond modes and
//! hash policies, bond membership.

use std::net::IpAddr;

use futures::TryStreamExt;
use rtnetlink::packet_route::address::{AddressAttribute, AddressMessage};
use rtnetlink::packet_route::link::{
    BondMode, BondXmitHashPolicy, GeneveDf, InfoBond, InfoData, InfoGeneve, InfoVxlan,
    LinkAttribute, LinkInfo, LinkMessage,
};
use serde::Serialize;

use super::error::{Error, Result};
use super::ip_tunnel::{self, IpTunnel};

/// A VXLAN or GENEVE device's encapsulation settings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Overlay {
    /// VNI.
    pub vni: u32,
    /// Unicast remote (or multicast group), if configured.
    pub remote: Option<IpAddr>,
    /// Local address, if configured.
    pub local: Option<IpAddr>,
    /// Destination UDP port.
    pub port: u16,
    /// Underlay device index, if pinned (`dev` option).
    pub underlay_ifindex: Option<u32>,
    /// GENEVE's settings as `ip -d link` names them (ttl, df, udpcsum, external, ...).
    pub options: Vec<String>,
}

/// A bond's load-balancing settings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Bond {
    /// Mode, e.g. "balance-xor", "802.3ad".
    pub mode: String,
    /// Transmit hash policy, e.g. "layer2", "layer3+4".
    pub xmit_hash_policy: String,
    /// Member interface names.
    pub members: Vec<String>,
}

/// Details of one link.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct LinkDetails {
    /// Addresses with prefix length, e.g. "10.250.0.1/24".
    pub addresses: Vec<String>,
    /// VXLAN settings.
    pub vxlan: Option<Overlay>,
    /// GENEVE settings.
    pub geneve: Option<Overlay>,
    /// GRE, GRETAP, IPIP, sit or ip6tnl settings.
    pub ip_tunnel: Option<IpTunnel>,
    /// Bond settings.
    pub bond: Option<Bond>,
    /// Index of the bond or bridge this link belongs to.
    pub controller: Option<u32>,
}

fn mode_name(m: &BondMode) -> String {
    match m {
        BondMode::BalanceRr => "balance-rr".into(),
        BondMode::ActiveBackup => "active-backup".into(),
        BondMode::BalanceXor => "balance-xor".into(),
        BondMode::Broadcast => "broadcast".into(),
        BondMode::Ieee8023Ad => "802.3ad".into(),
        BondMode::BalanceTlb => "balance-tlb".into(),
        BondMode::BalanceAlb => "balance-alb".into(),
        BondMode::Other(n) => format!("mode {n}"),
        other => format!("{other:?}").to_lowercase(),
    }
}

pub(crate) fn policy_name(p: &BondXmitHashPolicy) -> String {
    match p {
        BondXmitHashPolicy::Layer2 => "layer2".into(),
        BondXmitHashPolicy::Layer34 => "layer3+4".into(),
        BondXmitHashPolicy::Layer23 => "layer2+3".into(),
        BondXmitHashPolicy::Encap23 => "encap2+3".into(),
        BondXmitHashPolicy::Encap34 => "encap3+4".into(),
        BondXmitHashPolicy::VlanSrcMac => "vlan+srcmac".into(),
        BondXmitHashPolicy::Other(n) => format!("policy {n}"),
        other => format!("{other:?}").to_lowercase(),
    }
}

fn vxlan(infos: &[InfoVxlan]) -> Overlay {
    let mut o = Overlay {
        port: 4789,
        ..Overlay::default()
    };
    for i in infos {
        match i {
            InfoVxlan::Id(v) => o.vni = *v,
            InfoVxlan::Group(a) => o.remote = Some(IpAddr::V4(*a)),
            InfoVxlan::Group6(a) => o.remote = Some(IpAddr::V6(*a)),
            InfoVxlan::Local(a) => o.local = Some(IpAddr::V4(*a)),
            InfoVxlan::Local6(a) => o.local = Some(IpAddr::V6(*a)),
            InfoVxlan::Port(p) => o.port = *p,
            InfoVxlan::Link(l) if *l != 0 => o.underlay_ifindex = Some(*l),
            _ => {}
        }
    }
    o
}

fn geneve(infos: &[InfoGeneve]) -> Overlay {
    let mut o = Overlay {
        port: 6081,
        ..Overlay::default()
    };
    for i in infos {
        let option = match i {
            InfoGeneve::Id(v) => {
                o.vni = *v;
                None
            }
            InfoGeneve::Remote(a) => {
                o.remote = Some(IpAddr::V4(*a));
                None
            }
            InfoGeneve::Remote6(a) => {
                o.remote = Some(IpAddr::V6(*a));
                None
            }
            InfoGeneve::Local(a) => {
                o.local = Some(IpAddr::V4(*a));
                None
            }
            InfoGeneve::Local6(a) => {
                o.local = Some(IpAddr::V6(*a));
                None
            }
            InfoGeneve::Port(p) => {
                o.port = *p;
                None
            }
            InfoGeneve::Ttl(t) if *t != 0 => Some(format!("ttl {t}")),
            InfoGeneve::TtlInherit(true) => Some("ttl inherit".into()),
            InfoGeneve::Tos(t) if *t != 0 => Some(format!("tos {t}")),
            InfoGeneve::Df(GeneveDf::Set) => Some("df set".into()),
            InfoGeneve::Df(GeneveDf::Inherit) => Some("df inherit".into()),
            InfoGeneve::UdpCsum(true) => Some("udpcsum".into()),
            InfoGeneve::Label(l) if *l != 0 => Some(format!("flowlabel {l}")),
            // Metadata mode: remote, VNI and TLV options come per packet from tc or a
            // routing rule (lwtunnel), not from the device.
            InfoGeneve::CollectMetadata => Some("external".into()),
            InfoGeneve::InnerProtoInherit => Some("innerprotoinherit".into()),
            _ => None,
        };
        o.options.extend(option);
    }
    o
}

/// Every link of the caller's namespace as rtnetlink gives it; `what` names the reading in
/// an error ("reading bridge ports").
pub async fn all(what: &str) -> Result<Vec<LinkMessage>> {
    let (conn, handle, _) =
        rtnetlink::new_connection().map_err(|e| Error::Netlink(e.to_string()))?;
    let task = tokio::spawn(conn);
    let links = handle.link().get().execute().try_collect().await;
    task.abort();
    links.map_err(|e| Error::Netlink(format!("{what}: {e}")))
}

/// Reads the details of interface `index` in the caller's namespace.
pub async fn details(index: u32) -> Result<LinkDetails> {
    let (conn, handle, _) =
        rtnetlink::new_connection().map_err(|e| Error::Netlink(e.to_string()))?;
    let task = tokio::spawn(conn);
    let netlink = |e: rtnetlink::Error| Error::Netlink(e.to_string());
    let links: Vec<_> = handle
        .link()
        .get()
        .execute()
        .try_collect()
        .await
        .map_err(netlink)?;
    let addrs: Vec<_> = handle
        .address()
        .get()
        .set_link_index_filter(index)
        .execute()
        .try_collect()
        .await
        .map_err(netlink)?;
    task.abort();

    let mut d = LinkDetails {
        addresses: addrs.iter().filter_map(address).collect(),
        ..LinkDetails::default()
    };
    let Some(me) = links.iter().find(|l| l.header.index == index) else {
        return Ok(d);
    };
    for attr in &me.attributes {
        match attr {
            LinkAttribute::Controller(c) => d.controller = Some(*c),
            LinkAttribute::LinkInfo(infos) => link_info(&mut d, infos),
            _ => {}
        }
    }
    if let Some(bond) = d.bond.as_mut() {
        bond.members = links
            .iter()
            .filter(|l| {
                l.attributes
                    .iter()
                    .any(|a| matches!(a, LinkAttribute::Controller(c) if *c == index))
            })
            .filter_map(|l| name_of(&links, l.header.index))
            .collect();
    }
    Ok(d)
}

/// "address/prefix" of an address message: its local address, else its address.
fn address(a: &AddressMessage) -> Option<String> {
    let ip = a.attributes.iter().find_map(|attr| match attr {
        AddressAttribute::Local(ip) => Some(*ip),
        _ => None,
    });
    let ip = ip.or_else(|| {
        a.attributes.iter().find_map(|attr| match attr {
            AddressAttribute::Address(ip) => Some(*ip),
            _ => None,
        })
    });
    ip.map(|ip| format!("{ip}/{}", a.header.prefix_len))
}

/// The name of interface `idx` among `links`.
fn name_of(links: &[LinkMessage], idx: u32) -> Option<String> {
    links.iter().find(|l| l.header.index == idx).and_then(|l| {
        l.attributes.iter().find_map(|a| match a {
            LinkAttribute::IfName(n) => Some(n.clone()),
            _ => None,
        })
    })
}

/// The kind-specific details of a link: VXLAN, Geneve, bond or IP tunnel.
fn link_info(d: &mut LinkDetails, infos: &[LinkInfo]) {
    let kind = infos.iter().find_map(|i| match i {
        LinkInfo::Kind(k) => Some(k.clone()),
        _ => None,
    });
    for info in infos {
        match info {
            LinkInfo::Data(InfoData::Vxlan(v)) => d.vxlan = Some(vxlan(v)),
            LinkInfo::Data(InfoData::Geneve(g)) => d.geneve = Some(geneve(g)),
            LinkInfo::Data(InfoData::Bond(b)) => d.bond = Some(bond(b)),
            LinkInfo::Data(data) => {
                d.ip_tunnel = kind.as_ref().and_then(|k| ip_tunnel::from_info(k, data))
            }
            _ => {}
        }
    }
}

/// A bond's mode and transmit hash policy.
fn bond(b: &[InfoBond]) -> Bond {
    let mut bond = Bond::default();
    for i in b {
        match i {
            InfoBond::Mode(m) => bond.mode = mode_name(m),
            InfoBond::XmitHashPolicy(p) => bond.xmit_hash_policy = policy_name(p),
            _ => {}
        }
    }
    bond
}

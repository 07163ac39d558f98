//! Every link and address of the caller's network namespace in one rtnetlink exchange: what
//! the agent's configuration timeline compares from one reading to the next (MTU, up or
//! down, the bond or bridge a link belongs to, a bond's hash policy, addresses).

use std::collections::BTreeMap;

use futures::TryStreamExt;
use rtnetlink::packet_route::address::{AddressAttribute, AddressMessage};
use rtnetlink::packet_route::link::{InfoBond, InfoData, LinkAttribute, LinkInfo, LinkMessage};

use super::error::{Error, Result};
use super::iface::Interface;

/// One link as the timeline compares it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkState {
    /// Name.
    pub name: String,
    /// Kernel interface index.
    pub index: u32,
    /// Kind (`wireguard`, `veth`, ...).
    pub kind: String,
    /// MTU in bytes.
    pub mtu: u32,
    /// Administratively up.
    pub up: bool,
    /// The bond or bridge it belongs to, by name ("" if none).
    pub master: String,
    /// A bond's transmit hash policy ("" if not a bond).
    pub bond_hash_policy: String,
    /// Addresses with prefix length (`10.0.0.1/24`), sorted.
    pub addresses: Vec<String>,
}

/// Reads every link with its addresses, by name.
pub async fn read() -> Result<BTreeMap<String, LinkState>> {
    let (conn, handle, _) =
        rtnetlink::new_connection().map_err(|e| Error::Netlink(e.to_string()))?;
    let task = tokio::spawn(conn);
    let netlink = |e: rtnetlink::Error| Error::Netlink(format!("reading links: {e}"));
    let links: std::result::Result<Vec<LinkMessage>, _> =
        handle.link().get().execute().try_collect().await;
    let addrs: std::result::Result<Vec<AddressMessage>, _> =
        handle.address().get().execute().try_collect().await;
    task.abort();
    Ok(assemble(&links.map_err(netlink)?, &addrs.map_err(netlink)?))
}

/// The links of `links` with the addresses of `addrs`.
fn assemble(links: &[LinkMessage], addrs: &[AddressMessage]) -> BTreeMap<String, LinkState> {
    let names: BTreeMap<u32, String> = links
        .iter()
        .filter_map(|l| Some((l.header.index, link_name(l)?)))
        .collect();
    let mut out = BTreeMap::new();
    for msg in links {
        let Some(iface) = Interface::parse(msg) else {
            continue;
        };
        let mut master = String::new();
        let mut policy = String::new();
        for attr in &msg.attributes {
            match attr {
                LinkAttribute::Controller(c) => {
                    master = names.get(c).cloned().unwrap_or_else(|| format!("#{c}"))
                }
                LinkAttribute::LinkInfo(infos) => {
                    for info in infos {
                        if let LinkInfo::Data(InfoData::Bond(b)) = info {
                            policy = b
                                .iter()
                                .find_map(|i| match i {
                                    InfoBond::XmitHashPolicy(p) => {
                                        Some(super::link::policy_name(p))
                                    }
                                    _ => None,
                                })
                                .unwrap_or_default();
                        }
                    }
                }
                _ => {}
            }
        }
        let mut addresses: Vec<String> = addrs
            .iter()
            .filter(|a| a.header.index == msg.header.index)
            .filter_map(address)
            .collect();
        addresses.sort();
        out.insert(
            iface.name.clone(),
            LinkState {
                name: iface.name,
                index: iface.index,
                kind: iface.kind.to_string(),
                mtu: iface.mtu,
                up: iface.up,
                master,
                bond_hash_policy: policy,
                addresses,
            },
        );
    }
    out
}

fn link_name(l: &LinkMessage) -> Option<String> {
    l.attributes.iter().find_map(|a| match a {
        LinkAttribute::IfName(n) => Some(n.clone()),
        _ => None,
    })
}

/// `address/prefix`: the local address (a point-to-point link's own), else the address.
fn address(a: &AddressMessage) -> Option<String> {
    let find = |local: bool| {
        a.attributes.iter().find_map(|attr| match attr {
            AddressAttribute::Local(ip) if local => Some(*ip),
            AddressAttribute::Address(ip) if !local => Some(*ip),
            _ => None,
        })
    };
    let ip = find(true).or_else(|| find(false))?;
    Some(format!("{ip}/{}", a.header.prefix_len))
}

//! Reading a snapshot: links, addresses and routes (what rtnetlink notifies, read again on
//! each notification), and each window the sysctls, the firewall's rules and the peers of
//! the interfaces evaluated, in the words people use ("1 (strict)", "dev wg0").

use std::collections::BTreeMap;

use super::snapshot::{Section, Snapshot};
use super::Kind;
use crate::config::firewall::{Match, Ruleset};
use crate::config::iface::{IfaceKind, Interface};
use crate::config::inventory::{self, LinkState};
use crate::config::route_table::{self, TableRoute};
use crate::config::sysctl;
use crate::facts::Facts;

/// What a window already read, reused for its snapshot.
#[derive(Debug, Clone, Copy)]
pub struct WindowParts<'a> {
    /// The routing table (`None`: it could not be read).
    pub routes: Option<&'a [TableRoute]>,
    /// The firewall's NAT and clamping rules.
    pub firewall: &'a Ruleset,
}

/// Links, addresses and routes, as read now.
pub async fn read_fast() -> Snapshot {
    let routes = route_table::dump().await.ok();
    read_links_routes(routes.as_deref()).await.0
}

/// Everything the timeline compares, as read now and in this window's readings.
pub async fn read_window(parts: WindowParts<'_>) -> Snapshot {
    let (mut snap, links) = read_links_routes(parts.routes).await;
    if let Some(links) = &links {
        snap.set("sysctls", sysctls(links));
    }
    snap.set("firewall", firewall(parts.firewall));
    snap
}

/// The peers of the WireGuard interfaces evaluated, one section each.
pub fn peers_of(evaluated: &[(Interface, Facts)]) -> Snapshot {
    let mut snap = Snapshot::default();
    for (iface, facts) in evaluated {
        if iface.kind == IfaceKind::Wireguard {
            snap.set(&format!("peers {}", iface.name), peers(&iface.name, facts));
        }
    }
    snap
}

async fn read_links_routes(
    routes: Option<&[TableRoute]>,
) -> (Snapshot, Option<BTreeMap<String, LinkState>>) {
    let mut snap = Snapshot::default();
    let links = match inventory::read().await {
        Ok(links) => links,
        Err(e) => {
            tracing::debug!("timeline: {e}");
            return (snap, None);
        }
    };
    snap.set("links", link_section(&links));
    if let Some(routes) = routes {
        let names: BTreeMap<u32, &str> =
            links.values().map(|l| (l.index, l.name.as_str())).collect();
        snap.set("routes", route_section(routes, &names));
    }
    (snap, Some(links))
}

/// Every link: kind, MTU, state, master, a bond's hash policy, addresses.
pub(super) fn link_section(links: &BTreeMap<String, LinkState>) -> Section {
    let mut s = Section::default();
    for (name, l) in links {
        s.put(Kind::Link, name, "", l.kind.clone());
        s.put(Kind::Mtu, name, "", l.mtu.to_string());
        s.put(Kind::State, name, "", if l.up { "up" } else { "down" });
        let master = if l.master.is_empty() {
            "none"
        } else {
            &l.master
        };
        s.put(Kind::Master, name, "", master);
        if !l.bond_hash_policy.is_empty() {
            s.put(Kind::BondHashPolicy, name, "", l.bond_hash_policy.clone());
        }
        for a in &l.addresses {
            s.put(Kind::Address, name, a, a.clone());
        }
    }
    s
}

/// Routing tables larger than this (a full Internet table) are not compared: the
/// snapshot stays small, and such a router's routes change all the time anyway.
pub(super) const MAX_ROUTES: usize = 10_000;

/// Every route by destination and table: its nexthops ("via 10.0.0.1 dev eth0", a
/// multipath route's each with its weight), on its first nexthop's interface.
pub(super) fn route_section(routes: &[TableRoute], names: &BTreeMap<u32, &str>) -> Section {
    let mut s = Section::default();
    if routes.len() > MAX_ROUTES {
        s.guard = format!("more than {MAX_ROUTES} routes: not compared");
        return s;
    }
    for r in routes {
        let name = |i: u32| {
            names
                .get(&i)
                .map_or_else(|| format!("#{i}"), |n| (*n).to_owned())
        };
        let hops: Vec<String> = r
            .nexthops
            .iter()
            .map(|h| {
                let via = h.gateway.map(|g| format!("via {g} ")).unwrap_or_default();
                let weight = if r.is_multipath() {
                    format!(" weight {}", h.weight)
                } else {
                    String::new()
                };
                format!("{via}dev {}{weight}", name(h.ifindex))
            })
            .collect();
        let table = match r.table {
            254 => "main".to_owned(),
            253 => "default".to_owned(),
            t => t.to_string(),
        };
        let iface = r
            .nexthops
            .first()
            .map(|h| name(h.ifindex))
            .unwrap_or_default();
        s.put(
            Kind::Route,
            &iface,
            &format!("{} table {table}", r.destination),
            hops.join(", "),
        );
    }
    s
}

/// A sysctl's value in words.
type Human = fn(&str) -> String;

/// The sysctls netdoctor reads, host-wide, and each link's `rp_filter`.
fn sysctls(links: &BTreeMap<String, LinkState>) -> Section {
    let mut s = Section::default();
    let global: [(&str, Human); 7] = [
        ("net.ipv4.tcp_congestion_control", |v| v.to_owned()),
        ("net.ipv4.ip_forward", on_off),
        ("net.ipv6.conf.all.forwarding", on_off),
        ("net.ipv4.conf.all.rp_filter", rp_filter),
        ("net.ipv4.fib_multipath_hash_policy", hash_policy),
        ("net.ipv6.fib_multipath_hash_policy", hash_policy),
        ("net.ipv4.tcp_mtu_probing", mtu_probing),
    ];
    for (key, human) in global {
        if let Some(v) = sysctl::read(key) {
            s.put(Kind::Sysctl, "", key, human(&v));
        }
    }
    for name in links.keys() {
        // Read by path: an interface name may hold a dot, which sysctl keys cannot.
        let path = format!("/proc/sys/net/ipv4/conf/{name}/rp_filter");
        if let Ok(v) = std::fs::read_to_string(path) {
            let key = format!("net.ipv4.conf.{name}.rp_filter");
            s.put(Kind::Sysctl, name, &key, rp_filter(v.trim()));
        }
    }
    s
}

fn on_off(v: &str) -> String {
    match v {
        "0" => "0 (off)".into(),
        "1" => "1 (on)".into(),
        v => v.into(),
    }
}

fn rp_filter(v: &str) -> String {
    match v {
        "0" => "0 (off)".into(),
        "1" => "1 (strict)".into(),
        "2" => "2 (loose)".into(),
        v => v.into(),
    }
}

fn hash_policy(v: &str) -> String {
    match v {
        "0" => "0 (layer 3)".into(),
        "1" => "1 (layer 4)".into(),
        "2" => "2 (layer 3 or inner layer 3)".into(),
        "3" => "3 (custom fields)".into(),
        v => v.into(),
    }
}

fn mtu_probing(v: &str) -> String {
    match v {
        "0" => "0 (off)".into(),
        "1" => "1 (after a blackhole)".into(),
        "2" => "2 (always)".into(),
        v => v.into(),
    }
}

/// The NAT and clamping rules netdoctor reads, each on the interface it sends out of
/// ("" if any). Compared only while the same sources could be read.
pub(super) fn firewall(rules: &Ruleset) -> Section {
    let mut s = Section {
        guard: rules.errors.join("; "),
        ..Section::default()
    };
    for r in &rules.rules {
        let oif = r
            .matches
            .iter()
            .find_map(|m| match m {
                Match::Oif {
                    name,
                    negated: false,
                } if !name.prefix => Some(name.name.clone()),
                _ => None,
            })
            .unwrap_or_default();
        let rule = r.describe();
        s.put(Kind::Firewall, &oif, &rule, rule.clone());
    }
    s
}

/// A WireGuard interface's peers: each, its endpoint and allowed IPs, and a Tailscale
/// peer's path.
pub(super) fn peers(iface: &str, facts: &Facts) -> Section {
    let mut s = Section::default();
    for p in &facts.peers {
        let key = p.name.as_str();
        s.put(Kind::WireguardPeer, iface, key, key);
        let endpoint = if p.endpoint.is_empty() {
            "none"
        } else {
            &p.endpoint
        };
        s.put(Kind::WireguardEndpoint, iface, key, endpoint);
        let allowed = if p.allowed_ips.is_empty() {
            "none".to_owned()
        } else {
            p.allowed_ips.join(", ")
        };
        s.put(Kind::WireguardAllowedIps, iface, key, allowed);
        if !p.host.is_empty() {
            let path = match p.path.as_str() {
                "" => "not connected",
                "direct" => "direct",
                "derp" => "relayed (DERP)",
                "peer_relay" => "relayed (peer relay)",
                other => other,
            };
            s.put(Kind::TailscalePath, iface, &p.host, path);
        }
    }
    s
}

//! The two LocalAPI documents netdoctor reads, as tailscaled 1.x encodes them
//! (`ipn/ipnstate.Status`, `tailcfg.DERPMap`), and what they say in netdoctor's terms: a
//! WireGuard [`Device`] (keys, current endpoints, counters, handshakes) and each peer's
//! path (direct, DERP, peer relay) with the DERP servers it can take.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};

use serde::{Deserialize, Serialize};

use crate::config::wireguard::{hex_to_base64, Device, Peer};

/// `GET /localapi/v0/status`: the fields netdoctor uses.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct Status {
    /// "Running" once logged in and connected.
    pub backend_state: String,
    /// This node; its `Relay` is its home DERP region.
    #[serde(rename = "Self")]
    pub self_: Option<PeerStatus>,
    /// Peers by node key (`nodekey:HEX`); null when there are none.
    pub peer: Option<BTreeMap<String, PeerStatus>>,
}

/// `ipnstate.PeerStatus`: one node of the tailnet.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct PeerStatus {
    /// `nodekey:` and the WireGuard public key in hex.
    pub public_key: String,
    /// The host name the node announces.
    pub host_name: String,
    /// Its Tailscale addresses.
    #[serde(rename = "TailscaleIPs")]
    pub tailscale_ips: Option<Vec<String>>,
    /// Prefixes routed to it (its addresses and subnet routes).
    #[serde(rename = "AllowedIPs")]
    pub allowed_ips: Option<Vec<String>>,
    /// Its candidate UDP endpoints (`ip:port`).
    pub addrs: Option<Vec<String>>,
    /// The UDP endpoint in use; "" when traffic is relayed.
    pub cur_addr: String,
    /// Its home DERP region's code.
    pub relay: String,
    /// The peer relay in use (`ip:port:vni`), "" if none.
    pub peer_relay: String,
    /// Bytes received from it (WireGuard payload).
    pub rx_bytes: i64,
    /// Bytes sent to it.
    pub tx_bytes: i64,
    /// RFC 3339; Go's zero time (year 1) when never.
    pub last_handshake: String,
    /// Connected to the control plane.
    pub online: bool,
}

/// `GET /localapi/v0/derpmap`: DERP regions by id.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct DerpMap {
    /// Regions by id.
    pub regions: Option<BTreeMap<String, DerpRegion>>,
}

/// One DERP region.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct DerpRegion {
    /// Short name, what `PeerStatus.Relay` says.
    pub region_code: String,
    /// Its servers.
    pub nodes: Option<Vec<DerpNode>>,
}

/// One DERP server.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct DerpNode {
    /// DNS name, or an address literal.
    pub host_name: String,
    /// IPv4 address; "" to resolve `host_name`, "none" to not use IPv4.
    #[serde(rename = "IPv4")]
    pub ipv4: String,
    /// IPv6 address, same conventions.
    #[serde(rename = "IPv6")]
    pub ipv6: String,
    /// HTTPS port; 0 means 443 (`tailcfg.DERPNode.DERPPort`), 80 plain HTTP.
    #[serde(rename = "DERPPort")]
    pub derp_port: u16,
    /// Serves STUN only, no DERP.
    #[serde(rename = "STUNOnly")]
    pub stun_only: bool,
}

/// How traffic reaches a peer, as tailscaled reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Path {
    /// WireGuard over UDP to `CurAddr`.
    Direct,
    /// Relayed by a DERP server over TCP (HTTPS, or HTTP on port 80).
    Derp,
    /// Relayed by another node of the tailnet over UDP.
    PeerRelay,
    /// Neither: no address and no DERP region (not connected).
    Unknown,
}

impl Path {
    /// The facts' name: "direct", "derp", "peer_relay" or "".
    pub fn name(self) -> &'static str {
        match self {
            Path::Direct => "direct",
            Path::Derp => "derp",
            Path::PeerRelay => "peer_relay",
            Path::Unknown => "",
        }
    }
}

/// One peer's path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PeerPath {
    /// WireGuard public key, base64 (as [`Peer::public_key`]).
    pub public_key: String,
    /// Its host name.
    pub host: String,
    /// The path in use.
    pub path: Path,
    /// Its candidate UDP endpoints and the one in use.
    pub addrs: Vec<SocketAddr>,
    /// Its home DERP region (where traffic to it is relayed).
    pub derp_region: String,
    /// Connected to the control plane.
    pub online: bool,
}

/// What tailscaled says about its peers' paths.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Paths {
    /// Each peer's path.
    pub peers: Vec<PeerPath>,
    /// This node's home DERP region (where peers relay traffic to it).
    pub home_region: String,
    /// DERP servers by region code, those with an address literal (netdoctor resolves no
    /// names).
    pub derp_servers: BTreeMap<String, Vec<SocketAddr>>,
}

impl Paths {
    /// The DERP servers traffic with `peer` can cross: its home region's (toward it) and
    /// this node's (from it).
    pub fn servers_for(&self, peer: &PeerPath) -> Vec<SocketAddr> {
        let mut out: Vec<SocketAddr> = [&peer.derp_region, &self.home_region]
            .into_iter()
            .filter_map(|r| self.derp_servers.get(r))
            .flatten()
            .copied()
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Every DERP server of the regions in use (the peers' and this node's).
    pub fn servers_in_use(&self) -> Vec<SocketAddr> {
        let mut out: Vec<SocketAddr> = self
            .peers
            .iter()
            .flat_map(|p| self.servers_for(p))
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }
}

/// Seconds since the UNIX epoch of an RFC 3339 time; 0 for Go's zero time, anything
/// before 1970 or unreadable.
fn unix_seconds(rfc3339: &str) -> u64 {
    chrono::DateTime::parse_from_rfc3339(rfc3339)
        .ok()
        .and_then(|t| u64::try_from(t.timestamp()).ok())
        .unwrap_or(0)
}

fn addresses(list: &Option<Vec<String>>) -> Vec<SocketAddr> {
    list.iter()
        .flatten()
        .filter_map(|a| a.parse().ok())
        .collect()
}

impl DerpNode {
    /// Where the server listens, for each address it has as a literal.
    fn addresses(&self) -> Vec<SocketAddr> {
        let port = if self.derp_port == 0 {
            443
        } else {
            self.derp_port
        };
        let literal = |s: &str| s.parse::<IpAddr>().ok();
        let mut ips: Vec<IpAddr> = [&self.ipv4, &self.ipv6]
            .into_iter()
            .filter_map(|s| literal(s))
            .collect();
        if ips.is_empty() {
            ips.extend(literal(&self.host_name));
        }
        ips.into_iter()
            .map(|ip| SocketAddr::new(ip, port))
            .collect()
    }
}

/// The WireGuard device and the peers' paths from a status document and the DERP map.
pub fn read(ifname: &str, port: u16, status: &Status, derp: &DerpMap) -> (Device, Paths) {
    let mut device = Device {
        name: ifname.to_owned(),
        listen_port: port,
        ..Device::default()
    };
    let mut paths = Paths {
        home_region: status
            .self_
            .as_ref()
            .map(|s| s.relay.clone())
            .unwrap_or_default(),
        ..Paths::default()
    };
    for region in derp.regions.iter().flat_map(|r| r.values()) {
        let servers: Vec<SocketAddr> = region
            .nodes
            .iter()
            .flatten()
            .filter(|n| !n.stun_only)
            .flat_map(DerpNode::addresses)
            .collect();
        paths
            .derp_servers
            .insert(region.region_code.clone(), servers);
    }
    for p in status.peer.iter().flat_map(|m| m.values()) {
        let key = hex_to_base64(p.public_key.trim_start_matches("nodekey:"));
        let current: Option<SocketAddr> = p.cur_addr.parse().ok();
        // Addrs is null when control sent no endpoints (they then come by disco).
        let mut addrs = addresses(&p.addrs);
        addrs.extend(current.filter(|c| !addrs.contains(c)));
        let path = if current.is_some() {
            Path::Direct
        } else if !p.peer_relay.is_empty() {
            Path::PeerRelay
        } else if !p.relay.is_empty() {
            Path::Derp
        } else {
            Path::Unknown
        };
        device.peers.push(Peer {
            public_key: key.clone(),
            endpoint: current,
            allowed_ips: p
                .allowed_ips
                .clone()
                .or_else(|| p.tailscale_ips.clone())
                .unwrap_or_default(),
            last_handshake_unix: unix_seconds(&p.last_handshake),
            rx_bytes: u64::try_from(p.rx_bytes).unwrap_or(0),
            tx_bytes: u64::try_from(p.tx_bytes).unwrap_or(0),
            persistent_keepalive: 0,
        });
        paths.peers.push(PeerPath {
            public_key: key,
            host: p.host_name.clone(),
            path,
            addrs,
            derp_region: p.relay.clone(),
            online: p.online,
        });
    }
    (device, paths)
}

#[cfg(test)]
#[path = "status_tests.rs"]
mod tests;

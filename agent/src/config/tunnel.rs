//! What tunnel an interface carries as configured ([`ConfiguredTunnel`]) and where its
//! endpoints are. (What the data plane sees of it on the underlay is
//! [`crate::kernel::packet::tunnel_traffic`]; what rules read, `facts::TunnelFacts`.)

use std::net::{IpAddr, SocketAddr};

use crate::config::iface::{IfaceKind, Interface, LinkType};
use crate::config::link::LinkDetails;
use crate::config::process::{self, TunOwner};
use crate::config::tunnel_type::TunnelType;
use crate::config::wireguard::tailscale;
use crate::config::wireguard::{self, Device};
use crate::config::{tinc, trusted, vpncloud};
use crate::kernel::views::Encap;

/// The tunnel as configured, before observation.
#[derive(Debug, Clone, Default)]
pub struct ConfiguredTunnel {
    /// Known kind, None if the interface is not a tunnel netdoctor understands.
    pub kind: Option<TunnelType>,
    /// The device's kind when it says more than the encapsulation (gretap, sit, ip6tnl,
    /// ...); "" otherwise.
    pub label: String,
    /// Local address of the outer packets, if configured.
    pub local: Option<IpAddr>,
    /// Encapsulation settings as `ip -d link` names them (GRE key/csum/seq, GENEVE ttl,
    /// df, udpcsum, ..., ip6tnl's encaplimit).
    pub options: Vec<String>,
    /// Encapsulation as the data plane names it on the underlay.
    pub encap: Option<Encap>,
    /// Remote endpoints known from configuration.
    pub endpoints: Vec<SocketAddr>,
    /// Local UDP port of the tunnel (0 if unknown).
    pub port: u16,
    /// WireGuard device state, when a UAPI socket answered.
    pub wireguard: Option<Device>,
    /// The daemon serving a TUN/TAP device.
    pub daemon: Option<TunOwner>,
    /// Relays the tunnel's traffic may take on the underlay instead of going to the
    /// endpoints (Tailscale's DERP servers): routes toward them lead to the underlay too.
    pub relays: Vec<SocketAddr>,
    /// What tailscaled reports of its peers' paths, when it serves the interface.
    pub tailscale: Option<TailscaleState>,
    /// The data methods the daemon is configured to offer, preferred first (fastd's
    /// `method` lines, VpnCloud's crypto algorithms); empty when not read or for other
    /// tunnels.
    pub methods: Vec<String>,
    /// What could not be learned, and why (for the report's notes).
    pub notes: Vec<String>,
}

/// The tunnel a TUN/TAP daemon serves, its encapsulation and its configured methods.
type FromDaemon = (Option<TunnelType>, Option<Encap>, Vec<String>);

fn kind_from_daemon(owner: &TunOwner, tap: bool, notes: &mut Vec<String>) -> FromDaemon {
    let cmd = owner.command.to_lowercase();
    if cmd.starts_with("tinc") {
        // Debian and most distributions ship tinc 1.0 (legacy protocol); 1.1 speaks SPTPS.
        let sptps = match tinc::version_of(owner) {
            Ok(Some(v)) => tinc::speaks_sptps(&v),
            Ok(None) => false,
            Err(why) => {
                notes.push(format!(
                    "tinc's version is unknown, so its overhead assumes tinc 1.0: its binary \
                     (pid {}) was not read because {why}",
                    owner.pid
                ));
                false
            }
        };
        let kind = if sptps {
            TunnelType::TincSptps { switch: tap }
        } else {
            TunnelType::TincLegacy
        };
        (Some(kind), Some(Encap::Tinc), Vec::new())
    } else if cmd.starts_with("fastd") {
        let methods = fastd_methods(owner, notes);
        let null_method = !methods.is_empty() && methods.iter().all(|m| m == "null");
        (
            Some(TunnelType::Fastd { tap, null_method }),
            Some(Encap::Fastd),
            methods,
        )
    } else if cmd.starts_with("vpncloud") {
        let algorithms = vpncloud::algorithms(owner, notes);
        let plain = vpncloud::only_plain(&algorithms);
        (
            Some(TunnelType::VpnCloud { tap, plain }),
            Some(Encap::Other),
            algorithms,
        )
    } else if cmd.contains("wireguard") || cmd.contains("boringtun") {
        (
            Some(TunnelType::Wireguard),
            Some(Encap::Wireguard),
            Vec::new(),
        )
    } else {
        (None, Some(Encap::Other), Vec::new())
    }
}

/// fastd configurations are a few kilobytes.
const MAX_CONFIG: u64 = 1 << 20;

/// The methods fastd's configuration offers, in its order (`method "...";` lines): only
/// `null` means 1 byte of framing instead of 24, and the first is the one it prefers. The
/// file is read only for a daemon that is root's by every uid (not a setuid program
/// another user started), and only if root owns it and nobody else may write it; empty
/// when it is not read.
fn fastd_methods(owner: &TunOwner, notes: &mut Vec<String>) -> Vec<String> {
    let Some(path) = owner.config_file() else {
        return Vec::new();
    };
    let skipped = |why: String| {
        format!(
            "fastd's configuration {} was not read, so its overhead assumes an encrypting \
             method: {why}",
            path.display()
        )
    };
    if !owner.uids.root() {
        notes.push(skipped(format!(
            "the daemon (pid {}) runs as {}, not root",
            owner.pid, owner.uids
        )));
        return Vec::new();
    }
    let text = match trusted::read_root_owned(&path, MAX_CONFIG) {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(why) => {
            notes.push(skipped(why.to_string()));
            return Vec::new();
        }
    };
    text.lines()
        .map(|l| l.split('#').next().unwrap_or_default().trim())
        .filter_map(|l| l.strip_prefix("method"))
        .map(|rest| rest.trim().trim_end_matches(';').trim().trim_matches('"'))
        .map(str::to_owned)
        .collect()
}

impl ConfiguredTunnel {
    /// The tunnel's kind as the facts name it (`tunnel.kind`): its label, else its
    /// encapsulation's name; "" when unknown.
    pub fn kind_name(&self) -> String {
        if self.label.is_empty() {
            self.encap
                .map(|e| format!("{e:?}").to_lowercase())
                .unwrap_or_default()
        } else {
            self.label.clone()
        }
    }

    /// The UDP port the data plane must be told about: the data plane recognises WireGuard,
    /// VXLAN and GENEVE by themselves, but fastd, tinc and other daemons only by port.
    pub fn port_to_recognise(&self) -> Option<crate::kernel::packet::TunnelPort> {
        let encap = self.encap?;
        (self.port != 0 && matches!(encap, Encap::Fastd | Encap::Tinc | Encap::Other)).then_some(
            crate::kernel::packet::TunnelPort {
                port: self.port,
                encap,
            },
        )
    }
}

/// tailscaled serving the tunnel: where to ask it again, and what it said.
#[derive(Debug, Clone)]
pub struct TailscaleState {
    /// The daemon.
    pub daemon: tailscale::Daemon,
    /// Its peers' paths (empty when it could not be asked).
    pub paths: tailscale::Paths,
}

/// The tunnel tailscaled serves on `iface`: WireGuard with Tailscale's overhead and usual
/// MTU, its peers and their paths from the LocalAPI.
async fn tailscale_tunnel(iface: &Interface, daemon: tailscale::Daemon) -> ConfiguredTunnel {
    let mut notes = Vec::new();
    let (device, paths) = match tailscale::read(&iface.name, &daemon).await {
        Ok((d, p)) => (Some(d), p),
        Err(e) => {
            notes.push(format!(
                "Tailscale peers of {} unknown: tailscaled (pid {}) was not asked or did not \
                 answer: {e}",
                iface.name, daemon.owner.pid
            ));
            (None, tailscale::Paths::default())
        }
    };
    ConfiguredTunnel {
        kind: Some(TunnelType::Tailscale),
        encap: Some(Encap::Wireguard),
        endpoints: device
            .as_ref()
            .map(|d| d.peers.iter().filter_map(|p| p.endpoint).collect())
            .unwrap_or_default(),
        port: daemon.port,
        wireguard: device,
        daemon: Some(daemon.owner.clone()),
        relays: paths.servers_in_use(),
        tailscale: Some(TailscaleState { daemon, paths }),
        notes,
        ..ConfiguredTunnel::default()
    }
}

/// The tunnel's WireGuard peers read again (counters, handshakes, current endpoints) from
/// whoever reported them, with tailscaled's paths; `None` for a tunnel without WireGuard
/// peers, an error saying why when they cannot be read.
pub async fn read_peers(
    tun: &ConfiguredTunnel,
) -> Result<Option<(Device, Option<TailscaleState>)>, String> {
    let Some(name) = tun.wireguard.as_ref().map(|d| d.name.clone()) else {
        return Ok(None);
    };
    match &tun.tailscale {
        Some(ts) => {
            let (device, paths) = tailscale::read(&name, &ts.daemon)
                .await
                .map_err(|e| e.to_string())?;
            let daemon = ts.daemon.clone();
            Ok(Some((device, Some(TailscaleState { daemon, paths }))))
        }
        None => Ok(wireguard::query(&name)
            .await
            .map_err(|e| e.to_string())?
            .map(|d| (d, None))),
    }
}

/// The tunnel with its peers read again (see [`read_peers`]); when they cannot be, the
/// tunnel as it was and why.
pub async fn refresh(tun: &ConfiguredTunnel) -> (ConfiguredTunnel, Option<String>) {
    let mut t = tun.clone();
    match read_peers(tun).await {
        Ok(Some((device, tailscale))) => {
            t.wireguard = Some(device);
            t.tailscale = tailscale.or(t.tailscale);
            (t, None)
        }
        Ok(None) => (t, None),
        Err(e) => (t, Some(e)),
    }
}

/// Identifies the tunnel behind `iface`.
pub async fn identify(iface: &Interface, details: &LinkDetails) -> ConfiguredTunnel {
    match iface.kind {
        IfaceKind::Wireguard => {
            if let Some(daemon) = tailscale::daemon_of(&iface.name) {
                return tailscale_tunnel(iface, daemon).await;
            }
            wireguard_tunnel(iface).await
        }
        IfaceKind::Vxlan | IfaceKind::Geneve => overlay_tunnel(details),
        IfaceKind::IpTunnel(_) => match &details.ip_tunnel {
            // No UDP port: the endpoint's port is 0.
            Some(t) => ConfiguredTunnel {
                kind: Some(t.tunnel_type()),
                encap: Some(t.encap()),
                label: t.kind.clone(),
                endpoints: t
                    .remote
                    .map(|r| SocketAddr::new(r, 0))
                    .into_iter()
                    .collect(),
                local: t.local,
                options: t.options(),
                ..ConfiguredTunnel::default()
            },
            None => ConfiguredTunnel::default(),
        },
        IfaceKind::Tun | IfaceKind::Tap => daemon_tunnel(iface),
        _ => ConfiguredTunnel::default(),
    }
}

/// A WireGuard interface (not Tailscale's): its device and peers, and the daemon of a
/// userspace WireGuard.
async fn wireguard_tunnel(iface: &Interface) -> ConfiguredTunnel {
    let mut notes = Vec::new();
    let dev = wireguard::query(&iface.name).await.unwrap_or_else(|e| {
        notes.push(format!("WireGuard peers of {} unknown: {e}", iface.name));
        None
    });
    let endpoints = dev
        .as_ref()
        .map(|d| d.peers.iter().filter_map(|p| p.endpoint).collect())
        .unwrap_or_default();
    // A userspace WireGuard (wireguard-go, boringtun: a UAPI socket) serves a TUN
    // device, and its daemon's CPU is measured; kernel WireGuard has no daemon.
    let daemon = crate::config::wireguard::has_wireguard_uapi(&iface.name)
        .then(|| process::tun_owner(&iface.name))
        .flatten();
    ConfiguredTunnel {
        kind: Some(TunnelType::Wireguard),
        encap: Some(Encap::Wireguard),
        endpoints,
        port: dev.as_ref().map_or(0, |d| d.listen_port),
        wireguard: dev,
        daemon,
        notes,
        ..ConfiguredTunnel::default()
    }
}

/// A VXLAN or Geneve interface: its remote (unless multicast), port and options.
fn overlay_tunnel(details: &LinkDetails) -> ConfiguredTunnel {
    let (overlay, kind, encap) = match &details.vxlan {
        Some(v) => (v.clone(), TunnelType::Vxlan, Encap::Vxlan),
        None => (
            details.geneve.clone().unwrap_or_default(),
            TunnelType::Geneve { options: 0 },
            Encap::Geneve,
        ),
    };
    ConfiguredTunnel {
        kind: Some(kind),
        encap: Some(encap),
        endpoints: overlay
            .remote
            .filter(|r| !r.is_multicast())
            .map(|r| SocketAddr::new(r, overlay.port))
            .into_iter()
            .collect(),
        port: overlay.port,
        local: overlay.local,
        options: overlay.options,
        ..ConfiguredTunnel::default()
    }
}

/// A TUN or TAP device: the tunnel its owning daemon makes.
fn daemon_tunnel(iface: &Interface) -> ConfiguredTunnel {
    let owner = process::tun_owner(&iface.name);
    let mut notes = Vec::new();
    let (kind, encap, methods) = owner.as_ref().map_or((None, None, Vec::new()), |o| {
        kind_from_daemon(o, iface.link == LinkType::Ether, &mut notes)
    });
    ConfiguredTunnel {
        // The data plane knows VpnCloud's datagrams only as another daemon's.
        label: match kind {
            Some(TunnelType::VpnCloud { .. }) => "vpncloud".into(),
            _ => String::new(),
        },
        kind,
        encap,
        endpoints: Vec::new(),
        port: owner
            .as_ref()
            .and_then(|o| o.udp_ports.first().copied())
            .unwrap_or(0),
        daemon: owner,
        methods,
        notes,
        ..ConfiguredTunnel::default()
    }
}

/// The address family name facts use.
pub fn family_name(ip: IpAddr) -> &'static str {
    if ip.to_canonical().is_ipv4() {
        "ipv4"
    } else {
        "ipv6"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Peers that cannot be read again (the device is gone: no UAPI socket, no kernel
    /// WireGuard of that name) leave the tunnel as it was and say why, instead of passing
    /// the start's counters off as the end's.
    #[tokio::test]
    async fn peers_that_cannot_be_read_again_say_why() {
        let tun = ConfiguredTunnel {
            wireguard: Some(Device {
                name: "ndgone0".into(),
                ..Device::default()
            }),
            ..ConfiguredTunnel::default()
        };
        let (again, why) = refresh(&tun).await;
        assert_eq!(again.wireguard, tun.wireguard);
        let why = why.expect("a reason");
        assert!(!why.is_empty());
        // A tunnel without WireGuard peers has nothing to read and nothing to say.
        let (_, why) = refresh(&ConfiguredTunnel::default()).await;
        assert_eq!(why, None);
    }
}

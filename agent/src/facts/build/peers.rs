//! The peers' facts of a window ([`PeerFacts`]): WireGuard counters and handshakes from the
//! readings at its start and end, the handshake messages the data plane counted per
//! endpoint, or the configured endpoints of other tunnels; and for Tailscale each peer's
//! path as tailscaled reports it next to what the underlay carried: TCP with the DERP
//! servers, WireGuard over UDP with the peer.

use std::net::{IpAddr, SocketAddr};

use super::wg_path::{self, PathWindow};
use super::{endpoint_name, to_i64, Observation};
use crate::config::tunnel::family_name;
use crate::config::wireguard::tailscale::{Paths, PeerPath};
use crate::config::wireguard::Peer;
use crate::facts::handshake::{handshake_since, now_unix};
use crate::facts::PeerFacts;
use crate::kernel::packet::flows::{Flow, WireguardMessages};
use crate::kernel::sockets::rates::SocketRow;
use crate::kernel::views::{Direction, Encap};

/// The remote end of a flow seen on this host's underlay.
fn remote(f: &Flow) -> SocketAddr {
    match f.direction {
        Direction::Egress => SocketAddr::new(f.dst, f.dst_port),
        Direction::Ingress => SocketAddr::new(f.src, f.src_port),
    }
}

/// `a` with an IPv4-mapped IPv6 address as plain IPv4, so that both forms compare equal.
fn canonical(a: SocketAddr) -> SocketAddr {
    SocketAddr::new(a.ip().to_canonical(), a.port())
}

/// Bytes of the `flows` with protocol `protocol` whose remote end is among `remotes`.
fn bytes_with(flows: &[&Flow], protocol: u8, remotes: &[SocketAddr], wireguard: bool) -> i64 {
    let remotes: Vec<SocketAddr> = remotes.iter().copied().map(canonical).collect();
    flows
        .iter()
        .filter(|f| f.protocol == protocol && (!wireguard || f.encap == Encap::Wireguard))
        .filter(|f| remotes.contains(&canonical(remote(f))))
        .map(|f| to_i64(f.bytes))
        .sum()
}

/// Bytes this host's TCP connections to `remotes` sent (acknowledged) and received during
/// the window: tailscaled's DERP connections are local sockets, whose segments the data
/// plane's local path counts per interface rather than per flow.
fn socket_bytes_with(sockets: &[SocketRow], remotes: &[SocketAddr]) -> i64 {
    sockets
        .iter()
        .filter(|r| {
            remotes
                .iter()
                .any(|a| canonical(*a) == canonical(r.socket.remote))
        })
        .map(|r| to_i64(r.window_bytes_acked + r.window_bytes_received))
        .sum()
}

/// Adds tailscaled's path of the peer and the underlay's bytes with its DERP servers and
/// its addresses. `underlay` holds every flow of the watched underlay interfaces, `sockets`
/// the host's connections: a DERP connection counts from its flow records or, when the
/// local path left it none beyond the SYN, from its socket (the larger).
fn add_path(
    p: &mut PeerFacts,
    paths: &Paths,
    path: &PeerPath,
    underlay: &[&Flow],
    sockets: &[SocketRow],
) {
    let servers = paths.servers_for(path);
    p.host = path.host.clone();
    p.path = path.path.name().to_owned();
    p.derp_region = path.derp_region.clone();
    p.derp_servers = servers.iter().map(ToString::to_string).collect();
    p.derp_bytes = if servers.is_empty() {
        -1
    } else {
        bytes_with(underlay, 6, &servers, false).max(socket_bytes_with(sockets, &servers))
    };
    p.udp_bytes = if path.addrs.is_empty() {
        -1
    } else {
        bytes_with(underlay, 17, &path.addrs, true)
    };
    p.online = Some(path.online);
}

/// A configured endpoint of a tunnel other than WireGuard, as a peer.
fn endpoint_peer(ep: &SocketAddr) -> PeerFacts {
    PeerFacts {
        name: endpoint_name(ep),
        endpoint: endpoint_name(ep),
        family: family_name(ep.ip()).into(),
        handshake_age_s: -1,
        path_mtu: -1,
        derp_bytes: -1,
        udp_bytes: -1,
        ..PeerFacts::default()
    }
}

/// The WireGuard handshake messages of type `pick` the data plane counted in `outer`
/// toward (egress) or from (ingress) `ip`.
fn wg_count(
    outer: &[&Flow],
    ip: IpAddr,
    dir: Direction,
    pick: fn(&WireguardMessages) -> u32,
) -> i64 {
    outer
        .iter()
        .filter(|f| {
            f.direction == dir
                && (if dir == Direction::Egress {
                    f.dst
                } else {
                    f.src
                }) == ip
        })
        .map(|f| i64::from(pick(&f.wireguard)))
        .sum()
}

/// A WireGuard peer's counters and handshakes over the window; `prev` is the peer at its
/// start.
fn wireguard_peer(p: &Peer, prev: Option<&Peer>, outer: &[&Flow], window_start: i64) -> PeerFacts {
    let wg_count = |ip, dir, pick| wg_count(outer, ip, dir, pick);
    let ip = p.endpoint.map(|e| e.ip());
    PeerFacts {
        name: p.public_key.clone(),
        endpoint: p.endpoint.map(|e| e.to_string()).unwrap_or_default(),
        family: ip.map(|i| family_name(i).to_owned()).unwrap_or_default(),
        allowed_ips: p.allowed_ips.clone(),
        handshake_age_s: if p.last_handshake_unix == 0 {
            -1
        } else {
            (now_unix() - p.last_handshake_unix as i64).max(0)
        },
        keepalive_s: i64::from(p.persistent_keepalive),
        tx_bytes_delta: to_i64(p.tx_bytes.saturating_sub(prev.map_or(0, |b| b.tx_bytes))),
        rx_bytes_delta: to_i64(p.rx_bytes.saturating_sub(prev.map_or(0, |b| b.rx_bytes))),
        initiations_sent: ip.map_or(0, |ip| wg_count(ip, Direction::Egress, |w| w.initiation)),
        responses_received: ip.map_or(0, |ip| wg_count(ip, Direction::Ingress, |w| w.response)),
        handshake_in_window: ip.is_some_and(|ip| {
            wg_count(ip, Direction::Ingress, |w| w.response) > 0
                || wg_count(ip, Direction::Egress, |w| w.response) > 0
        }) || handshake_since(p, window_start),
        path_mtu: -1,
        derp_bytes: -1,
        udp_bytes: -1,
        ..PeerFacts::default()
    }
}

impl Observation<'_> {
    /// The peers' facts; `endpoints` are the tunnel's (configured or learnt from the
    /// traffic), `outer` its encapsulated flows on the underlay.
    pub(super) fn peers(&self, endpoints: &[SocketAddr], outer: &[&Flow]) -> Vec<PeerFacts> {
        let window_start = self.window_start_unix();
        let path = self.path_window(outer);
        // The WireGuard path of a peer reached at `addrs`, where the data plane measured it.
        let with_path = |mut p: PeerFacts, addrs: &[SocketAddr]| {
            wg_path::unknown(&mut p);
            if let Some(path) = &path {
                path.apply(&mut p, addrs);
            }
            p
        };
        let Some((before, after)) = self
            .start
            .wireguard
            .as_ref()
            .zip(self.end.wireguard.as_ref())
        else {
            return endpoints
                .iter()
                .map(|ep| with_path(endpoint_peer(ep), &[*ep]))
                .collect();
        };
        let paths = self
            .end
            .tailscale
            .as_ref()
            .or(self.tun.tailscale.as_ref().map(|t| &t.paths));
        let underlay: Vec<&Flow> = self
            .window
            .flows
            .iter()
            .filter(|f| {
                f.ifindex != self.me.index
                    && self.underlay.watch.iter().any(|u| u.index == f.ifindex)
            })
            .collect();
        after
            .peers
            .iter()
            .map(|p| {
                let prev = before.peers.iter().find(|b| b.public_key == p.public_key);
                let mut facts = wireguard_peer(p, prev, outer, window_start);
                let path = paths.and_then(|ps| {
                    let path = ps.peers.iter().find(|t| t.public_key == p.public_key)?;
                    Some((ps, path))
                });
                let mut addrs: Vec<SocketAddr> = p.endpoint.into_iter().collect();
                if let Some((paths, path)) = path {
                    add_path(
                        &mut facts,
                        paths,
                        path,
                        &underlay,
                        self.sockets.unwrap_or_default(),
                    );
                    addrs.extend(&path.addrs);
                }
                with_path(facts, &addrs)
            })
            .collect()
    }

    /// What the data plane saw of a WireGuard tunnel's path on its underlays; `None` for
    /// other tunnels, or when no underlay was watched (its facts are then unknown, -1).
    fn path_window<'a>(&'a self, outer: &'a [&'a Flow]) -> Option<PathWindow<'a>> {
        let underlays: Vec<u32> = self
            .underlay
            .watch
            .iter()
            .map(|u| u.index)
            .filter(|i| *i != self.me.index)
            .collect();
        let measured = self.window.mono_ns != 0 && !underlays.is_empty();
        (self.tun.encap == Some(Encap::Wireguard) && measured).then_some(PathWindow {
            window: self.window,
            underlays,
            outer,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::wireguard::tailscale::status::Path;

    fn flow(
        dir: Direction,
        proto: u8,
        local: &str,
        remote: &str,
        bytes: u64,
        encap: Encap,
    ) -> Flow {
        let local: SocketAddr = local.parse().expect("local");
        let remote: SocketAddr = remote.parse().expect("remote");
        let (src, dst) = match dir {
            Direction::Egress => (local, remote),
            Direction::Ingress => (remote, local),
        };
        Flow {
            ifindex: 2,
            direction: dir,
            protocol: proto,
            src: src.ip(),
            src_port: src.port(),
            dst: dst.ip(),
            dst_port: dst.port(),
            packets: 1,
            segments: 1,
            bytes,
            first_seen_ms: 0,
            last_seen_ms: 0,
            tcp_flags: 0,
            syn_mss: None,
            max_segment: 0,
            retransmits: 0,
            encap,
            wireguard: WireguardMessages::default(),
        }
    }

    #[test]
    fn derp_and_udp_bytes_are_told_apart_on_the_underlay() {
        let derp: SocketAddr = "10.200.3.2:443".parse().expect("derp");
        let paths = Paths {
            peers: Vec::new(),
            home_region: "lab".into(),
            derp_servers: [("lab".to_owned(), vec![derp])].into_iter().collect(),
        };
        let peer = PeerPath {
            public_key: "k".into(),
            host: "node-b".into(),
            path: Path::Derp,
            addrs: vec!["10.200.2.2:41641".parse().expect("addr")],
            derp_region: "lab".into(),
            online: true,
        };
        let me = "10.200.1.1:50000";
        let flows = [
            flow(
                Direction::Egress,
                6,
                me,
                "10.200.3.2:443",
                1000,
                Encap::None,
            ),
            flow(
                Direction::Ingress,
                6,
                me,
                "10.200.3.2:443",
                500,
                Encap::None,
            ),
            // The control server on the same host, another port: not DERP.
            flow(
                Direction::Egress,
                6,
                me,
                "10.200.3.2:8080",
                7000,
                Encap::None,
            ),
            flow(
                Direction::Egress,
                17,
                "10.200.1.1:41641",
                "10.200.2.2:41641",
                300,
                Encap::Wireguard,
            ),
            // Disco pings to the peer: UDP, but not WireGuard.
            flow(
                Direction::Egress,
                17,
                "10.200.1.1:41641",
                "10.200.2.2:41641",
                90,
                Encap::None,
            ),
        ];
        let flows: Vec<&Flow> = flows.iter().collect();
        let mut p = PeerFacts::default();
        add_path(&mut p, &paths, &peer, &flows, &[]);
        assert_eq!((p.derp_bytes, p.udp_bytes), (1500, 300));
        assert_eq!(p.path, "derp");
        assert_eq!(p.derp_servers, vec!["10.200.3.2:443"]);
        assert_eq!(p.online, Some(true));

        let unknown = Paths {
            derp_servers: Default::default(),
            ..paths
        };
        add_path(&mut p, &unknown, &peer, &flows, &[]);
        assert_eq!(p.derp_bytes, -1, "no DERP address: unknown, not 0");
        let nowhere = PeerPath {
            addrs: Vec::new(),
            ..peer
        };
        add_path(&mut p, &unknown, &nowhere, &flows, &[]);
        assert_eq!(
            p.udp_bytes, -1,
            "no address of the peer known: unknown, not 0"
        );
    }
}

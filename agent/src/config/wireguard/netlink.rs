//! Kernel WireGuard's configuration and peers over generic netlink: the `wireguard` family's
//! `WG_CMD_GET_DEVICE` dump, what `wg show` itself reads. rust-netlink's `genetlink` and
//! `netlink-packet-wireguard` speak it, so nothing is run and nothing is parsed by hand.
//! (Userspace implementations answer on their UAPI socket instead: [`super::uapi`].)

use std::net::SocketAddr;

use futures::StreamExt;
use netlink_packet_core::{NetlinkMessage, NetlinkPayload, NLM_F_DUMP, NLM_F_REQUEST};
use netlink_packet_generic::GenlMessage;
use netlink_packet_wireguard::{
    WireguardAllowedIpAttr, WireguardAttribute, WireguardCmd, WireguardMessage,
    WireguardPeerAttribute,
};

use super::device::{Device, Peer};

fn io_error(e: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::other(format!("WireGuard generic netlink: {e}"))
}

/// Reads kernel WireGuard interface `name` in the caller's network namespace. Fails when the
/// kernel has no `wireguard` family (no module) or no such WireGuard interface.
pub async fn query(name: &str) -> std::io::Result<Device> {
    let (conn, mut handle, _) = genetlink::new_connection()?;
    let task = tokio::spawn(conn);
    let result = dump(&mut handle, name).await;
    task.abort();
    result
}

async fn dump(handle: &mut genetlink::GenetlinkHandle, name: &str) -> std::io::Result<Device> {
    let mut request = NetlinkMessage::from(GenlMessage::from_payload(WireguardMessage {
        cmd: WireguardCmd::GetDevice,
        attributes: vec![WireguardAttribute::IfName(name.to_owned())],
    }));
    request.header.flags = NLM_F_REQUEST | NLM_F_DUMP;
    let mut answers = handle.request(request).await.map_err(io_error)?;
    let mut dev = Device {
        name: name.to_owned(),
        ..Device::default()
    };
    while let Some(answer) = answers.next().await {
        match answer.map_err(io_error)?.payload {
            NetlinkPayload::InnerMessage(genl) => merge(&mut dev, genl.payload.attributes),
            NetlinkPayload::Error(e) => return Err(e.to_io()),
            _ => {}
        }
    }
    Ok(dev)
}

/// Adds one message of the dump to `dev`. A device with many peers (or a peer with many
/// allowed IPs) spans several messages: a peer continued from the previous message comes
/// first and carries the same public key.
fn merge(dev: &mut Device, attributes: Vec<WireguardAttribute>) {
    for attr in attributes {
        match attr {
            WireguardAttribute::ListenPort(p) => dev.listen_port = p,
            WireguardAttribute::Fwmark(m) => dev.fwmark = m,
            WireguardAttribute::Peers(peers) => {
                for attrs in peers {
                    let p = peer(attrs.0);
                    match dev.peers.last_mut() {
                        Some(last) if last.public_key == p.public_key => {
                            last.allowed_ips.extend(p.allowed_ips)
                        }
                        _ => dev.peers.push(p),
                    }
                }
            }
            _ => {}
        }
    }
}

fn peer(attrs: Vec<WireguardPeerAttribute>) -> Peer {
    use base64::Engine;
    let mut p = Peer::default();
    for attr in attrs {
        match attr {
            WireguardPeerAttribute::PublicKey(k) => {
                p.public_key = base64::engine::general_purpose::STANDARD.encode(k)
            }
            WireguardPeerAttribute::Endpoint(e) => p.endpoint = endpoint(e),
            WireguardPeerAttribute::PersistentKeepalive(s) => p.persistent_keepalive = s.into(),
            WireguardPeerAttribute::LastHandshake(t) => {
                p.last_handshake_unix = u64::try_from(t.seconds).unwrap_or(0)
            }
            WireguardPeerAttribute::RxBytes(b) => p.rx_bytes = b,
            WireguardPeerAttribute::TxBytes(b) => p.tx_bytes = b,
            WireguardPeerAttribute::AllowedIps(ips) => {
                for ip in ips {
                    let addr = ip.0.iter().find_map(|a| match a {
                        WireguardAllowedIpAttr::IpAddr(a) => Some(*a),
                        _ => None,
                    });
                    let cidr = ip.0.iter().find_map(|a| match a {
                        WireguardAllowedIpAttr::Cidr(c) => Some(*c),
                        _ => None,
                    });
                    if let (Some(addr), Some(cidr)) = (addr, cidr) {
                        p.allowed_ips.push(format!("{addr}/{cidr}"));
                    }
                }
            }
            _ => {}
        }
    }
    p
}

/// A peer without an endpoint has an all-zero one in the dump (family AF_UNSPEC): none.
fn endpoint(e: SocketAddr) -> Option<SocketAddr> {
    (!e.ip().is_unspecified() || e.port() != 0).then_some(e)
}

#[cfg(test)]
mod tests {
    use super::*;
    use netlink_packet_wireguard::{WireguardAllowedIp, WireguardPeer, WireguardTimeSpec};

    fn allowed(ip: &str, cidr: u8) -> WireguardAllowedIp {
        WireguardAllowedIp(vec![
            WireguardAllowedIpAttr::IpAddr(ip.parse().expect("ip")),
            WireguardAllowedIpAttr::Cidr(cidr),
        ])
    }

    /// A peer split over two messages of the dump is one peer with both messages' allowed
    /// IPs; the second peer and the device's settings are kept.
    #[test]
    fn merges_a_dump_split_over_messages() {
        let key = [7u8; 32];
        let first = vec![
            WireguardAttribute::ListenPort(51820),
            WireguardAttribute::Peers(vec![WireguardPeer(vec![
                WireguardPeerAttribute::PublicKey(key),
                WireguardPeerAttribute::Endpoint("[fd00::2]:51820".parse().expect("addr")),
                WireguardPeerAttribute::PersistentKeepalive(25),
                WireguardPeerAttribute::LastHandshake(WireguardTimeSpec {
                    seconds: 1_700_000_000,
                    nano_seconds: 5,
                }),
                WireguardPeerAttribute::RxBytes(2224),
                WireguardPeerAttribute::TxBytes(38333),
                WireguardPeerAttribute::AllowedIps(vec![allowed("10.250.0.2", 32)]),
            ])]),
        ];
        let second = vec![WireguardAttribute::Peers(vec![
            WireguardPeer(vec![
                WireguardPeerAttribute::PublicKey(key),
                WireguardPeerAttribute::AllowedIps(vec![allowed("fd00::", 64)]),
            ]),
            WireguardPeer(vec![
                WireguardPeerAttribute::PublicKey([9u8; 32]),
                WireguardPeerAttribute::Endpoint("0.0.0.0:0".parse().expect("addr")),
            ]),
        ])];
        let mut dev = Device::default();
        merge(&mut dev, first);
        merge(&mut dev, second);
        assert_eq!(dev.listen_port, 51820);
        assert_eq!(dev.peers.len(), 2);
        let p = &dev.peers[0];
        assert_eq!(p.public_key, "BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc=");
        assert_eq!(p.endpoint, Some("[fd00::2]:51820".parse().expect("addr")));
        assert_eq!(p.allowed_ips, vec!["10.250.0.2/32", "fd00::/64"]);
        assert_eq!(
            (
                p.last_handshake_unix,
                p.rx_bytes,
                p.tx_bytes,
                p.persistent_keepalive
            ),
            (1_700_000_000, 2224, 38333, 25)
        );
        assert_eq!(dev.peers[1].endpoint, None);
    }
}

//! A WireGuard device and its peers as netdoctor reads them, whichever way they were read.

use std::net::SocketAddr;

use base64::Engine;
use serde::Serialize;

/// One configured peer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Peer {
    /// Public key, base64 as `wg` prints it.
    pub public_key: String,
    /// Current endpoint, if known.
    pub endpoint: Option<SocketAddr>,
    /// Allowed IPs as `address/prefix`.
    pub allowed_ips: Vec<String>,
    /// Seconds since the UNIX epoch of the last handshake; 0 = never.
    pub last_handshake_unix: u64,
    /// Bytes received from the peer (inner).
    pub rx_bytes: u64,
    /// Bytes sent to the peer (inner).
    pub tx_bytes: u64,
    /// Keepalive interval in seconds; 0 = off.
    pub persistent_keepalive: u32,
}

/// A WireGuard device's configuration.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Device {
    /// Interface name.
    pub name: String,
    /// UDP listen port.
    pub listen_port: u16,
    /// fwmark on outer packets (0 = none).
    pub fwmark: u32,
    /// Peers.
    pub peers: Vec<Peer>,
}

/// A key in hex (UAPI, Tailscale's `nodekey:`) as base64, the form `wg` prints.
pub(crate) fn hex_to_base64(hex: &str) -> String {
    let bytes: Vec<u8> = (0..hex.len() / 2)
        .filter_map(|i| u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok())
        .collect();
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

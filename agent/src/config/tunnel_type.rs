//! The kinds of tunnel netdoctor recognises in a configuration, with the settings that
//! decide their encapsulation overhead (the overhead itself is `facts::overhead`'s).

use serde::Serialize;

/// Tunnel types netdoctor knows the overhead of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TunnelType {
    /// WireGuard (kernel or userspace).
    Wireguard,
    /// Tailscale: WireGuard run by tailscaled, to peers directly over UDP or relayed by
    /// DERP servers over TCP.
    Tailscale,
    /// VXLAN: carries inner Ethernet frames.
    Vxlan,
    /// GENEVE with `options` bytes of TLV options (multiples of 4).
    Geneve {
        /// Option bytes.
        options: u32,
    },
    /// fastd; `tap` when the interface carries Ethernet frames.
    Fastd {
        /// TAP (layer 2) mode.
        tap: bool,
        /// Only the `null` method is configured (no encryption, 1 byte of framing).
        null_method: bool,
    },
    /// tinc 1.1 SPTPS; `switch` mode carries Ethernet frames.
    TincSptps {
        /// Switch (layer 2) mode.
        switch: bool,
    },
    /// tinc 1.0's legacy protocol (Debian's `tinc` package): CBC padding makes the
    /// overhead depend on the size, see `facts::overhead::max_tunnel_mtu`.
    TincLegacy,
    /// VpnCloud 2.x; `tap` when the interface carries Ethernet frames.
    VpnCloud {
        /// TAP (layer 2) mode.
        tap: bool,
        /// Only `plain` is allowed (no encryption, no crypto framing).
        plain: bool,
    },
    /// GRE (gre, ip6gre) or GRETAP (`tap`: Ethernet frames inside), with the optional
    /// fields its output flags add.
    Gre {
        /// Carries Ethernet frames (gretap, ip6gretap).
        tap: bool,
        /// A 4-byte key.
        key: bool,
        /// A 4-byte checksum field (checksum and reserved).
        csum: bool,
        /// A 4-byte sequence number.
        seq: bool,
        /// Over IPv6: the 8-byte tunnel encapsulation limit option.
        encap_limit: bool,
    },
    /// An IP packet straight inside another: ipip, sit (IPv6 in IPv4), ip6tnl.
    IpInIp {
        /// Over IPv6: the 8-byte tunnel encapsulation limit option.
        encap_limit: bool,
    },
}

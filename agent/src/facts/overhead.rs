//! Encapsulation overhead: bytes a tunnel adds above the inner IP packet, per tunnel type
//! and underlay address family, and the tunnel MTU that follows from a path MTU.
//!
//! Every number cites its source. These are the *expected* overheads; the data plane
//! measures the real one (outer bytes on the underlay vs inner bytes on the tunnel).

use serde::Serialize;

use crate::config::tunnel_type::TunnelType;

/// Underlay address family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum AddrFamily {
    /// IPv4 outer header (20 bytes).
    V4,
    /// IPv6 outer header (40 bytes).
    V6,
}

impl AddrFamily {
    /// From the facts' family name: "ipv6" is IPv6, anything else IPv4.
    pub fn from_name(name: &str) -> Self {
        if name == "ipv6" {
            AddrFamily::V6
        } else {
            AddrFamily::V4
        }
    }

    /// Outer IP header: 20 or 40 (RFC 791, RFC 8200).
    fn ip(self) -> u32 {
        match self {
            AddrFamily::V4 => 20,
            AddrFamily::V6 => 40,
        }
    }

    /// Outer IP header plus UDP header: 20 + 8 or 40 + 8 (RFC 768).
    fn ip_udp(self) -> u32 {
        self.ip() + 8
    }
}

/// Bytes added above the inner IP packet at the largest tunnel MTU that fits `path_mtu`
/// (constant for every type but tinc 1.0, whose CBC padding varies with the size).
pub fn overhead(tunnel: TunnelType, family: AddrFamily, path_mtu: u32) -> u32 {
    match fixed_overhead(tunnel, family) {
        Some(bytes) => bytes,
        None => path_mtu.saturating_sub(max_tunnel_mtu(tunnel, family, path_mtu)),
    }
}

fn fixed_overhead(tunnel: TunnelType, family: AddrFamily) -> Option<u32> {
    Some(match tunnel {
        // 32 = 4 type + 4 receiver index + 8 counter + 16 Poly1305 tag
        // (wireguard-go device/noise-protocol.go MessageTransportHeaderSize + poly1305.TagSize).
        // Over IPv4 60, over IPv6 80; wg-quick's set_mtu_up subtracts 80 whatever the family.
        TunnelType::Wireguard => family.ip_udp() + 32,
        // tailscaled's magicsock sends WireGuard's messages unchanged over UDP (its own disco
        // messages are separate datagrams), so the direct path adds WireGuard's 32 bytes;
        // net/tstun/mtu.go: "adjusted down from the underlying interface MTU by 80 bytes to
        // make room for the wireguard headers". Relayed, the packets travel in DERP frames
        // (5 bytes of frame header + 32 of peer key, derp/derp.go) over TLS over TCP, which
        // segments them: no MTU limit applies there.
        TunnelType::Tailscale => family.ip_udp() + 32,
        // 8 VXLAN header + 14 inner Ethernet (Linux include/net/vxlan.h VXLAN_HEADROOM = 50,
        // VXLAN6_HEADROOM = 70).
        TunnelType::Vxlan => family.ip_udp() + 8 + 14,
        // 8 GENEVE base header + options + 14 inner Ethernet (Linux drivers/net/geneve.c,
        // GENEVE_IPV4_HLEN + GENEVE_BASE_HLEN + ETH_HLEN).
        TunnelType::Geneve { options } => family.ip_udp() + 8 + options + 14,
        // 24 bytes of method overhead for every crypto method (fastd manual, "MTU
        // configuration": 1 packet type + 16 tag + 7 nonce/flags), only the 1-byte packet
        // type with method `null` (measured on the wire: 43 bytes in TAP mode over IPv4),
        // +14 in TAP mode.
        TunnelType::Fastd { tap, null_method } => {
            family.ip_udp() + if null_method { 1 } else { 24 } + if tap { 14 } else { 0 }
        }
        // 21 + 12 bytes of SPTPS datagram framing (tinc 1.1 src/sptps.h; 61 in all over IPv4
        // UDP, as summarised in shared/notes/tunnel-overheads.md), +14 in switch mode.
        TunnelType::TincSptps { switch } => family.ip_udp() + 33 + if switch { 14 } else { 0 },
        TunnelType::TincLegacy => return None,
        // VpnCloud 2.3.0: a 1-byte message type (src/crypto/common.rs send_message
        // prepends it), then, encrypted with any of its AEADs (AES128, AES256, CHACHA20),
        // 8 bytes of key id and nonce (src/crypto/core.rs EXTRA_LEN) and a 16-byte tag
        // (TAG_LEN): 25, or 1 when only `plain` is allowed; +14 in TAP mode. Its own MTU
        // (src/device.rs get_overhead) assumes an IPv6 outer header whatever the peers use:
        // 1500 - (40 + 8 + 25 + 14) = 1413 in TAP mode, the field report's MSS 1361 (1413 -
        // 40 - 12 of timestamps), where 1433 fits over IPv4.
        TunnelType::VpnCloud { tap, plain } => {
            family.ip_udp() + if plain { 1 } else { 25 } + if tap { 14 } else { 0 }
        }
        // 4 bytes of GRE header (flags, protocol), 4 more for each of checksum (+ reserved),
        // key and sequence number (RFC 2784 §2.1, RFC 2890 §2; Linux include/net/gre.h
        // gre_calc_hlen), +14 for the inner Ethernet header of GRETAP, +8 for the
        // encapsulation limit option ip6gre sends by default (Linux net/ipv6/ip6_gre.c,
        // ip6gre_tnl_link_config_route: `if (!(flags & IP6_TNL_F_IGN_ENCAP_LIMIT)) mtu -= 8`).
        TunnelType::Gre {
            tap,
            key,
            csum,
            seq,
            encap_limit,
        } => {
            let optional = [key, csum, seq].into_iter().filter(|f| *f).count() as u32 * 4;
            family.ip() + 4 + optional + if tap { 14 } else { 0 } + limit_option(encap_limit)
        }
        // The outer header only: IPv4 in IPv4 (RFC 2003; Calico's IPIP MTU 1480 on 1500),
        // IPv6 in IPv4 (RFC 4213 §3, sit), anything in IPv6 (RFC 2473, ip6tnl) with the
        // 8-byte tunnel encapsulation limit option ip6tnl sends by default (RFC 2473
        // §4.1.1: a 3-byte option padded to a destination options header of 8; Linux
        // net/ipv6/ip6_tunnel.c ip6_tnl_link_config: `dev->mtu -= 8`).
        TunnelType::IpInIp { encap_limit } => family.ip() + limit_option(encap_limit),
    })
}

/// The MTU the tunnel's software gives its interface when nobody sets one, if it has one.
pub fn usual_mtu(tunnel: TunnelType) -> Option<u32> {
    match tunnel {
        // wg-quick without MTU: the route's MTU minus 80 (wg-quick set_mtu_up), 1420 on a
        // 1500 route; the kernel creates wg devices with 1500 - 80 = 1420 too
        // (drivers/net/wireguard/device.c wg_setup), as wireguard-go does (DefaultMTU).
        TunnelType::Wireguard => Some(1420),
        // tailscaled creates its TUN with the "safe" MTU that fits any IPv6 path and most
        // nested tunnels (net/tstun/mtu.go safeTUNMTU = 1280), unless TS_DEBUG_MTU says
        // otherwise.
        TunnelType::Tailscale => Some(1280),
        _ => None,
    }
}

fn limit_option(sent: bool) -> u32 {
    if sent {
        8
    } else {
        0
    }
}

/// Largest tunnel MTU whose packets fit a path MTU of `path_mtu` once encapsulated.
pub fn max_tunnel_mtu(tunnel: TunnelType, family: AddrFamily, path_mtu: u32) -> u32 {
    match fixed_overhead(tunnel, family) {
        Some(bytes) => path_mtu.saturating_sub(bytes),
        // tinc 1.0 (src/net_packet.c): a 4-byte sequence number and the packet, which tinc
        // counts with a 14-byte Ethernet header in both modes, are CBC-encrypted in 16-byte
        // blocks with at least 1 byte of padding, then a 4-byte MAC is appended. Measured on
        // the wire over IPv4: inner 1437 -> outer 1488, the largest fitting 1500.
        None => {
            let blocks = path_mtu.saturating_sub(family.ip_udp() + 4) / 16 * 16;
            blocks.saturating_sub(1 + 4 + 14)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_matches_the_documented_figures() {
        // shared/notes/tunnel-overheads.md and the sources cited above.
        let overhead = |t, f| overhead(t, f, 1500);
        assert_eq!(overhead(TunnelType::Wireguard, AddrFamily::V4), 60);
        assert_eq!(overhead(TunnelType::Wireguard, AddrFamily::V6), 80);
        assert_eq!(overhead(TunnelType::Tailscale, AddrFamily::V4), 60);
        assert_eq!(overhead(TunnelType::Tailscale, AddrFamily::V6), 80);
        assert_eq!(usual_mtu(TunnelType::Tailscale), Some(1280));
        assert_eq!(usual_mtu(TunnelType::Wireguard), Some(1420));
        assert_eq!(usual_mtu(TunnelType::Vxlan), None);
        assert_eq!(overhead(TunnelType::Vxlan, AddrFamily::V4), 50);
        assert_eq!(overhead(TunnelType::Vxlan, AddrFamily::V6), 70);
        assert_eq!(
            overhead(TunnelType::Geneve { options: 0 }, AddrFamily::V4),
            50
        );
        assert_eq!(
            overhead(TunnelType::Geneve { options: 8 }, AddrFamily::V6),
            78
        );
        let fastd = |tap, null_method| TunnelType::Fastd { tap, null_method };
        assert_eq!(overhead(fastd(false, false), AddrFamily::V4), 52);
        assert_eq!(overhead(fastd(true, false), AddrFamily::V4), 66);
        assert_eq!(overhead(fastd(true, false), AddrFamily::V6), 86);
        assert_eq!(overhead(fastd(true, true), AddrFamily::V4), 43);
        let vpncloud = |tap, plain| TunnelType::VpnCloud { tap, plain };
        assert_eq!(overhead(vpncloud(false, false), AddrFamily::V4), 53);
        assert_eq!(overhead(vpncloud(true, false), AddrFamily::V4), 67);
        assert_eq!(overhead(vpncloud(true, false), AddrFamily::V6), 87);
        assert_eq!(overhead(vpncloud(true, true), AddrFamily::V4), 43);
        // The field report's MSS: 1361 for VpnCloud at its own MTU (1500 - 87 in TAP mode,
        // timestamps on), 1382 for fastd at 1434, 1385 for tinc 1.0 at 1437.
        let mss = |mtu: u32| mtu - 40 - 12;
        assert_eq!(
            mss(1500 - overhead(vpncloud(true, false), AddrFamily::V6)),
            1361
        );
        assert_eq!(
            mss(1500 - overhead(fastd(true, false), AddrFamily::V4)),
            1382
        );
        assert_eq!(
            mss(max_tunnel_mtu(TunnelType::TincLegacy, AddrFamily::V4, 1500)),
            1385
        );
        // tinc 1.0: measured 1437 inner -> 1488 outer, so 1437 is the largest that fits.
        assert_eq!(
            max_tunnel_mtu(TunnelType::TincLegacy, AddrFamily::V4, 1500),
            1437
        );
        assert_eq!(overhead(TunnelType::TincLegacy, AddrFamily::V4), 63);
        assert_eq!(
            overhead(TunnelType::TincSptps { switch: false }, AddrFamily::V4),
            61
        );
        let gre = |tap, key, csum, seq, encap_limit| TunnelType::Gre {
            tap,
            key,
            csum,
            seq,
            encap_limit,
        };
        // ip -d link: a gre device on a 1500 underlay gets MTU 1476, with key 1472, with
        // key+csum+seq 1464; gretap 1462; ip6gre (encaplimit 4) 1448.
        assert_eq!(
            overhead(gre(false, false, false, false, false), AddrFamily::V4),
            24
        );
        assert_eq!(
            overhead(gre(false, true, false, false, false), AddrFamily::V4),
            28
        );
        assert_eq!(
            overhead(gre(false, true, true, true, false), AddrFamily::V4),
            36
        );
        assert_eq!(
            overhead(gre(true, false, false, false, false), AddrFamily::V4),
            38
        );
        assert_eq!(
            overhead(gre(false, false, false, false, true), AddrFamily::V6),
            52
        );
        let ipip = |encap_limit| TunnelType::IpInIp { encap_limit };
        assert_eq!(overhead(ipip(false), AddrFamily::V4), 20);
        // ip6tnl on a 1500 underlay: MTU 1452 (encaplimit 4), 1460 with encaplimit none.
        assert_eq!(overhead(ipip(true), AddrFamily::V6), 48);
        assert_eq!(overhead(ipip(false), AddrFamily::V6), 40);
    }

    #[test]
    fn tunnel_mtus_for_common_underlays() {
        let wg = |fam, pmtu| max_tunnel_mtu(TunnelType::Wireguard, fam, pmtu);
        assert_eq!(wg(AddrFamily::V4, 1500), 1440);
        assert_eq!(wg(AddrFamily::V6, 1500), 1420);
        assert_eq!(wg(AddrFamily::V4, 1492), 1432);
        assert_eq!(wg(AddrFamily::V4, 9000), 8940);
        assert_eq!(
            max_tunnel_mtu(TunnelType::Vxlan, AddrFamily::V4, 1500),
            1450
        );
        assert_eq!(
            max_tunnel_mtu(
                TunnelType::Fastd {
                    tap: true,
                    null_method: false
                },
                AddrFamily::V4,
                1500
            ),
            1434
        );
        assert_eq!(max_tunnel_mtu(TunnelType::Wireguard, AddrFamily::V4, 40), 0);
    }
}

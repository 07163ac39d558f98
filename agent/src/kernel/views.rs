//! Plain Rust views of the BPF maps' C structs (`ebpf/include/packet.h`).
//!
//! The structs themselves are generated into the skeleton; this module only adds the byte
//! conversions libbpf-rs map reads need, and the small enums the C side stores as numbers.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use serde::Serialize;

pub use crate::kernel::bpf::packet::types::{
    nd_dir_stats, nd_flow_key, nd_flow_slot, nd_flow_stats, nd_flow_win, nd_iface_dir,
    nd_local_addrs, nd_ptb_key, nd_ptb_stats, nd_wg_ctr, nd_wg_hs, nd_wg_key, nd_wg_rx,
};

// SAFETY (all impls below): each type is a `#[repr(C)]` struct generated from
// packet.h made only of integers and integer arrays, with explicit padding fields, so
// every bit pattern of the right length is a valid value.
// SAFETY: see above.
unsafe impl plain::Plain for nd_iface_dir {}
// SAFETY: see above.
unsafe impl plain::Plain for nd_flow_key {}
// SAFETY: see above.
unsafe impl plain::Plain for nd_flow_stats {}
// SAFETY: see above.
unsafe impl plain::Plain for nd_flow_slot {}
// SAFETY: see above.
unsafe impl plain::Plain for nd_ptb_key {}
// SAFETY: see above.
unsafe impl plain::Plain for nd_ptb_stats {}
// SAFETY: see above.
unsafe impl plain::Plain for nd_local_addrs {}
// SAFETY: see above.
unsafe impl plain::Plain for nd_wg_key {}
// SAFETY: see above.
unsafe impl plain::Plain for nd_wg_rx {}
// SAFETY: see above.
unsafe impl plain::Plain for nd_wg_hs {}

/// Decodes a map key or value; `None` if the kernel returned the wrong length.
pub(crate) fn decode<T: plain::Plain + Default>(bytes: &[u8]) -> Option<T> {
    let mut out = T::default();
    (bytes.len() == std::mem::size_of::<T>())
        .then(|| plain::copy_from_bytes(&mut out, bytes).ok())
        .flatten()
        .map(|()| out)
}

/// The bytes of a map key or value.
pub(crate) fn encode<T: plain::Plain>(value: &T) -> &[u8] {
    // SAFETY: `T: Plain` types have no padding holes the kernel could misread and no
    // pointers; viewing them as bytes is what the map API expects.
    unsafe { plain::as_bytes(value) }
}

/// Packet direction as the hook saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// Received on the interface.
    Ingress = 0,
    /// Sent from the interface.
    Egress = 1,
}

impl Direction {
    pub(crate) fn from_raw(raw: u8) -> Self {
        if raw == 1 {
            Direction::Egress
        } else {
            Direction::Ingress
        }
    }
}

/// Encapsulation recognised on an underlay flow (`enum nd_encap`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Encap {
    /// Not a tunnel packet.
    None = 0,
    /// WireGuard (recognised by message shape, any port).
    Wireguard = 1,
    /// VXLAN (UDP 4789 or 8472).
    Vxlan = 2,
    /// GENEVE (UDP 6081).
    Geneve = 3,
    /// fastd (configured port).
    Fastd = 4,
    /// tinc (configured port).
    Tinc = 5,
    /// Another UDP VPN daemon (configured port).
    Other = 6,
    /// GRE (IP protocol 47): gre, gretap, ip6gre, ip6gretap.
    Gre = 7,
    /// IPv4 inside IPv4 or IPv6 (IP protocol 4): ipip, ip6tnl mode ipip.
    Ipip = 8,
    /// IPv6 inside IPv4 or IPv6 (IP protocol 41): sit, ip6tnl mode ip6ip6.
    Ip6In = 9,
}

impl Encap {
    pub(crate) fn from_raw(raw: u8) -> Self {
        match raw {
            1 => Encap::Wireguard,
            2 => Encap::Vxlan,
            3 => Encap::Geneve,
            4 => Encap::Fastd,
            5 => Encap::Tinc,
            6 => Encap::Other,
            7 => Encap::Gre,
            8 => Encap::Ipip,
            9 => Encap::Ip6In,
            _ => Encap::None,
        }
    }

    /// Recognised by the data plane from the IP protocol number, not a UDP port: a port
    /// cannot be configured for it.
    pub fn is_ip_protocol(self) -> bool {
        matches!(self, Encap::Gre | Encap::Ipip | Encap::Ip6In)
    }
}

/// An address stored in a 16-byte key field (IPv4 in the first four bytes).
pub(crate) fn addr(family: u8, raw: &[u8; 16]) -> IpAddr {
    if family == 4 {
        IpAddr::V4(Ipv4Addr::new(raw[0], raw[1], raw[2], raw[3]))
    } else {
        IpAddr::V6(Ipv6Addr::from(*raw))
    }
}

/// Converts a CLOCK_MONOTONIC timestamp (what BPF records) to milliseconds since the UNIX
/// epoch.
pub(crate) fn monotonic_to_unix_ms(mono_ns: u64) -> u64 {
    Clocks::now().unix_ms(mono_ns)
}

/// CLOCK_MONOTONIC and the UNIX time read together once ([`clocks_now`]), to convert every
/// timestamp of one reading alike and without reading the clocks again for each.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Clocks {
    mono: u64,
    unix: u64,
}

impl Clocks {
    /// The clocks now.
    pub(crate) fn now() -> Clocks {
        let (mono, unix) = clocks_now();
        Clocks { mono, unix }
    }

    /// Clocks read at CLOCK_MONOTONIC `mono` ns and UNIX time `unix` ns (tests).
    #[cfg(test)]
    pub(crate) fn at(mono: u64, unix: u64) -> Clocks {
        Clocks { mono, unix }
    }

    /// When they were read, CLOCK_MONOTONIC nanoseconds.
    pub(crate) fn mono_ns(&self) -> u64 {
        self.mono
    }

    /// A CLOCK_MONOTONIC timestamp in milliseconds since the UNIX epoch.
    pub(crate) fn unix_ms(&self, mono_ns: u64) -> u64 {
        self.unix.saturating_sub(self.mono.saturating_sub(mono_ns)) / 1_000_000
    }
}

/// CLOCK_MONOTONIC and the UNIX time, in ns, read as close together as this thread can: a
/// thread preempted between the two reads would shift the conversion by as long, so two
/// conversions of one timestamp could differ by milliseconds on a busy host. The UNIX time
/// is read between two monotonic reads, a few times if they lie far apart, and paired with
/// their middle.
fn clocks_now() -> (u64, u64) {
    let mono = || {
        nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
            .map(|t| t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64)
            .unwrap_or(0)
    };
    let unix = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0)
    };
    let mut best = (u64::MAX, 0, 0);
    for _ in 0..8 {
        let (before, u, after) = (mono(), unix(), mono());
        let gap = after.saturating_sub(before);
        if gap < best.0 {
            best = (gap, before + gap / 2, u);
        }
        if gap < 50_000 {
            break;
        }
    }
    (best.1, best.2)
}

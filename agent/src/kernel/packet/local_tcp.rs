//! The local path (`ebpf/include/local_tcp.bpf.h`): TCP segments of this host's own
//! connections are counted per interface instead of per flow, because socket telemetry
//! describes those connections exactly, at a fraction of the per-packet cost.
//!
//! Here: the setting ([`LocalTcp`]), and what the data plane must know to recognise a
//! received segment as local ([`LocalAddrs`]: this host's addresses, and whether it
//! forwards). Egress needs nothing: the segment's socket says it.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use serde::Serialize;

use crate::kernel::views::nd_local_addrs;

/// How TCP segments of this host's own connections are accounted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LocalTcp {
    /// Per interface (packets, segments, sizes, retransmissions), each connection
    /// described by socket telemetry; used only where socket telemetry loads.
    Sockets,
    /// Per flow in the flow table, like forwarded traffic (costlier per packet).
    Packets,
}

/// How many addresses of each family the data plane compares (`ND_LOCAL_V4`/`_V6`). With
/// more, received segments of that family keep their flow records.
pub const MAX_V4: usize = 8;
/// See [`MAX_V4`].
pub const MAX_V6: usize = 4;

/// This network namespace's addresses and forwarding settings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LocalAddrs {
    /// IPv4 addresses of every interface.
    pub v4: Vec<Ipv4Addr>,
    /// IPv6 addresses of every interface, link-local ones included.
    pub v6: Vec<Ipv6Addr>,
    /// `net.ipv4.ip_forward` is on.
    pub forward_v4: bool,
    /// `net.ipv6.conf.all.forwarding` is on.
    pub forward_v6: bool,
}

impl LocalAddrs {
    /// Reads the namespace's addresses (getifaddrs, over netlink) and forwarding sysctls.
    /// A sysctl that cannot be read counts as forwarding: the safe side.
    pub fn read() -> std::io::Result<Self> {
        let mut out = LocalAddrs {
            forward_v4: forwarding("net.ipv4.ip_forward"),
            forward_v6: forwarding("net.ipv6.conf.all.forwarding"),
            ..LocalAddrs::default()
        };
        for ifa in nix::ifaddrs::getifaddrs()? {
            let Some(addr) = ifa.address else { continue };
            let ip = if let Some(v4) = addr.as_sockaddr_in() {
                IpAddr::V4(v4.ip())
            } else if let Some(v6) = addr.as_sockaddr_in6() {
                IpAddr::V6(v6.ip())
            } else {
                continue;
            };
            out.push(ip);
        }
        Ok(out)
    }

    fn push(&mut self, ip: IpAddr) {
        match ip {
            IpAddr::V4(a) if !self.v4.contains(&a) => self.v4.push(a),
            IpAddr::V6(a) if !self.v6.contains(&a) => self.v6.push(a),
            _ => {}
        }
    }

    /// Whether received segments of each family can be recognised as local: all its
    /// addresses fit, and the host does not forward it (a forwarding host can DNAT traffic
    /// addressed to it onward).
    pub fn usable(&self) -> (bool, bool) {
        (
            !self.forward_v4 && self.v4.len() <= MAX_V4,
            !self.forward_v6 && self.v6.len() <= MAX_V6,
        )
    }

    /// The map value the data plane reads.
    pub(crate) fn value(&self) -> nd_local_addrs {
        let (v4_ok, v6_ok) = self.usable();
        let mut v = nd_local_addrs {
            v4_ok: u32::from(v4_ok),
            v6_ok: u32::from(v6_ok),
            ..nd_local_addrs::default()
        };
        for (slot, a) in v.v4.iter_mut().zip(&self.v4) {
            // Compared with the packet's address as it lies in memory (network order).
            *slot = u32::from_ne_bytes(a.octets());
        }
        for (slot, a) in v.v6.iter_mut().zip(&self.v6) {
            *slot = a.octets();
        }
        v
    }
}

/// Whether forwarding is on (`key` as a sysctl name, e.g. `net.ipv4.ip_forward`): a value
/// other than "0", or unreadable.
fn forwarding(key: &str) -> bool {
    let path = std::path::PathBuf::from("/proc/sys").join(key.replace('.', "/"));
    std::fs::read_to_string(path)
        .ok()
        .is_none_or(|v| v.trim() != "0")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_fill_the_map_value_in_network_order() {
        let mut a = LocalAddrs::default();
        a.push("10.0.0.1".parse().expect("ip"));
        a.push("10.0.0.1".parse().expect("ip"));
        a.push("fe80::1".parse().expect("ip"));
        let v = a.value();
        assert_eq!(v.v4[0].to_ne_bytes(), [10, 0, 0, 1]);
        assert_eq!(v.v4[1], 0, "duplicates are listed once");
        assert_eq!(v.v6[0][0..2], [0xfe, 0x80]);
        assert_eq!((v.v4_ok, v.v6_ok), (1, 1));
    }

    #[test]
    fn forwarding_or_too_many_addresses_turn_ingress_off() {
        let mut a = LocalAddrs {
            forward_v4: true,
            ..LocalAddrs::default()
        };
        for i in 0..=MAX_V6 {
            a.push(IpAddr::V6(Ipv6Addr::new(
                0x2001, 0xdb8, 0, 0, 0, 0, 0, i as u16,
            )));
        }
        assert_eq!(a.usable(), (false, false));
        a.forward_v4 = false;
        assert_eq!(a.usable(), (true, false));
    }

    /// Reads this machine's real addresses: loopback is always there.
    #[test]
    fn reads_loopback() {
        let a = LocalAddrs::read().expect("getifaddrs");
        assert!(a.v4.contains(&Ipv4Addr::LOCALHOST), "{a:?}");
    }
}

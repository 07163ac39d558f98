//! IP tunnels as rtnetlink describes them: GRE and GRETAP (over IPv4 and IPv6), IPIP, sit and
//! ip6tnl. Their remote and local addresses, the device the outer packets are pinned to, and
//! what sets the encapsulation's size: GRE's key, checksum and sequence-number flags, and
//! ip6tnl's tunnel encapsulation limit option.

use std::net::IpAddr;

use rtnetlink::packet_route::link::{
    GreIOFlags, InfoData, InfoGre, InfoGre6, InfoIpTunnel, InfoKind, Ip6TunnelFlags,
};
use rtnetlink::packet_route::IpProtocol;
use serde::Serialize;

use super::tunnel_type::TunnelType;
use crate::kernel::views::Encap;

/// An IP tunnel device's settings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct IpTunnel {
    /// The rtnetlink kind: gre, gretap, ip6gre, ip6gretap, ipip, sit, ip6tnl.
    pub kind: String,
    /// Remote address, if configured (none: a multipoint or metadata tunnel).
    pub remote: Option<IpAddr>,
    /// Local address, if configured.
    pub local: Option<IpAddr>,
    /// Underlay device index, if pinned (`dev` option).
    pub underlay_ifindex: Option<u32>,
    /// GRE output flags: a key, a checksum, a sequence number (4 bytes each).
    pub gre_key: bool,
    /// GRE checksum on sent packets.
    pub gre_csum: bool,
    /// GRE sequence numbers on sent packets.
    pub gre_seq: bool,
    /// Over IPv6: the tunnel encapsulation limit option is sent (8 bytes, RFC 2473 §4.1.1;
    /// Linux sends it unless the tunnel is configured with `encaplimit none`).
    pub encap_limit: Option<u8>,
    /// ip6tnl: the inner protocol it carries, "ipip" (IPv4), "ip6ip6" or "any".
    pub mode: String,
}

impl IpTunnel {
    /// Carries Ethernet frames (GRETAP).
    fn tap(&self) -> bool {
        self.kind.ends_with("tap")
    }

    /// The overhead model of this tunnel.
    pub fn tunnel_type(&self) -> TunnelType {
        if self.kind.contains("gre") {
            TunnelType::Gre {
                tap: self.tap(),
                key: self.gre_key,
                csum: self.gre_csum,
                seq: self.gre_seq,
                encap_limit: self.encap_limit.is_some(),
            }
        } else {
            TunnelType::IpInIp {
                encap_limit: self.encap_limit.is_some(),
            }
        }
    }

    /// How the data plane recognises its packets on the underlay: GRE by IP protocol 47,
    /// IPv4 inside by protocol 4 (ipip, ip6tnl mode ipip), IPv6 inside by 41 (sit, ip6tnl's
    /// default mode ip6ip6; in mode any, IPv6 inside is assumed).
    pub fn encap(&self) -> Encap {
        match self.kind.as_str() {
            k if k.contains("gre") => Encap::Gre,
            "ipip" => Encap::Ipip,
            "ip6tnl" if self.mode == "ipip" => Encap::Ipip,
            _ => Encap::Ip6In,
        }
    }

    /// The settings as `ip -d link` names them, for the facts' `tunnel.options`.
    pub fn options(&self) -> Vec<String> {
        let mut o = Vec::new();
        for (set, name) in [
            (self.gre_key, "key"),
            (self.gre_csum, "csum"),
            (self.gre_seq, "seq"),
        ] {
            if set {
                o.push(name.to_owned());
            }
        }
        if let Some(limit) = self.encap_limit {
            o.push(format!("encaplimit {limit}"));
        }
        if !self.mode.is_empty() {
            o.push(format!("mode {}", self.mode));
        }
        o
    }
}

fn gre_flags(t: &mut IpTunnel, f: &GreIOFlags) {
    t.gre_key = f.contains(GreIOFlags::Key);
    t.gre_csum = f.contains(GreIOFlags::Checksum);
    t.gre_seq = f.contains(GreIOFlags::Seq);
}

fn gre(kind: &str, infos: &[InfoGre]) -> IpTunnel {
    let mut t = IpTunnel {
        kind: kind.to_owned(),
        ..IpTunnel::default()
    };
    for i in infos {
        match i {
            InfoGre::Remote(a) if !a.is_unspecified() => t.remote = Some(IpAddr::V4(*a)),
            InfoGre::Local(a) if !a.is_unspecified() => t.local = Some(IpAddr::V4(*a)),
            InfoGre::Link(l) if *l != 0 => t.underlay_ifindex = Some(*l),
            InfoGre::OFlags(f) => gre_flags(&mut t, f),
            _ => {}
        }
    }
    t
}

fn gre6(kind: &str, infos: &[InfoGre6]) -> IpTunnel {
    let mut t = IpTunnel {
        kind: kind.to_owned(),
        ..IpTunnel::default()
    };
    let mut limit = None;
    let mut ignore_limit = false;
    for i in infos {
        match i {
            InfoGre6::Remote(a) if !a.is_unspecified() => t.remote = Some(IpAddr::V6(*a)),
            InfoGre6::Local(a) if !a.is_unspecified() => t.local = Some(IpAddr::V6(*a)),
            InfoGre6::Link(l) if *l != 0 => t.underlay_ifindex = Some(*l),
            InfoGre6::OFlags(f) => gre_flags(&mut t, f),
            InfoGre6::EncapLimit(l) => limit = Some(*l),
            // IFLA_GRE_FLAGS (ip6gre's ip6tnl flags) is not decoded by the crate: read the
            // raw attribute (IFLA_GRE_FLAGS = 13, IP6_TNL_F_IGN_ENCAP_LIMIT = 1).
            InfoGre6::Other(nla) => {
                use netlink_packet_core::Nla;
                let mut v = vec![0u8; nla.value_len()];
                nla.emit_value(&mut v);
                if nla.kind() == 13 && v.len() == 4 {
                    ignore_limit = u32::from_ne_bytes([v[0], v[1], v[2], v[3]]) & 1 != 0;
                }
            }
            _ => {}
        }
    }
    t.encap_limit = limit.filter(|_| !ignore_limit);
    t
}

fn iptun(kind: &str, infos: &[InfoIpTunnel]) -> IpTunnel {
    let mut t = IpTunnel {
        kind: kind.to_owned(),
        ..IpTunnel::default()
    };
    let mut limit = None;
    let mut ignore_limit = false;
    for i in infos {
        match i {
            InfoIpTunnel::Remote(a) if !a.is_unspecified() => t.remote = Some(*a),
            InfoIpTunnel::Local(a) if !a.is_unspecified() => t.local = Some(*a),
            InfoIpTunnel::Link(l) if *l != 0 => t.underlay_ifindex = Some(*l),
            InfoIpTunnel::EncapLimit(l) => limit = Some(*l),
            InfoIpTunnel::Ipv6Flags(f) => ignore_limit = f.contains(Ip6TunnelFlags::IgnEncapLimit),
            InfoIpTunnel::Protocol(p) if kind == "ip6tnl" => {
                t.mode = match p {
                    IpProtocol::Ipip => "ipip",
                    IpProtocol::Ipv6 => "ip6ip6",
                    _ => "any",
                }
                .to_owned()
            }
            _ => {}
        }
    }
    if kind == "ip6tnl" {
        t.encap_limit = limit.filter(|_| !ignore_limit);
    }
    t
}

/// The IP tunnel settings in a link's `IFLA_INFO_DATA`, if it is one; `kind` is the link's
/// `IFLA_INFO_KIND` (ipip, sit and ip6tnl share one set of attributes).
pub fn from_info(kind: &InfoKind, data: &InfoData) -> Option<IpTunnel> {
    let name = kind.to_string();
    Some(match data {
        InfoData::GreTun(i) => gre("gre", i),
        InfoData::GreTap(i) => gre("gretap", i),
        InfoData::GreTun6(i) => gre6("ip6gre", i),
        InfoData::GreTap6(i) => gre6("ip6gretap", i),
        InfoData::IpTunnel(i) => iptun(&name, i),
        _ => return None,
    })
}

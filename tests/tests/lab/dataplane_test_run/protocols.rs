//! Every protocol and link type: Ethernet and raw IP, IPv4 and IPv6 with TCP, UDP and ICMP
//! echo, frames that are not IP (ARP, LLDP, LLC, EtherType 0), VLAN tags up to the limit.

use anyhow::Result;
use netdoctor::kernel::packet::LinkType;
use netdoctor::kernel::packet::{Dataplane, Options};
use netdoctor::kernel::views::Encap;
use netdoctor_lab::lab_guard;
use netdoctor_lab::packet::builder::{self as pkt, Ipv4, Ipv6, Tcp};

use crate::dataplane_test_run::expect::Expect;
use crate::dataplane_test_run::harness::{
    run_cases, v4_octets, A, A6, B, B6, ETHER_1500, LO, PROGRAMS,
};

fn ethernet_ipv4_tcp_udp_icmp_echo(dp: &Dataplane<'_>) -> Result<()> {
    let mut e = Expect::new(dp);
    let tcp = pkt::v4(
        pkt::TCP,
        &Tcp::new(40000, 443, 1, pkt::ACK | pkt::PSH).build(&pkt::data(100)),
    );
    assert_eq!(tcp.len(), 14 + 20 + 20 + 100);
    let udp = pkt::v4(pkt::UDP, &pkt::udp(5353, 53, &pkt::data(30)));
    let echo = pkt::v4(
        pkt::ICMP,
        &pkt::icmp(8, 0, [0x12, 0x34, 0, 1], &pkt::data(56)),
    );
    let mut ip = Ipv4::new(pkt::ICMP);
    ip.src = v4_octets(B);
    ip.dst = v4_octets(A);
    let reply = pkt::eth(
        pkt::ETH_IPV4,
        &ip.build(&pkt::icmp(0, 0, [0x12, 0x34, 0, 1], &pkt::data(56))),
    );
    let ttl = pkt::v4(pkt::ICMP, &pkt::icmp(11, 0, [0xff; 4], &pkt::data(28)));
    for kind in PROGRAMS {
        e.on(kind);
        e.ip(&tcp, 140, (pkt::TCP, A, 40000, B, 443))?.tcp_flags = pkt::ACK | pkt::PSH;
        e.seen_again((pkt::TCP, A, 40000, B, 443));
        e.ip(&udp, 58, (pkt::UDP, A, 5353, B, 53))?;
        // Echo: sport = type << 8 | code, dport = identifier.
        e.ip(&echo, 84, (pkt::ICMP, A, 0x0800, B, 0x1234))?;
        e.ip(&reply, 84, (pkt::ICMP, B, 0x0000, A, 0x1234))?;
        // Other ICMP (time exceeded): no identifier.
        e.ip(&ttl, 56, (pkt::ICMP, A, 0x0b00, B, 0))?;
        e.check()?;
    }
    Ok(())
}

fn ethernet_ipv6_tcp_udp_icmpv6_echo(dp: &Dataplane<'_>) -> Result<()> {
    let mut e = Expect::new(dp);
    let tcp = pkt::v6(
        pkt::TCP,
        &Tcp::new(40000, 443, 7, pkt::ACK).build(&pkt::data(100)),
    );
    assert_eq!(tcp.len(), 14 + 40 + 20 + 100);
    let udp = pkt::v6(pkt::UDP, &pkt::udp(5353, 53, &pkt::data(30)));
    let echo = pkt::v6(
        pkt::ICMPV6,
        &pkt::icmp(128, 0, [0x43, 0x21, 0, 1], &pkt::data(56)),
    );
    let reply = pkt::v6(
        pkt::ICMPV6,
        &pkt::icmp(129, 0, [0x43, 0x21, 0, 1], &pkt::data(56)),
    );
    let ns = pkt::v6(pkt::ICMPV6, &pkt::icmp(135, 0, [0; 4], &[0; 16]));
    for kind in PROGRAMS {
        e.on(kind);
        e.ip(&tcp, 160, (pkt::TCP, A6, 40000, B6, 443))?.tcp_flags = pkt::ACK;
        e.seen_again((pkt::TCP, A6, 40000, B6, 443));
        e.ip(&udp, 78, (pkt::UDP, A6, 5353, B6, 53))?;
        e.ip(&echo, 104, (pkt::ICMPV6, A6, 0x8000, B6, 0x4321))?;
        e.ip(&reply, 104, (pkt::ICMPV6, A6, 0x8100, B6, 0x4321))?;
        // Neighbour solicitation: no identifier.
        e.ip(&ns, 64, (pkt::ICMPV6, A6, 0x8700, B6, 0))?;
        e.check()?;
    }
    Ok(())
}

/// Raw-IP interfaces (wg, tun): the packet starts with the IP header. Only XDP test runs can
/// feed such packets (skb test runs always parse an Ethernet header).
fn raw_ip_ipv4_ipv6_via_xdp(dp: &Dataplane<'_>) -> Result<()> {
    let mut e = Expect::new(dp);
    let tcp = Ipv4::new(pkt::TCP).build(&Tcp::new(40000, 443, 1, pkt::ACK).build(&pkt::data(100)));
    e.ip(&tcp, 140, (pkt::TCP, A, 40000, B, 443))?.tcp_flags = pkt::ACK;
    let udp = Ipv6::new().build(pkt::UDP, &pkt::udp(51820, 51820, &pkt::wg(4, 32)));
    let f = e.ip(&udp, 80, (pkt::UDP, A6, 51820, B6, 51820))?;
    f.encap = Encap::Wireguard;
    f.wireguard.data = 1;
    let icmp = Ipv4::new(pkt::ICMP).build(&pkt::icmp(8, 0, [0, 9, 0, 1], &pkt::data(56)));
    e.ip(&icmp, 84, (pkt::ICMP, A, 0x0800, B, 9))?;
    // First nibble neither 4 nor 6.
    e.non_ip(&[0x00; 20])?;
    e.non_ip(&[0x50; 40])?;
    // An Ethernet frame on a raw-IP device: first byte 0x02 -> nibble 0 -> not IP.
    e.non_ip(&pkt::v4(pkt::UDP, &pkt::udp(1, 2, &[])))?;
    // IPv4 header cut at 19 bytes; IPv6 header cut at 39 bytes; IPv4 with IHL 4.
    e.truncated(&tcp[..19])?;
    e.truncated(&udp[..39])?;
    let mut bad = tcp.clone();
    bad[0] = 0x44;
    e.truncated(&bad)?;
    // Over the 1420 MTU: IPv6 always, IPv4 only with DF.
    let big6 = Ipv6::new().build(pkt::UDP, &pkt::udp(1, 2, &[0; 1373]));
    e.ip(&big6, 1421, (pkt::UDP, A6, 1, B6, 2))?;
    e.dir().df_over_mtu += 1;
    e.check()?;
    // The same bytes on an Ethernet interface are parsed from a MAC header: the bytes
    // at offset 12..14 of the IPv4 packet (source address 10.0.x.x) are no EtherType.
    dp.watch(LO, 1420, LinkType::Ether)?;
    e.non_ip(&tcp)?;
    e.check()
}

/// ARP, LLDP and 802.3/LLC frames are counted as non-IP and not parsed.
fn non_ip_frames_arp_lldp_llc(dp: &Dataplane<'_>) -> Result<()> {
    let mut e = Expect::new(dp);
    let mut arp = vec![0, 1, 8, 0, 6, 4, 0, 1];
    arp.extend([
        0x02, 0, 0, 0, 0, 1, 10, 0, 0, 1, 0, 0, 0, 0, 0, 0, 10, 0, 0, 2,
    ]);
    let arp = pkt::eth(pkt::ETH_ARP, &arp);
    assert_eq!(arp.len(), 42);
    for kind in PROGRAMS {
        e.on(kind);
        e.non_ip(&arp)?;
        e.non_ip(&pkt::eth(pkt::ETH_LLDP, &[0; 46]))?;
        // 802.3 length field 0x0026 + LLC.
        e.non_ip(&pkt::eth(0x0026, &[0x42, 0x42, 0x03, 0, 0, 0]))?;
        // Exactly an Ethernet header.
        e.non_ip(&pkt::eth(pkt::ETH_ARP, &[]))?;
        e.check()?;
    }
    Ok(())
}

/// EtherType 0x0000 on a complete frame, untagged or behind a VLAN tag, is an EtherType like
/// any other that is not IP: non-IP, not truncated.
fn ethertype_zero_is_non_ip(dp: &Dataplane<'_>) -> Result<()> {
    let mut e = Expect::new(dp);
    for kind in PROGRAMS {
        e.on(kind);
        e.non_ip(&pkt::eth(0x0000, &[0; 46]))?;
        e.non_ip(&pkt::eth_tagged(&[pkt::VLAN_Q], 0x0000, &[0; 42]))?;
        // Nothing after the EtherType.
        e.non_ip(&pkt::eth(0x0000, &[]))?;
        e.non_ip(&pkt::eth_tagged(&[pkt::VLAN_AD, pkt::VLAN_Q], 0x0000, &[]))?;
        e.check()?;
    }
    Ok(())
}

/// One 802.1Q tag, 802.1ad + 802.1Q (QinQ) and double 802.1Q are parsed; a third tag is past
/// ND_MAX_VLAN and leaves a VLAN EtherType, i.e. non-IP; a cut tag is truncated.
fn vlan_single_qinq_and_too_deep(dp: &Dataplane<'_>) -> Result<()> {
    let mut e = Expect::new(dp);
    let udp4 = Ipv4::new(pkt::UDP).build(&pkt::udp(5000, 6000, &pkt::data(30)));
    let tcp6 = Ipv6::new().build(
        pkt::TCP,
        &Tcp::new(1000, 22, 5, pkt::ACK).build(&pkt::data(20)),
    );
    let single = pkt::eth_tagged(&[pkt::VLAN_Q], pkt::ETH_IPV4, &udp4);
    assert_eq!(single.len(), 18 + 58);
    let qinq = pkt::eth_tagged(&[pkt::VLAN_AD, pkt::VLAN_Q], pkt::ETH_IPV6, &tcp6);
    let double_q = pkt::eth_tagged(&[pkt::VLAN_Q, pkt::VLAN_Q], pkt::ETH_IPV4, &udp4);
    let three = pkt::eth_tagged(
        &[pkt::VLAN_AD, pkt::VLAN_Q, pkt::VLAN_Q],
        pkt::ETH_IPV4,
        &udp4,
    );
    for kind in PROGRAMS {
        e.on(kind);
        e.ip(&single, 58, (pkt::UDP, A, 5000, B, 6000))?;
        e.ip(&qinq, 80, (pkt::TCP, A6, 1000, B6, 22))?.tcp_flags = pkt::ACK;
        e.seen_again((pkt::TCP, A6, 1000, B6, 22));
        e.ip(&double_q, 58, (pkt::UDP, A, 5000, B, 6000))?;
        e.non_ip(&pkt::eth_tagged(&[pkt::VLAN_Q], pkt::ETH_ARP, &[0; 28]))?;
        // Three tags: the parser stops after two with EtherType 0x8100 left.
        e.non_ip(&three)?;
        // Tag cut (16 bytes, EtherType 0x8100); QinQ whose inner tag is cut.
        e.truncated(&single[..16])?;
        e.truncated(&qinq[..20])?;
        // Tags complete, IP header cut.
        e.truncated(&single[..18 + 10])?;
        e.truncated(&qinq[..22 + 39])?;
        e.check()?;
    }
    Ok(())
}

/// Every protocol and link type.
#[test]
fn protocols_and_link_types() -> Result<()> {
    lab_guard!();
    run_cases(
        Options::default(),
        &[
            (
                "ethernet_ipv4_tcp_udp_icmp_echo",
                ETHER_1500,
                ethernet_ipv4_tcp_udp_icmp_echo,
            ),
            (
                "ethernet_ipv6_tcp_udp_icmpv6_echo",
                ETHER_1500,
                ethernet_ipv6_tcp_udp_icmpv6_echo,
            ),
            (
                "raw_ip_ipv4_ipv6_via_xdp",
                Some((1420, LinkType::RawIp)),
                raw_ip_ipv4_ipv6_via_xdp,
            ),
            (
                "non_ip_frames_arp_lldp_llc",
                ETHER_1500,
                non_ip_frames_arp_lldp_llc,
            ),
            (
                "ethertype_zero_is_non_ip",
                ETHER_1500,
                ethertype_zero_is_non_ip,
            ),
            (
                "vlan_single_qinq_and_too_deep",
                ETHER_1500,
                vlan_single_qinq_and_too_deep,
            ),
        ],
    )
}

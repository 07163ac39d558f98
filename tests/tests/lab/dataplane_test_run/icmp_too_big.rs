//! ICMP fragmentation needed and ICMPv6 packet too big: the too-big entries they record
//! from the quoted packet, and each ICMP counted only in its own IP version.

use anyhow::Result;
use netdoctor::kernel::packet::{Dataplane, Options};
use netdoctor_lab::lab_guard;
use netdoctor_lab::packet::builder::{self as pkt, Ext, Ipv4, Ipv6, Tcp};

use crate::dataplane_test_run::expect::Expect;
use crate::dataplane_test_run::harness::{
    run_cases, v4, v4_octets, v6, v6_octets, A, A6, B, B6, ETHER_1500, PROGRAMS, V4_ANY, V6_ANY,
};

fn icmp_frag_needed_records_too_big(dp: &Dataplane<'_>) -> Result<()> {
    let mut e = Expect::new(dp);
    // Router 10.0.0.<r> -> 10.0.0.1, quoting a packet 10.0.0.1 -> 10.0.0.2.
    let from = |r: u8, icmp: &[u8]| {
        let mut ip = Ipv4::new(pkt::ICMP);
        ip.src = [10, 0, 0, r];
        ip.dst = v4_octets(A);
        pkt::eth(pkt::ETH_IPV4, &ip.build(icmp))
    };
    let mtu = |m: u16| {
        let b = m.to_be_bytes();
        [0, 0, b[0], b[1]]
    };
    let mut quoted = Ipv4::new(pkt::TCP);
    quoted.df = true;
    quoted.tot_len = Some(1500);
    let tcp_quote = quoted.build(&Tcp::new(40000, 443, 1, pkt::ACK).build(&[])[..8]);
    let mut q = Ipv4::new(pkt::UDP);
    q.options = vec![0x94, 4, 0, 0];
    let udp_quote = q.build(&pkt::udp(5000, 6000, &pkt::data(100))[..8]);
    let icmp_key = |r: u8, code: u8| (pkt::ICMP, v4(r), 0x0300 | u16::from(code), A, 0);
    for kind in PROGRAMS {
        e.on(kind);
        // Full quote, twice, MTU 1400 then 1380: one entry, count 2, the last MTU.
        for m in [1400, 1380] {
            let frame = from(254, &pkt::icmp(3, 4, mtu(m), &tcp_quote));
            e.ip(&frame, 20 + 8 + 28, icmp_key(254, 4))?;
            e.dir().icmp_frag_needed += 1;
            e.ptb(v4(254), u32::from(m), pkt::TCP, (A, 40000, B, 443));
        }
        // Quoted header with options: ports read after them.
        let frame = from(253, &pkt::icmp(3, 4, mtu(1280), &udp_quote));
        e.ip(&frame, 20 + 8 + 32, icmp_key(253, 4))?;
        e.dir().icmp_frag_needed += 1;
        e.ptb(v4(253), 1280, pkt::UDP, (A, 5000, B, 6000));
        // Quote cut 2 bytes after the IP header: addresses, protocol, no ports.
        let frame = from(252, &pkt::icmp(3, 4, mtu(1000), &tcp_quote[..22]));
        e.ip(&frame, 50, icmp_key(252, 4))?;
        e.dir().icmp_frag_needed += 1;
        e.ptb(v4(252), 1000, pkt::TCP, (A, 0, B, 0));
        // Quote cut inside the IP header, or no quote at all: counted, inner fields zero.
        let frame = from(251, &pkt::icmp(3, 4, mtu(900), &tcp_quote[..10]));
        e.ip(&frame, 38, icmp_key(251, 4))?;
        e.dir().icmp_frag_needed += 1;
        e.ptb(v4(251), 900, 0, (V4_ANY, 0, V4_ANY, 0));
        e.ip(
            &from(250, &pkt::icmp(3, 4, mtu(576), &[])),
            28,
            icmp_key(250, 4),
        )?;
        e.dir().icmp_frag_needed += 1;
        e.ptb(v4(250), 576, 0, (V4_ANY, 0, V4_ANY, 0));
        // Port unreachable (code 3) and host unreachable (code 1): nothing recorded.
        let frame = from(249, &pkt::icmp(3, 3, mtu(1400), &tcp_quote));
        e.ip(&frame, 56, icmp_key(249, 3))?;
        let frame = from(249, &pkt::icmp(3, 1, mtu(1400), &tcp_quote));
        e.ip(&frame, 56, icmp_key(249, 1))?;
        // A frag-needed whose ICMP header is cut: truncated, neither counted nor recorded.
        let frame = from(248, &pkt::icmp(3, 4, mtu(1400), &[]));
        e.ip(&frame[..14 + 20 + 6], 26, (pkt::ICMP, v4(248), 0, A, 0))?;
        e.dir().truncated += 1;
        e.check()?;
    }
    Ok(())
}

fn icmpv6_packet_too_big_records_too_big(dp: &Dataplane<'_>) -> Result<()> {
    let mut e = Expect::new(dp);
    let from = |r: u16, icmp: &[u8]| {
        let mut ip = Ipv6::new();
        ip.src = v6_octets(v6(r));
        ip.dst = v6_octets(A6);
        pkt::eth(pkt::ETH_IPV6, &ip.build(pkt::ICMPV6, icmp))
    };
    let key = |r: u16, ty: u8| (pkt::ICMPV6, v6(r), u16::from(ty) << 8, A6, 0);
    let mut q = Ipv6::new();
    q.payload_len = Some(1452);
    let udp_quote = q.build(pkt::UDP, &pkt::udp(5000, 6000, &[])[..8]);
    let tcp_quote = q.build(pkt::TCP, &Tcp::new(40000, 443, 1, pkt::ACK).build(&[])[..8]);
    let hbh_quote = q
        .clone()
        .exts(&[Ext::Hop(0)])
        .build(pkt::UDP, &pkt::udp(5000, 6000, &[]));
    let ptb = |r: u16, mtu: u32, quote: &[u8]| from(r, &pkt::icmp(2, 0, mtu.to_be_bytes(), quote));
    for kind in PROGRAMS {
        e.on(kind);
        e.ip(&ptb(0xfe, 1280, &udp_quote), 40 + 8 + 48, key(0xfe, 2))?;
        e.dir().icmp6_packet_too_big += 1;
        e.ptb(v6(0xfe), 1280, pkt::UDP, (A6, 5000, B6, 6000));
        // A 32-bit MTU above 65535 is kept whole.
        e.ip(&ptb(0xfd, 70_000, &tcp_quote), 96, key(0xfd, 2))?;
        e.dir().icmp6_packet_too_big += 1;
        e.ptb(v6(0xfd), 70_000, pkt::TCP, (A6, 40000, B6, 443));
        // Quoted extension headers are not walked: protocol = HBH (0), no ports.
        e.ip(&ptb(0xfc, 1400, &hbh_quote), 48 + 56, key(0xfc, 2))?;
        e.dir().icmp6_packet_too_big += 1;
        e.ptb(v6(0xfc), 1400, pkt::HOPOPTS, (A6, 0, B6, 0));
        // Quote cut inside the IPv6 header: counted, inner fields zero.
        e.ip(&ptb(0xfb, 1300, &udp_quote[..20]), 68, key(0xfb, 2))?;
        e.dir().icmp6_packet_too_big += 1;
        e.ptb(v6(0xfb), 1300, 0, (V6_ANY, 0, V6_ANY, 0));
        // Quote cut 3 bytes into the TCP header: addresses and protocol, no ports.
        e.ip(&ptb(0xfa, 1350, &tcp_quote[..43]), 91, key(0xfa, 2))?;
        e.dir().icmp6_packet_too_big += 1;
        e.ptb(v6(0xfa), 1350, pkt::TCP, (A6, 0, B6, 0));
        // Destination unreachable (type 1): nothing recorded.
        let frame = from(0xf9, &pkt::icmp(1, 0, [0; 4], &udp_quote));
        e.ip(&frame, 96, key(0xf9, 1))?;
        e.check()?;
    }
    Ok(())
}

/// ICMP (1) is interpreted only inside IPv4 and ICMPv6 (58) only inside IPv6; the other way
/// round they are unknown transport protocols: ports 0 (no type/code/identifier), no
/// too-big counter or entry, and a body shorter than 8 bytes is not truncated.
fn icmp_protocols_only_in_their_ip_version(dp: &Dataplane<'_>) -> Result<()> {
    let mut e = Expect::new(dp);
    let frag_needed = pkt::icmp(
        3,
        4,
        [0, 0, 5, 0x78],
        &Ipv4::new(pkt::TCP).build(&Tcp::new(40000, 443, 1, pkt::ACK).build(&[])[..8]),
    );
    let too_big = pkt::icmp(
        2,
        0,
        1280u32.to_be_bytes(),
        &Ipv6::new().build(pkt::UDP, &pkt::udp(5000, 6000, &[])[..8]),
    );
    let echo = |ty: u8| pkt::icmp(ty, 0, [0x12, 0x34, 0, 1], &pkt::data(8));
    let k6 = (pkt::ICMP, A6, 0, B6, 0);
    let k4 = (pkt::ICMPV6, A, 0, B, 0);
    for kind in PROGRAMS {
        e.on(kind);
        // IPv6 carrying ICMP: a frag-needed, an echo request, 4 bytes.
        e.ip(&pkt::v6(pkt::ICMP, &frag_needed), 40 + 36, k6)?;
        e.ip(&pkt::v6(pkt::ICMP, &echo(8)), 40 + 16, k6)?;
        e.ip(&pkt::v6(pkt::ICMP, &frag_needed[..4]), 40 + 4, k6)?;
        // IPv4 carrying ICMPv6: a packet too big, an echo request, 4 bytes.
        e.ip(&pkt::v4(pkt::ICMPV6, &too_big), 20 + 56, k4)?;
        e.ip(&pkt::v4(pkt::ICMPV6, &echo(128)), 20 + 16, k4)?;
        e.ip(&pkt::v4(pkt::ICMPV6, &too_big[..4]), 20 + 4, k4)?;
        e.check()?;
    }
    Ok(())
}

/// ICMP fragmentation needed and ICMPv6 packet too big.
#[test]
fn icmp_too_big_messages() -> Result<()> {
    lab_guard!();
    run_cases(
        Options::default(),
        &[
            (
                "icmp_frag_needed_records_too_big",
                ETHER_1500,
                icmp_frag_needed_records_too_big,
            ),
            (
                "icmpv6_packet_too_big_records_too_big",
                ETHER_1500,
                icmpv6_packet_too_big_records_too_big,
            ),
            (
                "icmp_protocols_only_in_their_ip_version",
                ETHER_1500,
                icmp_protocols_only_in_their_ip_version,
            ),
        ],
    )
}

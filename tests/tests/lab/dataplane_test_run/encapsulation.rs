//! Encapsulations: WireGuard messages by shape, VXLAN and GENEVE by port and header bits,
//! GRE and IP in IP by protocol number and what follows, and the tunnel ports a user names.

use std::mem::MaybeUninit;
use std::net::IpAddr;

use anyhow::{Context, Result};
use netdoctor::kernel::packet::LinkType;
use netdoctor::kernel::packet::{Dataplane, Options, TunnelPort};
use netdoctor::kernel::views::Encap;
use netdoctor_lab::lab_guard;
use netdoctor_lab::packet::builder::{self as pkt, Ext, Ipv4, Ipv6, Tcp};

use crate::dataplane_test_run::expect::Expect;
use crate::dataplane_test_run::harness::{
    pass_code, run_cases, test_run, with_dp, A, A6, B, B6, ETHER_1500, LO, PROGRAMS,
};

fn wireguard_messages_by_shape(dp: &Dataplane<'_>) -> Result<()> {
    let mut e = Expect::new(dp);
    let wg4 = |sport: u16, dport: u16, payload: &[u8]| {
        pkt::v4(pkt::UDP, &pkt::udp(sport, dport, payload))
    };
    let mut trailer = wg4(51821, 51820, &pkt::wg(4, 48));
    trailer.extend([0xee; 6]);
    let v6_response = pkt::v6(pkt::UDP, &pkt::udp(51820, 51820, &pkt::wg(2, 92)));
    let mut reserved = pkt::wg(1, 148);
    reserved[2] = 1;
    let mut reserved3 = pkt::wg(4, 32);
    reserved3[3] = 0x80;
    let negatives: Vec<Vec<u8>> = vec![
        pkt::wg(1, 149),
        pkt::wg(1, 147),
        pkt::wg(2, 148),
        pkt::wg(3, 92),
        pkt::wg(4, 40),
        pkt::wg(4, 16),
        pkt::wg(4, 31),
        reserved,
        reserved3,
        pkt::wg(0, 32),
        pkt::wg(5, 32),
        pkt::wg(4, 3),
    ];
    let mut ip = Ipv4::new(pkt::UDP);
    ip.frag_offset = 10;
    let later = pkt::eth(
        pkt::ETH_IPV4,
        &ip.build(&pkt::udp(51820, 51820, &pkt::wg(4, 32))),
    );
    for kind in PROGRAMS {
        e.on(kind);
        let key = (pkt::UDP, A, 51820, B, 51820);
        for (ty, len) in [
            (1u8, 148usize),
            (2, 92),
            (3, 64),
            (4, 32),
            (4, 48),
            (4, 1440),
        ] {
            e.ip(&wg4(51820, 51820, &pkt::wg(ty, len)), 28 + len as u32, key)?;
        }
        let f = e.flow(key);
        f.encap = Encap::Wireguard;
        f.wireguard.initiation += 1;
        f.wireguard.response += 1;
        f.wireguard.cookie += 1;
        f.wireguard.data += 3;
        // Any port.
        let key = (pkt::UDP, A, 443, B, 40000);
        e.ip(&wg4(443, 40000, &pkt::wg(1, 148)), 176, key)?;
        let f = e.flow(key);
        f.encap = Encap::Wireguard;
        f.wireguard.initiation += 1;
        // Trailing bytes after the datagram: the UDP length comes from the IP header.
        let f = e.ip(&trailer, 76, (pkt::UDP, A, 51821, B, 51820))?;
        f.encap = Encap::Wireguard;
        f.wireguard.data += 1;
        let f = e.ip(&v6_response, 140, (pkt::UDP, A6, 51820, B6, 51820))?;
        f.encap = Encap::Wireguard;
        f.wireguard.response += 1;
        // Not WireGuard: wrong lengths, nonzero reserved bytes, unknown types, < 4 bytes.
        for (i, p) in negatives.iter().enumerate() {
            let sport = 30000 + i as u16;
            e.ip(
                &wg4(sport, 51820, p),
                28 + p.len() as u32,
                (pkt::UDP, A, sport, B, 51820),
            )?;
        }
        // A WireGuard shape inside a later fragment is not looked at.
        e.ip(&later, 60, (pkt::UDP, A, 0, B, 0))?;
        e.dir().fragments_later += 1;
        e.check()?;
    }
    Ok(())
}

fn vxlan_and_geneve(dp: &Dataplane<'_>) -> Result<()> {
    let mut e = Expect::new(dp);
    let inner = pkt::v4(pkt::ICMP, &pkt::icmp(8, 0, [0, 1, 0, 1], &pkt::data(16)));
    let vxlan = |flags: u8| [&[flags, 0, 0, 0, 0, 0, 42, 0][..], &inner[..]].concat();
    let geneve = |first: u8| [&[first, 0, 0x65, 0x58, 0, 0, 42, 0][..], &inner[..]].concat();
    let cases: Vec<(u16, u16, Vec<u8>, Encap)> = vec![
        (50000, 4789, vxlan(0x08), Encap::Vxlan),
        (50001, 8472, vxlan(0x08), Encap::Vxlan),
        (50002, 4789, vxlan(0x00), Encap::None), // I flag clear
        (50003, 4789, vxlan(0x0c), Encap::None), // a reserved bit set
        (50004, 4789, vec![0x08, 0, 0, 0, 0, 0, 42], Encap::None), // 7 bytes
        (4789, 50005, vxlan(0x08), Encap::None), // only the destination port counts
        (50006, 6081, geneve(0x00), Encap::Geneve),
        (50007, 6081, geneve(0x3f), Encap::Geneve), // option length bits, version 0
        (50008, 6081, geneve(0x40), Encap::None),   // version 1
        (50009, 6081, vec![0; 7], Encap::None),
        // A WireGuard shape on the VXLAN port is not WireGuard.
        (50010, 4789, pkt::wg(4, 32), Encap::None),
    ];
    let v6 = pkt::v6(pkt::UDP, &pkt::udp(50011, 4789, &vxlan(0x08)));
    for kind in PROGRAMS {
        e.on(kind);
        for (sport, dport, payload, encap) in &cases {
            let frame = pkt::v4(pkt::UDP, &pkt::udp(*sport, *dport, payload));
            let key = (pkt::UDP, A, *sport, B, *dport);
            e.ip(&frame, 28 + payload.len() as u32, key)?.encap = *encap;
        }
        let key = (pkt::UDP, A6, 50011, B6, 4789);
        e.ip(&v6, 48 + 8 + inner.len() as u32, key)?.encap = Encap::Vxlan;
        e.check()?;
    }
    Ok(())
}

/// GRE (protocol 47, version 0), IPv4 inside (4) and IPv6 inside (41), over IPv4 and
/// IPv6 (ip6tnl's encapsulation limit is a destination options header before them).
fn ip_protocol_tunnels(dp: &Dataplane<'_>) -> Result<()> {
    const GRE: u8 = 47;
    const IPIP: u8 = 4;
    const IPV6: u8 = 41;
    let mut e = Expect::new(dp);
    let inner4 = Ipv4::new(pkt::ICMP).build(&pkt::icmp(8, 0, [0, 1, 0, 1], &pkt::data(16)));
    let inner6 = Ipv6::new().build(
        pkt::ICMPV6,
        &pkt::icmp(128, 0, [0, 1, 0, 1], &pkt::data(16)),
    );
    let gre = |head: &[u8], inner: &[u8]| [head, inner].concat();
    let v4_cases: Vec<(u8, Vec<u8>, Encap)> = vec![
        (GRE, gre(&[0, 0, 0x08, 0], &inner4), Encap::Gre),
        // key, checksum and sequence number present; GRETAP's Ethernet inside
        (
            GRE,
            gre(
                &[0xb0, 0, 0x65, 0x58, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 1],
                &inner4,
            ),
            Encap::Gre,
        ),
        (
            GRE,
            gre(&[0x30, 0x81, 0x88, 0x0b], &pkt::data(12)),
            Encap::None,
        ), // PPTP's version 1
        (GRE, vec![0, 0, 0x08], Encap::None), // 3 bytes
        (IPIP, inner4.clone(), Encap::Ipip),
        (IPIP, inner6.clone(), Encap::None), // protocol 4 with IPv6 inside
        (IPV6, inner6.clone(), Encap::Ip6In), // sit
        (IPV6, inner4.clone(), Encap::None),
        (pkt::NONXT, inner4.clone(), Encap::None),
    ];
    let v6_cases: Vec<(Ipv6, u8, Vec<u8>, Encap)> = vec![
        (Ipv6::new(), IPV6, inner6.clone(), Encap::Ip6In),
        // ip6tnl's tunnel encapsulation limit: an 8-byte destination options header.
        (
            Ipv6::new().exts(&[Ext::Dest(0)]),
            IPV6,
            inner6.clone(),
            Encap::Ip6In,
        ),
        (
            Ipv6::new().exts(&[Ext::Dest(0)]),
            IPIP,
            inner4.clone(),
            Encap::Ipip,
        ),
        (
            Ipv6::new(),
            GRE,
            gre(&[0, 0, 0x86, 0xdd], &inner6),
            Encap::Gre,
        ),
    ];
    // GRE in a later fragment: no header to look at.
    let mut later = Ipv4::new(GRE);
    later.frag_offset = 10;
    let later = pkt::eth(pkt::ETH_IPV4, &later.build(&gre(&[0, 0, 0x08, 0], &inner4)));
    // One source address per case, so that each case is a flow of its own.
    for kind in PROGRAMS {
        e.on(kind);
        for (i, (proto, payload, encap)) in v4_cases.iter().enumerate() {
            let mut ip = Ipv4::new(*proto);
            ip.src = [10, 0, 1, i as u8];
            let frame = pkt::eth(pkt::ETH_IPV4, &ip.build(payload));
            let key = (*proto, IpAddr::from(ip.src), 0, B, 0);
            e.ip(&frame, 20 + payload.len() as u32, key)?.encap = *encap;
        }
        for (i, (ip6, proto, payload, encap)) in v6_cases.iter().enumerate() {
            let mut ip6 = ip6.clone();
            ip6.src[15] = 0x10 + i as u8;
            let packet = ip6.build(*proto, payload);
            let frame = pkt::eth(pkt::ETH_IPV6, &packet);
            let key = (*proto, IpAddr::from(ip6.src), 0, B6, 0);
            e.ip(&frame, packet.len() as u32, key)?.encap = *encap;
        }
        e.ip(&later, 20 + 4 + inner4.len() as u32, (GRE, A, 0, B, 0))?;
        e.dir().fragments_later += 1;
        e.check()?;
    }
    Ok(())
}

#[test]
fn user_tunnel_ports() -> Result<()> {
    lab_guard!();
    let other = |port| TunnelPort {
        port,
        encap: Encap::Other,
    };
    let ports = vec![
        TunnelPort {
            port: 10000,
            encap: Encap::Fastd,
        },
        TunnelPort {
            port: 655,
            encap: Encap::Tinc,
        },
        other(1194),
        other(20001),
        other(20002),
        other(20003),
        other(20004),
        // Last slot; configured ports are checked before VXLAN.
        TunnelPort {
            port: 4789,
            encap: Encap::Tinc,
        },
    ];
    // A ninth port is refused at load.
    let mut storage = MaybeUninit::uninit();
    let mut nine = ports.clone();
    nine.push(other(1));
    let too_many = Dataplane::load(
        &mut storage,
        Options {
            tunnel_ports: nine,
            ..Default::default()
        },
    );
    assert!(too_many.is_err(), "nine tunnel ports must be refused");

    let options = Options {
        tunnel_ports: ports,
        ..Default::default()
    };
    with_dp(options, 1500, LinkType::Ether, |dp| {
        let mut e = Expect::new(dp);
        let vxlan = [&[0x08u8, 0, 0, 0, 0, 0, 1, 0][..], &pkt::data(20)].concat();
        let cases: Vec<(u16, u16, Vec<u8>, Encap)> = vec![
            (40000, 10000, pkt::data(50), Encap::Fastd),
            (10000, 40001, pkt::data(50), Encap::Fastd), // the source port matches too
            (40002, 655, pkt::data(50), Encap::Tinc),
            (40003, 1194, pkt::data(50), Encap::Other),
            (40004, 10001, pkt::data(50), Encap::None),
            (40005, 4789, vxlan, Encap::Tinc),
            // WireGuard-shaped on a configured port: the port wins, no WireGuard counts.
            (40006, 10000, pkt::wg(1, 148), Encap::Fastd),
        ];
        let tcp = pkt::v4(
            pkt::TCP,
            &Tcp::new(40007, 655, 1, pkt::ACK).build(&pkt::data(10)),
        );
        for kind in PROGRAMS {
            e.on(kind);
            for (sport, dport, payload, encap) in &cases {
                let frame = pkt::v4(pkt::UDP, &pkt::udp(*sport, *dport, payload));
                let key = (pkt::UDP, A, *sport, B, *dport);
                e.ip(&frame, 28 + payload.len() as u32, key)?.encap = *encap;
            }
            // TCP to a tunnel port is not classified.
            e.ip(&tcp, 50, (pkt::TCP, A, 40007, B, 655))?.tcp_flags = pkt::ACK;
            e.seen_again((pkt::TCP, A, 40007, B, 655));
            e.check()?;
        }
        Ok(())
    })
}

/// A port added while the data plane runs (a daemon the agent found) is recognised from then
/// on by every program on the inline path, whose interfaces' ND_PATH_USER_PORTS bit goes
/// with it, and stays so when the interface's header is written again (an MTU change).
#[test]
fn tunnel_port_added_while_running() -> Result<()> {
    use netdoctor::kernel::packet::ProgramKind;
    lab_guard!();
    let mut storage = MaybeUninit::uninit();
    let mut dp = Dataplane::load(&mut storage, Options::default())?;
    dp.watch(LO, 1500, LinkType::Ether)?;
    // Distinct source ports per program and phase, so that each is a flow of its own.
    let send = |dp: &Dataplane<'_>, kind: ProgramKind, sport: u16| -> Result<()> {
        let frame = pkt::v4(pkt::UDP, &pkt::udp(sport, 10000, &pkt::data(50)));
        let rc = test_run(dp, kind, &frame, None)?;
        anyhow::ensure!(rc == pass_code(kind), "{kind:?}: {rc}");
        Ok(())
    };
    let encap_of = |dp: &Dataplane<'_>, sport: u16| -> Result<Encap> {
        let flows = dp.flows()?;
        let f = flows
            .iter()
            .find(|f| f.src_port == sport && f.dst_port == 10000);
        f.map(|f| f.encap)
            .with_context(|| format!("no flow from port {sport}"))
    };
    for (i, kind) in PROGRAMS.into_iter().enumerate() {
        send(&dp, kind, 41000 + i as u16)?;
    }
    let added = TunnelPort {
        port: 10000,
        encap: Encap::Fastd,
    };
    assert!(dp.add_tunnel_port(added)?, "a new port is added");
    assert!(
        !dp.add_tunnel_port(added)?,
        "a known port is not added twice"
    );
    for (i, kind) in PROGRAMS.into_iter().enumerate() {
        send(&dp, kind, 42000 + i as u16)?;
    }
    dp.watch(LO, 1400, LinkType::Ether)?;
    for (i, kind) in PROGRAMS.into_iter().enumerate() {
        send(&dp, kind, 43000 + i as u16)?;
    }
    for (i, kind) in PROGRAMS.into_iter().enumerate() {
        let i = i as u16;
        assert_eq!(encap_of(&dp, 41000 + i)?, Encap::None, "{kind:?} before");
        assert_eq!(encap_of(&dp, 42000 + i)?, Encap::Fastd, "{kind:?} after");
        assert_eq!(
            encap_of(&dp, 43000 + i)?,
            Encap::Fastd,
            "{kind:?} watched again"
        );
    }
    Ok(())
}

/// WireGuard by shape, VXLAN and GENEVE by port and header bits, GRE and IP in IP by
/// protocol.
#[test]
fn encapsulations() -> Result<()> {
    lab_guard!();
    run_cases(
        Options::default(),
        &[
            (
                "wireguard_messages_by_shape",
                ETHER_1500,
                wireguard_messages_by_shape,
            ),
            ("vxlan_and_geneve", ETHER_1500, vxlan_and_geneve),
            ("ip_protocol_tunnels", ETHER_1500, ip_protocol_tunnels),
        ],
    )
}

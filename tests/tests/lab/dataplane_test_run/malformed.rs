//! Malformed packets: headers cut at every layer, bogus IHL, total and payload lengths, TCP
//! data offsets below 5 or past the frame, IPv6 extension header chains.

use anyhow::Result;
use netdoctor::kernel::packet::{Dataplane, Options};
use netdoctor_lab::lab_guard;
use netdoctor_lab::packet::builder::{self as pkt, Ext, Ipv4, Ipv6, Tcp};

use crate::dataplane_test_run::expect::Expect;
use crate::dataplane_test_run::harness::{is_tc, run_cases, A, A6, B, B6, ETHER_1500, PROGRAMS};

/// Headers cut before the transport layer: only `truncated` (no size bucket, no flow).
/// Untagged cuts inside the IP header are refused by skb test runs, so tc sees them tagged.
fn truncated_l2_l3_headers(dp: &Dataplane<'_>) -> Result<()> {
    let mut e = Expect::new(dp);
    let ip4 = Ipv4::new(pkt::UDP).build(&pkt::udp(1, 2, &pkt::data(20)));
    let ip6 = Ipv6::new().build(pkt::UDP, &pkt::udp(1, 2, &pkt::data(20)));
    let v4 = pkt::eth(pkt::ETH_IPV4, &ip4);
    let v6 = pkt::eth(pkt::ETH_IPV6, &ip6);
    let t4 = pkt::eth_tagged(&[pkt::VLAN_Q], pkt::ETH_IPV4, &ip4);
    let t6 = pkt::eth_tagged(&[pkt::VLAN_Q], pkt::ETH_IPV6, &ip6);
    for kind in PROGRAMS {
        e.on(kind);
        if !is_tc(kind) {
            e.truncated(&v4[..14])?; // EtherType IPv4, nothing after
            e.truncated(&v4[..14 + 19])?; // IPv4 header one byte short
            e.truncated(&v6[..14])?;
            e.truncated(&v6[..14 + 39])?; // IPv6 header one byte short
        }
        e.truncated(&t4[..18])?;
        e.truncated(&t4[..18 + 19])?;
        e.truncated(&t6[..18])?;
        e.truncated(&t6[..18 + 39])?;
        // Version field disagreeing with the EtherType.
        e.truncated(&pkt::eth(pkt::ETH_IPV4, &ip6))?;
        e.truncated(&pkt::eth(
            pkt::ETH_IPV6,
            &[&ip4[..], &[0u8; 40][..]].concat(),
        ))?;
        e.check()?;
    }
    Ok(())
}

/// Transport headers cut short: counted truncated, yet still an IP packet: a size bucket and
/// a flow record whose ports stay 0 (l4_parse returns before setting them).
fn truncated_l4_headers_still_create_flow(dp: &Dataplane<'_>) -> Result<()> {
    let mut e = Expect::new(dp);
    let tcp = pkt::v4(pkt::TCP, &Tcp::new(40000, 443, 1, pkt::SYN).build(&[]));
    let udp = pkt::v4(pkt::UDP, &pkt::udp(5000, 6000, &pkt::data(10)));
    let icmp = pkt::v4(pkt::ICMP, &pkt::icmp(3, 4, [0, 0, 5, 0], &[]));
    let tcp6 = pkt::v6(pkt::TCP, &Tcp::new(40000, 443, 1, pkt::SYN).build(&[]));
    let icmp6 = pkt::v6(pkt::ICMPV6, &pkt::icmp(2, 0, [0, 0, 5, 0], &[]));
    for kind in PROGRAMS {
        e.on(kind);
        e.ip(&tcp[..14 + 20 + 19], 39, (pkt::TCP, A, 0, B, 0))?;
        e.dir().truncated += 1;
        e.ip(&udp[..14 + 20 + 7], 27, (pkt::UDP, A, 0, B, 0))?;
        e.dir().truncated += 1;
        // A frag-needed cut inside the ICMP header is neither counted nor recorded.
        e.ip(&icmp[..14 + 20 + 7], 27, (pkt::ICMP, A, 0, B, 0))?;
        e.dir().truncated += 1;
        e.ip(&tcp6[..14 + 40 + 10], 50, (pkt::TCP, A6, 0, B6, 0))?;
        e.dir().truncated += 1;
        e.ip(&icmp6[..14 + 40 + 4], 44, (pkt::ICMPV6, A6, 0, B6, 0))?;
        e.dir().truncated += 1;
        e.check()?;
    }
    Ok(())
}

/// IHL < 5 and IHL beyond the frame are truncated; valid options shift the transport header.
fn ipv4_ihl_and_options(dp: &Dataplane<'_>) -> Result<()> {
    let mut e = Expect::new(dp);
    let l4 = pkt::udp(5000, 6000, &pkt::data(20));
    let with_ihl = |ihl: u8, payload: &[u8]| {
        let mut ip = Ipv4::new(pkt::UDP);
        ip.ihl = Some(ihl);
        pkt::eth(pkt::ETH_IPV4, &ip.build(payload))
    };
    let mut ip = Ipv4::new(pkt::UDP);
    ip.options = vec![0x94, 0x04, 0, 0]; // Router Alert: IHL 6
    let router_alert = pkt::eth(pkt::ETH_IPV4, &ip.build(&l4));
    let mut ip = Ipv4::new(pkt::TCP);
    ip.options = vec![1; 40]; // IHL 15
    let nops = pkt::eth(
        pkt::ETH_IPV4,
        &ip.build(
            &Tcp::new(7, 8, 9, pkt::SYN)
                .opts(&[2, 4, 5, 0xb4])
                .build(&[]),
        ),
    );
    for kind in PROGRAMS {
        e.on(kind);
        for ihl in [0u8, 1, 4] {
            e.truncated(&with_ihl(ihl, &l4))?;
        }
        // IHL 15 (60 bytes) with 40 bytes of IP packet in the frame.
        e.truncated(&with_ihl(15, &pkt::data(20)))?;
        e.ip(&router_alert, 24 + 28, (pkt::UDP, A, 5000, B, 6000))?;
        let f = e.ip(&nops, 60 + 24, (pkt::TCP, A, 7, B, 8))?;
        f.tcp_flags = pkt::SYN;
        f.syn_mss = Some(1460);
        e.check()?;
    }
    Ok(())
}

/// The effective IP length is min(total length, frame bytes from the IP header); a total
/// length of 0 (BIG TCP) means "use the frame". See also
/// `ip_length_field_below_header_length_uses_frame_length`.
fn ipv4_total_length_vs_frame_length(dp: &Dataplane<'_>) -> Result<()> {
    let mut e = Expect::new(dp);
    let mut ip = Ipv4::new(pkt::UDP);
    ip.tot_len = Some(1400);
    let claims_more = pkt::eth(
        pkt::ETH_IPV4,
        &ip.build(&pkt::udp(5000, 6000, &pkt::data(30))),
    );
    let mut padded = pkt::v4(pkt::UDP, &pkt::udp(5001, 6000, &[]));
    padded.resize(60, 0);
    let mut ip = Ipv4::new(pkt::UDP);
    ip.tot_len = Some(0);
    let zero = pkt::eth(
        pkt::ETH_IPV4,
        &ip.build(&pkt::udp(5002, 6000, &pkt::data(972))),
    );
    for kind in PROGRAMS {
        e.on(kind);
        // Claims 1400 bytes, frame carries 58: bucket and max_segment from the frame.
        e.ip(&claims_more, 58, (pkt::UDP, A, 5000, B, 6000))?;
        // Ethernet padding: a 28-byte datagram in a 60-byte frame -> 28; bytes stay 60.
        e.ip(&padded, 28, (pkt::UDP, A, 5001, B, 6000))?;
        // Total length 0: the frame decides (1000 bytes of IP, bucket 1).
        e.ip(&zero, 1000, (pkt::UDP, A, 5002, B, 6000))?;
        e.check()?;
    }
    Ok(())
}

/// IP length fields are used only if they cover at least the network header (IPv4: IHL * 4;
/// IPv6: 40 bytes plus the extension headers walked) and are below the frame; otherwise the
/// frame decides, as for a length of 0.
fn ip_length_field_below_header_length_uses_frame_length(dp: &Dataplane<'_>) -> Result<()> {
    let mut e = Expect::new(dp);
    let v4 = |sport: u16, tot_len: u16| {
        let mut ip = Ipv4::new(pkt::UDP);
        ip.tot_len = Some(tot_len);
        pkt::eth(
            pkt::ETH_IPV4,
            &ip.build(&pkt::udp(sport, 6000, &pkt::data(30))),
        )
    };
    // IPv6 with an 8-byte hop-by-hop header: 48 bytes of network header.
    let v6 = |sport: u16, payload_len: u16| {
        let mut ip = Ipv6::new().exts(&[Ext::Hop(0)]);
        ip.payload_len = Some(payload_len);
        pkt::eth(
            pkt::ETH_IPV6,
            &ip.build(pkt::UDP, &pkt::udp(sport, 6000, &pkt::data(10))),
        )
    };
    for kind in PROGRAMS {
        e.on(kind);
        // Total length 10 and 19, below the 20-byte header: the frame's 58 bytes.
        e.ip(&v4(5000, 10), 58, (pkt::UDP, A, 5000, B, 6000))?;
        e.ip(&v4(5001, 19), 58, (pkt::UDP, A, 5001, B, 6000))?;
        // Exactly the header: taken as is (max_segment 20).
        e.ip(&v4(5002, 20), 20, (pkt::UDP, A, 5002, B, 6000))?;
        // Payload length 7 (IP length 47 < 48): the frame's 66 bytes; 8 (48): taken.
        e.ip(&v6(5003, 7), 66, (pkt::UDP, A6, 5003, B6, 6000))?;
        e.ip(&v6(5004, 8), 48, (pkt::UDP, A6, 5004, B6, 6000))?;
        e.check()?;
    }
    Ok(())
}

/// IPv6 payload length 0 (BIG TCP GSO packets, jumbograms) means "use the frame", as IPv4
/// total length 0 does: size bucket and max_segment from the frame, and so is the TCP
/// payload, so retransmissions of such packets are seen.
fn ipv6_payload_length_zero_uses_frame_length(dp: &Dataplane<'_>) -> Result<()> {
    let mut e = Expect::new(dp);
    let zero = |sport: u16, seq: u32| {
        let mut ip = Ipv6::new();
        ip.payload_len = Some(0);
        let tcp = Tcp::new(sport, 443, seq, pkt::ACK).build(&pkt::data(1000));
        pkt::eth(pkt::ETH_IPV6, &ip.build(pkt::TCP, &tcp))
    };
    for kind in PROGRAMS {
        e.on(kind);
        // Fresh flows per program (XDP and tc ingress would share ingress records).
        let key = (pkt::TCP, A6, 40000 + kind as u16, B6, 443);
        for seq in [1000, 2000, 1000] {
            e.ip(&zero(key.2, seq), 1060, key)?;
        }
        let f = e.flow(key);
        f.tcp_flags = pkt::ACK;
        f.retransmits = 1;
        e.check()?;
    }
    Ok(())
}

/// A TCP data offset reaching past the end of the packet is a header shorter than it claims:
/// truncated. The fixed header is whole, though, so ports, flags and an MSS option that is
/// present are still recorded.
fn tcp_data_offset_past_frame_is_truncated_but_recorded(dp: &Dataplane<'_>) -> Result<()> {
    let mut e = Expect::new(dp);
    let mut ack = Tcp::new(40000, 443, 1, pkt::ACK);
    ack.doff = Some(15); // 60 bytes claimed, 20 present
    let ack = pkt::v4(pkt::TCP, &ack.build(&[]));
    let mut syn = Tcp::new(40001, 443, 1, pkt::SYN).opts(&[2, 4, 5, 0xb4]);
    syn.doff = Some(15); // 60 bytes claimed, 24 present
    let syn = pkt::v4(pkt::TCP, &syn.build(&[]));
    let mut syn6 = Tcp::new(40002, 443, 1, pkt::SYN).opts(&[2, 4, 5, 0x8c]);
    syn6.doff = Some(7); // 28 bytes claimed, 24 present
    let syn6 = pkt::v6(pkt::TCP, &syn6.build(&[]));
    for kind in PROGRAMS {
        e.on(kind);
        e.ip(&ack, 40, (pkt::TCP, A, 40000, B, 443))?.tcp_flags = pkt::ACK;
        e.dir().truncated += 1;
        let f = e.ip(&syn, 44, (pkt::TCP, A, 40001, B, 443))?;
        f.tcp_flags = pkt::SYN;
        f.syn_mss = Some(1460);
        e.dir().truncated += 1;
        let f = e.ip(&syn6, 64, (pkt::TCP, A6, 40002, B6, 443))?;
        f.tcp_flags = pkt::SYN;
        f.syn_mss = Some(1420);
        e.dir().truncated += 1;
        e.check()?;
    }
    Ok(())
}

/// TCP data offset below 5 is truncated (flow with ports 0 and no TCP facts).
fn tcp_data_offset_below_five(dp: &Dataplane<'_>) -> Result<()> {
    let mut e = Expect::new(dp);
    let frames: Vec<Vec<u8>> = [0u8, 1, 4]
        .iter()
        .map(|&doff| {
            let mut t = Tcp::new(40000, 443, 1, pkt::SYN).opts(&[2, 4, 5, 0xb4]);
            t.doff = Some(doff);
            pkt::v4(pkt::TCP, &t.build(&pkt::data(10)))
        })
        .collect();
    let ok = pkt::v4(
        pkt::TCP,
        &Tcp::new(40000, 443, 1, pkt::SYN)
            .opts(&[2, 4, 5, 0xb4])
            .build(&pkt::data(10)),
    );
    for kind in PROGRAMS {
        e.on(kind);
        for f in &frames {
            e.ip(f, 54, (pkt::TCP, A, 0, B, 0))?;
            e.dir().truncated += 1;
        }
        let f = e.ip(&ok, 54, (pkt::TCP, A, 40000, B, 443))?;
        f.tcp_flags = pkt::SYN;
        f.syn_mss = Some(1460);
        e.seen_again((pkt::TCP, A, 40000, B, 443));
        e.check()?;
    }
    Ok(())
}

/// IPv6 extension header chains: walked up to ND_MAX_EXTHDR (6) headers; a header cut short
/// is truncated; after six, the seventh header's type is left as the "protocol".
fn ipv6_extension_header_chains(dp: &Dataplane<'_>) -> Result<()> {
    let mut e = Expect::new(dp);
    let tcp = Tcp::new(40000, 443, 1, pkt::ACK).build(&pkt::data(10));
    let udp = pkt::udp(5000, 6000, &pkt::data(8));
    // HBH (8) + routing (24) + destination options (16), then TCP.
    let three = Ipv6::new().exts(&[Ext::Hop(0), Ext::Routing(2), Ext::Dest(1)]);
    let three = pkt::eth(pkt::ETH_IPV6, &three.build(pkt::TCP, &tcp));
    // Six headers (8+8+8+8+16+8 = 56 bytes), the most the parser walks, then UDP.
    let six_exts = [
        Ext::Hop(0),
        Ext::Dest(0),
        Ext::Routing(0),
        Ext::Frag {
            offset: 0,
            more: true,
        },
        Ext::Dest(1),
        Ext::Dest(0),
    ];
    let six = pkt::eth(
        pkt::ETH_IPV6,
        &Ipv6::new().exts(&six_exts).build(pkt::UDP, &udp),
    );
    let mut seven_exts = six_exts.to_vec();
    seven_exts.push(Ext::Dest(0));
    let seven = pkt::eth(
        pkt::ETH_IPV6,
        &Ipv6::new().exts(&seven_exts).build(pkt::UDP, &udp),
    );
    let no_next = pkt::eth(
        pkt::ETH_IPV6,
        &Ipv6::new().exts(&[Ext::Dest(0)]).build(pkt::NONXT, &[]),
    );
    // Destination options of 32 bytes after a HBH header, for cutting.
    let cut = Ipv6::new()
        .exts(&[Ext::Hop(0), Ext::Dest(3)])
        .build(pkt::TCP, &tcp);
    let mut long = Ipv6::new().exts(&[Ext::Routing(0)]).build(pkt::TCP, &tcp);
    long[41] = 255; // Hdr Ext Len 255 -> 2048 bytes
    let frag = Ipv6::new()
        .exts(&[Ext::Frag {
            offset: 0,
            more: true,
        }])
        .build(pkt::UDP, &udp);
    for kind in PROGRAMS {
        e.on(kind);
        e.ip(&three, 40 + 48 + 30, (pkt::TCP, A6, 40000, B6, 443))?
            .tcp_flags = pkt::ACK;
        e.seen_again((pkt::TCP, A6, 40000, B6, 443));
        e.ip(&six, 40 + 56 + 16, (pkt::UDP, A6, 5000, B6, 6000))?;
        e.dir().fragments_first += 1;
        // Seven: after six the walk stops with next header = destination options (60).
        e.ip(&seven, 40 + 64 + 16, (pkt::DSTOPTS, A6, 0, B6, 0))?;
        e.dir().fragments_first += 1;
        e.ip(&no_next, 48, (pkt::NONXT, A6, 0, B6, 0))?;
        // Cut 10 bytes into the 32-byte header; cut after its first byte.
        e.truncated(&pkt::eth(pkt::ETH_IPV6, &cut[..40 + 8 + 10]))?;
        e.truncated(&pkt::eth(pkt::ETH_IPV6, &cut[..40 + 8 + 1]))?;
        e.truncated(&pkt::eth(pkt::ETH_IPV6, &long))?;
        // Fragment header cut after 4 bytes.
        e.truncated(&pkt::eth(pkt::ETH_IPV6, &frag[..44]))?;
        e.check()?;
    }
    Ok(())
}

/// Malformed headers.
#[test]
fn malformed_headers() -> Result<()> {
    lab_guard!();
    run_cases(
        Options::default(),
        &[
            (
                "truncated_l2_l3_headers",
                ETHER_1500,
                truncated_l2_l3_headers,
            ),
            (
                "truncated_l4_headers_still_create_flow",
                ETHER_1500,
                truncated_l4_headers_still_create_flow,
            ),
            ("ipv4_ihl_and_options", ETHER_1500, ipv4_ihl_and_options),
            (
                "ipv4_total_length_vs_frame_length",
                ETHER_1500,
                ipv4_total_length_vs_frame_length,
            ),
            (
                "ip_length_field_below_header_length_uses_frame_length",
                ETHER_1500,
                ip_length_field_below_header_length_uses_frame_length,
            ),
            (
                "ipv6_payload_length_zero_uses_frame_length",
                ETHER_1500,
                ipv6_payload_length_zero_uses_frame_length,
            ),
            (
                "tcp_data_offset_below_five",
                ETHER_1500,
                tcp_data_offset_below_five,
            ),
            (
                "tcp_data_offset_past_frame_is_truncated_but_recorded",
                ETHER_1500,
                tcp_data_offset_past_frame_is_truncated_but_recorded,
            ),
            (
                "ipv6_extension_header_chains",
                ETHER_1500,
                ipv6_extension_header_chains,
            ),
        ],
    )
}

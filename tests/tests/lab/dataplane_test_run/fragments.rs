//! IPv4 and IPv6 fragments: first and later fragments counted apart, a later fragment ending
//! the extension header walk, the atomic fragment that is no fragment.

use anyhow::Result;
use netdoctor::kernel::packet::{Dataplane, Options};
use netdoctor_lab::lab_guard;
use netdoctor_lab::packet::builder::{self as pkt, Ext, Ipv4, Ipv6, Tcp};

use crate::dataplane_test_run::expect::Expect;
use crate::dataplane_test_run::harness::{run_cases, A, A6, B, B6, ETHER_1500, PROGRAMS};

/// IPv4 fragments: offset 0 + MF is a first fragment (ports parsed), any nonzero offset is a
/// later fragment (no transport header: ports 0, no TCP/UDP facts).
fn ipv4_fragments_first_and_later(dp: &Dataplane<'_>) -> Result<()> {
    let mut e = Expect::new(dp);
    let mut ip = Ipv4::new(pkt::UDP);
    ip.mf = true;
    let first = pkt::eth(
        pkt::ETH_IPV4,
        &ip.build(&pkt::udp(5000, 6000, &pkt::data(1472))),
    );
    // Middle fragment (offset 185, MF) and last fragment (offset 370, no MF).
    let later: Vec<Vec<u8>> = [(185u16, true), (370, false)]
        .iter()
        .map(|&(offset, mf)| {
            let mut ip = Ipv4::new(pkt::UDP);
            ip.mf = mf;
            ip.frag_offset = offset;
            pkt::eth(pkt::ETH_IPV4, &ip.build(&pkt::data(200)))
        })
        .collect();
    let mut ip = Ipv4::new(pkt::TCP);
    ip.frag_offset = 1;
    let tcp_later = pkt::eth(
        pkt::ETH_IPV4,
        &ip.build(
            &Tcp::new(1, 2, 3, pkt::SYN)
                .opts(&[2, 4, 5, 0xb4])
                .build(&[]),
        ),
    );
    let mut ip = Ipv4::new(pkt::UDP);
    ip.df = true;
    let df_only = pkt::eth(pkt::ETH_IPV4, &ip.build(&pkt::udp(5001, 6000, &[])));
    for kind in PROGRAMS {
        e.on(kind);
        e.ip(&first, 1500, (pkt::UDP, A, 5000, B, 6000))?;
        e.dir().fragments_first += 1;
        for f in &later {
            e.ip(f, 220, (pkt::UDP, A, 0, B, 0))?;
            e.dir().fragments_later += 1;
        }
        // A later fragment with TCP-looking bytes: no flags, no MSS.
        e.ip(&tcp_later, 44, (pkt::TCP, A, 0, B, 0))?;
        e.dir().fragments_later += 1;
        // DF alone is not a fragment.
        e.ip(&df_only, 28, (pkt::UDP, A, 5001, B, 6000))?;
        e.check()?;
    }
    Ok(())
}

/// IPv6 fragment header: offset 0 with M set is a first fragment, offset > 0 a later one.
fn ipv6_fragment_header_first_and_later(dp: &Dataplane<'_>) -> Result<()> {
    let mut e = Expect::new(dp);
    let udp = pkt::udp(5000, 6000, &pkt::data(100));
    let first = Ipv6::new().exts(&[Ext::Frag {
        offset: 0,
        more: true,
    }]);
    let first = pkt::eth(pkt::ETH_IPV6, &first.build(pkt::UDP, &udp));
    let later = Ipv6::new().exts(&[Ext::Frag {
        offset: 185,
        more: false,
    }]);
    let later = pkt::eth(pkt::ETH_IPV6, &later.build(pkt::UDP, &pkt::data(100)));
    let middle = Ipv6::new().exts(&[
        Ext::Hop(0),
        Ext::Frag {
            offset: 1,
            more: true,
        },
    ]);
    let middle = pkt::eth(pkt::ETH_IPV6, &middle.build(pkt::TCP, &pkt::data(24)));
    let hbh_first = Ipv6::new().exts(&[
        Ext::Hop(0),
        Ext::Frag {
            offset: 0,
            more: true,
        },
    ]);
    let hbh_first = pkt::eth(
        pkt::ETH_IPV6,
        &hbh_first.build(
            pkt::TCP,
            &Tcp::new(40000, 443, 1, pkt::ACK).build(&pkt::data(8)),
        ),
    );
    for kind in PROGRAMS {
        e.on(kind);
        e.ip(&first, 156, (pkt::UDP, A6, 5000, B6, 6000))?;
        e.dir().fragments_first += 1;
        e.ip(&later, 148, (pkt::UDP, A6, 0, B6, 0))?;
        e.dir().fragments_later += 1;
        e.ip(&middle, 80, (pkt::TCP, A6, 0, B6, 0))?;
        e.dir().fragments_later += 1;
        // Hop-by-hop before a first fragment of TCP: ports and flags parsed.
        e.ip(&hbh_first, 84, (pkt::TCP, A6, 40000, B6, 443))?
            .tcp_flags = pkt::ACK;
        e.seen_again((pkt::TCP, A6, 40000, B6, 443));
        e.dir().fragments_first += 1;
        e.check()?;
    }
    Ok(())
}

/// A later fragment's fragment header ends the extension-header walk. RFC 8200 makes the Next
/// Header of every fragment the first header of the fragmentable part, e.g. destination
/// options (60), but in a later fragment what follows is payload: it is not read as headers,
/// whatever it looks like, and the flow's protocol is that Next Header.
fn ipv6_later_fragment_stops_extension_header_walk(dp: &Dataplane<'_>) -> Result<()> {
    let mut e = Expect::new(dp);
    let later = Ipv6::new().exts(&[Ext::Frag {
        offset: 185,
        more: false,
    }]);
    // Payload bytes that read as a header length of 255 (2048 bytes) ...
    let mut payload = pkt::data(200);
    payload[1] = 0xff;
    let a = pkt::eth(pkt::ETH_IPV6, &later.build(pkt::DSTOPTS, &payload));
    // ... or as an 8-byte header followed by "TCP".
    payload[0] = pkt::TCP;
    payload[1] = 0;
    let b = pkt::eth(pkt::ETH_IPV6, &later.build(pkt::DSTOPTS, &payload));
    for kind in PROGRAMS {
        e.on(kind);
        for frame in [&a, &b] {
            e.ip(frame, 248, (pkt::DSTOPTS, A6, 0, B6, 0))?;
            e.dir().fragments_later += 1;
        }
        e.check()?;
    }
    Ok(())
}

/// A fragment header with offset 0 and M = 0 (an atomic fragment, RFC 6946) is no fragment,
/// as IPv4 offset 0 without MF is none: no fragment counter, and the walk goes on to the
/// transport header.
fn ipv6_atomic_fragment_is_not_a_fragment(dp: &Dataplane<'_>) -> Result<()> {
    let mut e = Expect::new(dp);
    let atomic = Ext::Frag {
        offset: 0,
        more: false,
    };
    let udp = pkt::eth(
        pkt::ETH_IPV6,
        &Ipv6::new()
            .exts(&[atomic])
            .build(pkt::UDP, &pkt::udp(5000, 6000, &pkt::data(10))),
    );
    // Hop-by-hop, atomic fragment, destination options, then TCP.
    let tcp = pkt::eth(
        pkt::ETH_IPV6,
        &Ipv6::new()
            .exts(&[Ext::Hop(0), atomic, Ext::Dest(0)])
            .build(
                pkt::TCP,
                &Tcp::new(40000, 443, 1, pkt::ACK).build(&pkt::data(8)),
            ),
    );
    for kind in PROGRAMS {
        e.on(kind);
        e.ip(&udp, 66, (pkt::UDP, A6, 5000, B6, 6000))?;
        e.ip(&tcp, 92, (pkt::TCP, A6, 40000, B6, 443))?.tcp_flags = pkt::ACK;
        e.seen_again((pkt::TCP, A6, 40000, B6, 443));
        e.check()?;
    }
    Ok(())
}

/// IPv4 and IPv6 fragments.
#[test]
fn fragments_first_and_later() -> Result<()> {
    lab_guard!();
    run_cases(
        Options::default(),
        &[
            (
                "ipv4_fragments_first_and_later",
                ETHER_1500,
                ipv4_fragments_first_and_later,
            ),
            (
                "ipv6_fragment_header_first_and_later",
                ETHER_1500,
                ipv6_fragment_header_first_and_later,
            ),
            (
                "ipv6_later_fragment_stops_extension_header_walk",
                ETHER_1500,
                ipv6_later_fragment_stops_extension_header_walk,
            ),
            (
                "ipv6_atomic_fragment_is_not_a_fragment",
                ETHER_1500,
                ipv6_atomic_fragment_is_not_a_fragment,
            ),
        ],
    )
}

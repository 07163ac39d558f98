//! TCP (SYN MSS, flags, largest segment, passive retransmission detection), the size
//! histogram's bucket boundaries, DF packets over the MTU, and GSO super-packets (tc only:
//! the `__sk_buff` context carries gso_segs / gso_size into the test run).

use anyhow::Result;
use netdoctor::kernel::packet::counters::SIZE_BUCKET_BOUNDS;
use netdoctor::kernel::packet::LinkType;
use netdoctor::kernel::packet::{Dataplane, Options};
use netdoctor_lab::bpf::test_run::skb_ctx;
use netdoctor_lab::lab_guard;
use netdoctor_lab::packet::builder::{self as pkt, Ipv4, Tcp};

use crate::dataplane_test_run::expect::Expect;
use crate::dataplane_test_run::harness::{
    bucket, is_tc, run_cases, run_ctx, A, A6, B, B6, BUCKETS, ETHER_1500, LO, PROGRAMS, TC_PROGRAMS,
};

fn tcp_syn_mss_extraction(dp: &Dataplane<'_>) -> Result<()> {
    let mut e = Expect::new(dp);
    let ts = [8, 10, 1, 2, 3, 4, 0, 0, 0, 0];
    let mut nops_then_mss = vec![1u8; 12];
    nops_then_mss.extend([2, 4, 5, 0xb4]);
    let cases: Vec<(u8, Vec<u8>, Option<u16>)> = vec![
        (pkt::SYN, vec![2, 4, 0x05, 0xb4], Some(1460)),
        (pkt::SYN, vec![1, 1, 2, 4, 0x05, 0x78], Some(1400)),
        (
            pkt::SYN,
            [&ts[..], &[1, 1, 2, 4, 0x04, 0xd8]].concat(),
            Some(1240),
        ),
        // Window scale (3 bytes), SACK permitted (2 bytes), then MSS.
        (pkt::SYN, vec![3, 3, 7, 4, 2, 2, 4, 0x05, 0x64], Some(1380)),
        (pkt::SYN | pkt::ACK, vec![2, 4, 0x05, 0x50], Some(1360)),
        // No MSS option / no options at all.
        (pkt::SYN, vec![4, 2, 1, 1], None),
        (pkt::SYN, vec![], None),
        // Not a SYN: the option is ignored.
        (pkt::ACK, vec![2, 4, 0x05, 0xb4], None),
        // End-of-list before the MSS.
        (pkt::SYN, vec![0, 0, 0, 0, 2, 4, 0x05, 0xb4], None),
        // An option of length 0 stops the walk.
        (pkt::SYN, vec![8, 0, 2, 4, 0x05, 0xb4], None),
        // Past the walk limit (10 steps): 12 NOPs first.
        (pkt::SYN, nops_then_mss, None),
    ];
    let frames: Vec<Vec<u8>> = cases
        .iter()
        .enumerate()
        .map(|(i, (flags, opts, _))| {
            pkt::v4(
                pkt::TCP,
                &Tcp::new(41000 + i as u16, 443, 1, *flags)
                    .opts(opts)
                    .build(&[]),
            )
        })
        .collect();
    // MSS option cut by the end of the frame (data offset claims 24 bytes, 22 present):
    // truncated, flags recorded, no MSS.
    let cut = pkt::v4(
        pkt::TCP,
        &Tcp::new(42000, 443, 1, pkt::SYN)
            .opts(&[2, 4, 5, 0xb4])
            .build(&[]),
    );
    let cut = &cut[..cut.len() - 2];
    // The last SYN with an MSS wins; a SYN without one leaves it.
    let repeated: Vec<Vec<u8>> = [&[2u8, 4, 5, 0xb4][..], &[2, 4, 5, 0x78], &[1, 1, 1, 1]]
        .iter()
        .map(|opts| {
            pkt::v4(
                pkt::TCP,
                &Tcp::new(42001, 443, 1, pkt::SYN).opts(opts).build(&[]),
            )
        })
        .collect();
    let v6_syn = pkt::v6(
        pkt::TCP,
        &Tcp::new(42002, 443, 1, pkt::SYN)
            .opts(&[2, 4, 0x05, 0x8c])
            .build(&[]),
    );
    for kind in PROGRAMS {
        e.on(kind);
        for (i, ((flags, _, mss), frame)) in cases.iter().zip(&frames).enumerate() {
            let ip_len = (frame.len() - 14) as u32;
            let f = e.ip(frame, ip_len, (pkt::TCP, A, 41000 + i as u16, B, 443))?;
            f.tcp_flags = *flags;
            f.syn_mss = *mss;
        }
        e.ip(cut, 42, (pkt::TCP, A, 42000, B, 443))?.tcp_flags = pkt::SYN;
        e.dir().truncated += 1;
        for frame in &repeated {
            e.ip(frame, 44, (pkt::TCP, A, 42001, B, 443))?;
        }
        let f = e.flow((pkt::TCP, A, 42001, B, 443));
        f.tcp_flags = pkt::SYN;
        f.syn_mss = Some(1400);
        let f = e.ip(&v6_syn, 64, (pkt::TCP, A6, 42002, B6, 443))?;
        f.tcp_flags = pkt::SYN;
        f.syn_mss = Some(1420);
        e.check()?;
    }
    Ok(())
}

fn tcp_flags_max_segment_and_passive_retransmits(dp: &Dataplane<'_>) -> Result<()> {
    let mut e = Expect::new(dp);
    let seg = |sport: u16, seq: u32, flags: u8, len: usize| {
        pkt::v4(
            pkt::TCP,
            &Tcp::new(sport, 80, seq, flags).build(&pkt::data(len)),
        )
    };
    for kind in PROGRAMS {
        e.on(kind);
        // Fresh flows per program (XDP and tc ingress would share ingress records).
        let base = 40000 + kind as u16 * 10;
        // The brief's sequence, plus a SYN, a bigger segment, pure ACKs and a FIN.
        let key = (pkt::TCP, A, base, B, 80);
        let syn = Tcp::new(base, 80, 999, pkt::SYN).opts(&[2, 4, 5, 0xb4]);
        e.ip(&pkt::v4(pkt::TCP, &syn.build(&[])), 44, key)?;
        e.ip(&seg(base, 1000, pkt::ACK, 100), 140, key)?;
        e.ip(&seg(base, 1100, pkt::ACK | pkt::PSH, 100), 140, key)?;
        e.ip(&seg(base, 1000, pkt::ACK, 100), 140, key)?; // retransmission
        e.ip(&seg(base, 1200, pkt::ACK, 300), 340, key)?;
        e.ip(&seg(base, 1500, pkt::ACK, 0), 40, key)?; // no data: never counted
        e.ip(&seg(base, 1400, pkt::ACK, 0), 40, key)?; // old seq, no data
        e.ip(&seg(base, 1500, pkt::FIN | pkt::ACK, 0), 40, key)?;
        let f = e.flow(key);
        f.tcp_flags = pkt::SYN | pkt::ACK | pkt::PSH | pkt::FIN;
        f.syn_mss = Some(1460);
        assert_eq!(f.max_segment, 340);
        f.retransmits = 1;

        // In order across the 32-bit wrap: never counted.
        let key = (pkt::TCP, A, base + 1, B, 80);
        for i in 0..10u32 {
            let s = seg(key.2, 0xffff_fe00u32.wrapping_add(i * 100), pkt::ACK, 100);
            e.ip(&s, 140, key)?;
        }
        e.flow(key).tcp_flags = pkt::ACK;

        // Reordering counts like a retransmission; so does a duplicate.
        let key = (pkt::TCP, A, base + 2, B, 80);
        for seq in [1000u32, 1200, 1100, 1200] {
            e.ip(&seg(key.2, seq, pkt::ACK, 100), 140, key)?;
        }
        let f = e.flow(key);
        f.tcp_flags = pkt::ACK;
        f.retransmits = 2;

        // IPv6: same rule.
        let key = (pkt::TCP, A6, base + 3, B6, 80);
        for seq in [1000u32, 1100, 1000] {
            let frame = pkt::v6(
                pkt::TCP,
                &Tcp::new(key.2, 80, seq, pkt::ACK).build(&pkt::data(100)),
            );
            e.ip(&frame, 160, key)?;
        }
        let f = e.flow(key);
        f.tcp_flags = pkt::ACK;
        f.retransmits = 1;
        e.check()?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Size histogram and DF over MTU
// ---------------------------------------------------------------------------------------------

fn udp4_of_ip_len(sport: u16, ip_len: usize) -> Vec<u8> {
    pkt::v4(pkt::UDP, &pkt::udp(sport, 7000, &vec![0u8; ip_len - 28]))
}

/// IP lengths at and one above every bucket bound land in adjacent buckets. XDP (multi-buffer
/// test runs) also covers 9000/9001 and a 66000-byte frame with total length 0, whose flow
/// max_segment saturates at 65535; skb test runs are limited to about one page.
fn size_histogram_bucket_boundaries(dp: &Dataplane<'_>) -> Result<()> {
    let mut e = Expect::new(dp);
    let mut ip = Ipv4::new(pkt::UDP);
    ip.tot_len = Some(0);
    let huge = pkt::eth(
        pkt::ETH_IPV4,
        &ip.build(&pkt::udp(1, 7000, &vec![0u8; 66_000 - 28])),
    );
    for kind in PROGRAMS {
        e.on(kind);
        let before = e.dir().size_buckets.clone();
        let mut want = vec![0u64; BUCKETS];
        for (i, &b) in SIZE_BUCKET_BOUNDS.iter().enumerate() {
            if b > 1500 && is_tc(kind) {
                continue;
            }
            for (len, idx) in [(b, i), (b + 1, i + 1)] {
                let sport = len as u16;
                e.ip(
                    &udp4_of_ip_len(sport, len as usize),
                    len,
                    (pkt::UDP, A, sport, B, 7000),
                )?;
                want[idx] += 1;
            }
        }
        // Smallest UDP datagram; the ends of size_bucket()'s table (1291-1500), whose
        // neighbours 1290 and 1501 take the sum of comparisons.
        e.ip(&udp4_of_ip_len(28, 28), 28, (pkt::UDP, A, 28, B, 7000))?;
        want[0] += 1;
        for len in [1290u32, 1291, 1299, 1300, 1499] {
            let sport = 20_000 + len as u16;
            e.ip(
                &udp4_of_ip_len(sport, len as usize),
                len,
                (pkt::UDP, A, sport, B, 7000),
            )?;
            want[bucket(len)] += 1;
        }
        // An IPv6 pair around 1420.
        for (len, idx) in [(1420usize, 3usize), (1421, 4)] {
            let frame = pkt::v6(pkt::UDP, &pkt::udp(len as u16, 7000, &vec![0u8; len - 48]));
            e.ip(&frame, len as u32, (pkt::UDP, A6, len as u16, B6, 7000))?;
            want[idx] += 1;
        }
        if !is_tc(kind) {
            e.ip(&huge, 66_000, (pkt::UDP, A, 1, B, 7000))?;
            want[9] += 1;
            assert_eq!(e.flow((pkt::UDP, A, 1, B, 7000)).max_segment, 0xffff);
        }
        let added: Vec<u64> = e
            .dir()
            .size_buckets
            .iter()
            .zip(&before)
            .map(|(a, b)| a - b)
            .collect();
        assert_eq!(added, want, "expectation bookkeeping");
        e.check()?;
    }
    Ok(())
}

/// df_over_mtu counts DF IPv4 and all IPv6 segments whose IP length exceeds the MTU set by
/// `watch`; re-watching with a larger MTU keeps the counters and stops the counting.
fn df_over_mtu_ipv4_df_and_ipv6(dp: &Dataplane<'_>) -> Result<()> {
    let mut e = Expect::new(dp);
    let v4 = |df: bool, len: usize| {
        let mut ip = Ipv4::new(pkt::UDP);
        ip.df = df;
        pkt::eth(
            pkt::ETH_IPV4,
            &ip.build(&pkt::udp(5000, 6000, &vec![0u8; len - 28])),
        )
    };
    let v6 = |len: usize| pkt::v6(pkt::UDP, &pkt::udp(5000, 6000, &vec![0u8; len - 48]));
    let k4 = (pkt::UDP, A, 5000, B, 6000);
    let k6 = (pkt::UDP, A6, 5000, B6, 6000);
    for kind in PROGRAMS {
        e.on(kind);
        dp.watch(LO, 1400, LinkType::Ether)?;
        e.ip(&v4(true, 1400), 1400, k4)?;
        e.ip(&v4(true, 1401), 1401, k4)?;
        e.dir().df_over_mtu += 1;
        e.ip(&v4(false, 1401), 1401, k4)?;
        e.ip(&v4(false, 1500), 1500, k4)?;
        e.ip(&v4(true, 1500), 1500, k4)?;
        e.dir().df_over_mtu += 1;
        e.ip(&v6(1400), 1400, k6)?;
        e.ip(&v6(1401), 1401, k6)?;
        e.dir().df_over_mtu += 1;
        e.check()?;
        dp.watch(LO, 1500, LinkType::Ether)?;
        e.ip(&v4(true, 1401), 1401, k4)?;
        e.ip(&v6(1500), 1500, k6)?;
        e.check()?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// GSO (tc only: the __sk_buff context carries gso_segs / gso_size into the test run)
// ---------------------------------------------------------------------------------------------

/// A GSO super-packet counts once in `packets` and gso_segs times in segments, size buckets,
/// df_over_mtu and retransmits; its segment size is headers + gso_size. With total length 0
/// (BIG TCP) the payload comes from the frame, so retransmissions are still seen.
fn gso_super_packets_from_skb_context(dp: &Dataplane<'_>) -> Result<()> {
    let mut e = Expect::new(dp);
    let seg = |tot_len: Option<u16>| {
        let mut ip = Ipv4::new(pkt::TCP);
        ip.df = true;
        ip.tot_len = tot_len;
        let tcp = Tcp::new(40000, 443, 5000, pkt::ACK).build(&pkt::data(3000));
        pkt::eth(pkt::ETH_IPV4, &ip.build(&tcp))
    };
    let (normal, big_tcp) = (seg(None), seg(Some(0)));
    let key = (pkt::TCP, A, 40000, B, 443);
    for kind in TC_PROGRAMS {
        e.on(kind);
        for frame in [&normal, &big_tcp] {
            run_ctx(dp, kind, frame, Some(&skb_ctx(3, 1000)))?;
            let d = e.dir();
            d.packets += 1;
            d.segments += 3;
            d.gso_packets += 1;
            d.bytes += frame.len() as u64;
            d.size_buckets[bucket(20 + 20 + 1000)] += 3;
            d.df_over_mtu += 3; // 1040 > 1000
            let f = e.flow(key);
            f.packets += 1;
            f.segments += 3;
            f.bytes += frame.len() as u64;
            f.max_segment = 1040;
            f.tcp_flags = pkt::ACK;
        }
        // The second super-packet resent seq 5000: three retransmitted segments.
        e.flow(key).retransmits = 3;
        e.check()?;
    }
    Ok(())
}

/// SYN MSS, TCP flags, max segment, passive retransmission detection.
#[test]
fn tcp_mss_flags_and_retransmits() -> Result<()> {
    lab_guard!();
    run_cases(
        Options::default(),
        &[
            ("tcp_syn_mss_extraction", ETHER_1500, tcp_syn_mss_extraction),
            (
                "tcp_flags_max_segment_and_passive_retransmits",
                ETHER_1500,
                tcp_flags_max_segment_and_passive_retransmits,
            ),
        ],
    )
}

/// Size histogram boundaries, DF over MTU, GSO segment accounting.
#[test]
fn sizes_mtu_and_gso() -> Result<()> {
    lab_guard!();
    run_cases(
        Options::default(),
        &[
            (
                "size_histogram_bucket_boundaries",
                ETHER_1500,
                size_histogram_bucket_boundaries,
            ),
            (
                "df_over_mtu_ipv4_df_and_ipv6",
                Some((1400, LinkType::Ether)),
                df_over_mtu_ipv4_df_and_ipv6,
            ),
            (
                "gso_super_packets_from_skb_context",
                Some((1000, LinkType::Ether)),
                gso_super_packets_from_skb_context,
            ),
        ],
    )
}

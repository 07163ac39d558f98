//! Which ifindex and direction each hook reports, interfaces nobody watches, counter slots
//! shared by remainder, inputs the kernel refuses, and the verdict of every program on every
//! crafted input (each passes every packet).

use std::io::ErrorKind;

use anyhow::{ensure, Context, Result};
use netdoctor::kernel::packet::LinkType;
use netdoctor::kernel::packet::{Dataplane, Options, ProgramKind};
use netdoctor_lab::bpf::test_run::XDP_PASS;
use netdoctor_lab::packet::builder::{self as pkt, Ext, Ipv4, Ipv6, Tcp};
use netdoctor_lab::{ci, lab_guard};

use crate::dataplane_test_run::expect::Expect;
use crate::dataplane_test_run::harness::{
    counters, direction, is_tc, kernel_rejects, pass_code, pin, run, run_cases, test_run, two_cpus,
    unpin, zero_dir, A, B, ETHER_1500, LO, PROGRAMS, UNWATCHED_PROBE_IFINDEX,
};

/// Test runs report the loopback (ifindex 1) in every hook: watching ifindex 1 moves its
/// counters, in the program's direction only; another watched ifindex stays untouched.
fn hooks_count_loopback_ifindex_in_their_direction(dp: &Dataplane<'_>) -> Result<()> {
    if let Ok(idx) = std::fs::read_to_string("/sys/class/net/lo/ifindex") {
        assert_eq!(idx.trim(), "1", "loopback of this namespace");
    }
    dp.watch(UNWATCHED_PROBE_IFINDEX, 1500, LinkType::Ether)?;
    let mut e = Expect::new(dp);
    udp_through_every_program(&mut e, || {
        let untouched = dp
            .counters(UNWATCHED_PROBE_IFINDEX)?
            .context("second interface watched")?;
        assert_eq!(untouched.ingress, zero_dir());
        assert_eq!(untouched.egress, zero_dir());
        Ok(())
    })?;
    let c = counters(dp)?;
    assert_eq!((c.ingress.packets, c.egress.packets), (2, 1));
    // No interface has index 0; the flow cache takes a key with ifindex 0 for an empty slot.
    assert!(matches!(
        dp.watch(0, 1500, LinkType::Ether),
        Err(netdoctor::kernel::Error::NoInterfaceIndex)
    ));
    Ok(())
}

/// Packets on an interface without an `iface_stats` entry are passed and ignored entirely.
fn unwatched_interfaces_are_not_counted(dp: &Dataplane<'_>) -> Result<()> {
    let quote = Ipv4::new(pkt::TCP).build(&Tcp::new(1, 2, 3, 0).build(&[])[..8]);
    let frames = [
        pkt::v4(
            pkt::TCP,
            &Tcp::new(40000, 443, 1, pkt::SYN)
                .opts(&[2, 4, 5, 0xb4])
                .build(&[]),
        ),
        pkt::eth(pkt::ETH_ARP, &[0; 28]),
        pkt::v4(pkt::ICMP, &pkt::icmp(3, 4, [0, 0, 5, 0], &quote)),
    ];
    for kind in PROGRAMS {
        for frame in &frames {
            run(dp, kind, frame)?;
        }
    }
    assert_eq!(dp.counters(LO)?, None);
    assert!(dp.flows()?.is_empty());
    assert!(dp.too_big()?.is_empty());
    Ok(())
}

/// An interface finds its counters in slot ifindex % 256 unless another watched interface
/// took that slot first; then through `iface_slot` (ifindex below 65536) or `iface_slot_big`.
/// Either way each interface counts only its own packets, and an interface keeps its slot
/// and counters when the others go.
fn slot_taken_by_same_remainder_falls_back(dp: &Dataplane<'_>) -> Result<()> {
    let same_remainder = [LO + 256, LO + 65536];
    for index in same_remainder {
        dp.watch(index, 1500, LinkType::Ether)?;
    }
    dp.watch(LO, 1500, LinkType::Ether)?;
    let mut e = Expect::new(dp);
    udp_through_every_program(&mut e, || Ok(()))?;
    for index in same_remainder {
        let c = dp.counters(index)?.context("watched")?;
        assert_eq!(
            (c.ingress, c.egress),
            (zero_dir(), zero_dir()),
            "ifindex {index}"
        );
        dp.unwatch(index);
    }
    udp_through_every_program(&mut e, || Ok(()))
}

/// One small UDP packet through every program, each followed by a check of every counter
/// and flow record and by `after`.
fn udp_through_every_program(
    e: &mut Expect<'_, '_>,
    mut after: impl FnMut() -> Result<()>,
) -> Result<()> {
    let frame = pkt::v4(pkt::UDP, &pkt::udp(5000, 6000, &pkt::data(10)));
    for kind in PROGRAMS {
        e.on(kind);
        e.ip(&frame, 38, (pkt::UDP, A, 5000, B, 6000))?;
        e.check()?;
        after()?;
    }
    Ok(())
}

/// Inputs the kernel refuses (see [`kernel_rejects`]) answer EINVAL and move no counter;
/// the shortest accepted frames are counted.
fn inputs_shorter_than_headers_are_rejected_uncounted(dp: &Dataplane<'_>) -> Result<()> {
    let v4 = pkt::v4(pkt::UDP, &pkt::udp(1, 2, &pkt::data(40)));
    let v6 = pkt::v6(pkt::UDP, &pkt::udp(1, 2, &pkt::data(40)));
    for kind in PROGRAMS {
        let limit = |full: usize| if is_tc(kind) { full } else { 14 };
        for (frame, below) in [(&v4, limit(34)), (&v6, limit(54))] {
            for len in 0..below {
                assert!(kernel_rejects(kind, &frame[..len]));
                let err = test_run(dp, kind, &frame[..len], None)
                    .expect_err("short input must be rejected");
                assert_eq!(err.kind(), ErrorKind::InvalidInput, "{kind:?} len {len}");
            }
        }
    }
    let c = counters(dp)?;
    assert_eq!(
        (c.ingress.clone(), c.egress.clone()),
        (zero_dir(), zero_dir())
    );

    let mut e = Expect::new(dp);
    for kind in PROGRAMS {
        e.on(kind);
        e.non_ip(&pkt::eth(pkt::ETH_ARP, &[]))?; // 14 bytes
        e.truncated(&pkt::eth_tagged(&[pkt::VLAN_Q], pkt::ETH_IPV4, &[]))?; // 18 bytes
        if is_tc(kind) {
            e.truncated(&pkt::eth(pkt::ETH_IPV4, &[0x44; 20]))?; // IHL 4, 34 bytes
        } else {
            e.truncated(&v4[..14])?;
            e.truncated(&v6[..53])?;
        }
        e.check()?;
    }
    // Raw IP: 14 bytes of an IPv4 header is the shortest accepted input.
    dp.watch(LO, 1500, LinkType::RawIp)?;
    for len in 0..14 {
        let err = test_run(dp, ProgramKind::XdpIngress, &v4[14..14 + len], None)
            .expect_err("short input must be rejected");
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
    }
    e.on(ProgramKind::XdpIngress);
    e.truncated(&v4[14..28])?;
    e.check()
}

// ---------------------------------------------------------------------------------------------
// Every program passes every input
// ---------------------------------------------------------------------------------------------

/// Crafted frames from all categories above, whole and cut at header boundaries.
fn corpus() -> Vec<Vec<u8>> {
    let mut c = Vec::new();
    let tcp = Tcp::new(1, 2, 3, pkt::SYN)
        .opts(&[2, 4, 5, 0xb4])
        .build(&pkt::data(10));
    let udp = pkt::udp(51820, 51820, &pkt::wg(1, 148));
    let icmp = pkt::icmp(3, 4, [0, 0, 5, 0], &Ipv4::new(pkt::TCP).build(&tcp[..8]));
    let icmp6 = pkt::icmp(2, 0, [0, 0, 5, 0], &Ipv6::new().build(pkt::UDP, &udp[..8]));
    for (proto, l4) in [(pkt::TCP, &tcp), (pkt::UDP, &udp), (pkt::ICMP, &icmp)] {
        let f = pkt::v4(proto, l4);
        for cut in 0..=f.len().min(80) {
            c.push(f[..cut].to_vec());
        }
        c.push(f);
        let mut ip = Ipv4::new(proto);
        ip.mf = true;
        ip.df = true;
        ip.options = vec![1; 8];
        c.push(pkt::eth_tagged(
            &[pkt::VLAN_AD, pkt::VLAN_Q],
            pkt::ETH_IPV4,
            &ip.build(l4),
        ));
    }
    for (proto, l4) in [(pkt::TCP, &tcp), (pkt::UDP, &udp), (pkt::ICMPV6, &icmp6)] {
        let exts = [
            Ext::Hop(0),
            Ext::Frag {
                offset: 3,
                more: false,
            },
            Ext::Dest(2),
        ];
        let f = pkt::eth(pkt::ETH_IPV6, &Ipv6::new().exts(&exts).build(proto, l4));
        for cut in 0..=f.len().min(120) {
            c.push(f[..cut].to_vec());
        }
        c.push(f);
        c.push(pkt::v6(proto, l4));
    }
    c.push(pkt::eth(pkt::ETH_ARP, &[0; 28]));
    c.push(pkt::eth(0, &[0; 46]));
    c.push(vec![0xff; 14]);
    c.push(vec![0; 1514]);
    c
}

/// XDP returns XDP_PASS (2) and tc returns TCX_NEXT (-1) for every input the kernel accepts;
/// the kernel refuses exactly what [`kernel_rejects`] predicts.
fn every_program_passes_every_crafted_packet(dp: &Dataplane<'_>) -> Result<()> {
    let frames = corpus();
    {
        let mut accepted = [0u64; 2];
        for kind in PROGRAMS {
            for f in &frames {
                match test_run(dp, kind, f, None) {
                    Ok(ret) => {
                        assert!(!kernel_rejects(kind, f), "{kind:?} accepted {f:02x?}");
                        assert_eq!(ret, pass_code(kind), "{kind:?} on {f:02x?}");
                        accepted[direction(kind) as usize] += 1;
                    }
                    Err(err) => {
                        assert!(kernel_rejects(kind, f), "{kind:?} refused {f:02x?}: {err}");
                        assert_eq!(err.kind(), ErrorKind::InvalidInput);
                    }
                }
            }
        }
        let c = counters(dp)?;
        assert_eq!([c.ingress.packets, c.egress.packets], accepted);
        // Raw IP: the same frames without their Ethernet header.
        dp.watch(LO, 1500, LinkType::RawIp)?;
        let mut raw_accepted = 0;
        for f in frames.iter().filter(|f| f.len() >= 14) {
            let raw = &f[14..];
            match test_run(dp, ProgramKind::XdpIngress, raw, None) {
                Ok(ret) => {
                    assert!(raw.len() >= 14, "accepted {raw:02x?}");
                    assert_eq!(ret, XDP_PASS);
                    raw_accepted += 1;
                }
                Err(err) => {
                    assert!(raw.len() < 14, "refused {raw:02x?}: {err}");
                }
            }
        }
        assert_eq!(counters(dp)?.ingress.packets, accepted[0] + raw_accepted);
        Ok(())
    }
}

/// Watching an interface again (the agent does when its MTU changes) while its packets are
/// counted loses none of them: only the slot's header is written, never the whole value the
/// programs count into (a counter that went back would read as a slot watched afresh). The
/// packets run on CPU 1 while this thread, on CPU 0, watches again and again.
fn watching_again_loses_no_count(dp: &Dataplane<'_>) -> Result<()> {
    use std::os::fd::{AsFd, AsRawFd};
    if !two_cpus() {
        ci::skip("watching again while counting needs CPUs 0 and 1 at once");
        return Ok(());
    }
    let fd = dp.program(ProgramKind::TcIngress).as_fd().as_raw_fd();
    let frame = pkt::v4(pkt::UDP, &pkt::udp(40000, 9999, &[0u8; 100]));
    let (calls, repeat) = (400u64, 1000u32);
    let runner = std::thread::spawn(move || -> Result<()> {
        pin(1)?;
        for _ in 0..calls {
            netdoctor_lab::bpf::test_run::test_run(fd, &frame, None, repeat)?;
        }
        Ok(())
    });
    pin(0)?;
    let mut watches = 0u32;
    while !runner.is_finished() {
        let mtu = if watches % 2 == 0 { 1400 } else { 1500 };
        dp.watch(LO, mtu, LinkType::Ether)?;
        watches += 1;
    }
    unpin()?;
    runner
        .join()
        .map_err(|_| anyhow::anyhow!("the test-run thread panicked"))?
        .context("test runs")?;
    let counted = counters(dp)?.ingress.packets;
    let sent = calls * u64::from(repeat);
    ensure!(
        counted == sent,
        "{counted} of {sent} packets counted across {watches} watches"
    );
    ensure!(
        watches >= 10,
        "only {watches} watches overlapped the packets"
    );
    Ok(())
}

/// Watching again writes the slot mapping again, which repairs one someone cleared: with its
/// preferred slot taken, the loopback finds its counters only through `iface_slot`; with
/// that entry zeroed its packets go uncounted, and after one more watch they count again.
fn watching_again_repairs_the_slot_mapping(dp: &Dataplane<'_>) -> Result<()> {
    use libbpf_rs::MapCore;
    use std::os::fd::{AsFd, AsRawFd};
    let frame = pkt::v4(pkt::UDP, &pkt::udp(40000, 9999, &[0u8; 100]));
    let ingress = |dp: &Dataplane<'_>| -> Result<u64> {
        run(dp, ProgramKind::TcIngress, &frame)?;
        Ok(counters(dp)?.ingress.packets)
    };
    dp.unwatch(LO);
    dp.watch(LO + 256, 1500, LinkType::Ether)?;
    dp.watch(LO, 1500, LinkType::Ether)?;
    ensure!(ingress(dp)? == 1, "counted through the slot mapping");
    let fd = dp.program(ProgramKind::TcIngress).as_fd().as_raw_fd();
    let iface_slot = netdoctor_lab::bpf::maps::program_maps(fd)?
        .remove("iface_slot")
        .context("the tc program's iface_slot")?;
    iface_slot.update(
        &LO.to_ne_bytes(),
        &0u32.to_ne_bytes(),
        libbpf_rs::MapFlags::ANY,
    )?;
    ensure!(ingress(dp)? == 1, "counted with the mapping cleared");
    dp.watch(LO, 1500, LinkType::Ether)?;
    let counted = ingress(dp)?;
    dp.unwatch(LO + 256);
    ensure!(
        counted == 2,
        "{counted} packets counted after watching again, not 2"
    );
    Ok(())
}

/// Which ifindex and direction each hook reports; unwatched interfaces; refused inputs;
/// the verdict of every program on every crafted input; watching again while counting, and
/// after the slot mapping was cleared.
#[test]
fn hooks_verdicts_and_refused_inputs() -> Result<()> {
    lab_guard!();
    run_cases(
        Options::default(),
        &[
            (
                "hooks_count_loopback_ifindex_in_their_direction",
                ETHER_1500,
                hooks_count_loopback_ifindex_in_their_direction,
            ),
            (
                "unwatched_interfaces_are_not_counted",
                None,
                unwatched_interfaces_are_not_counted,
            ),
            (
                "slot_taken_by_same_remainder_falls_back",
                None,
                slot_taken_by_same_remainder_falls_back,
            ),
            (
                "inputs_shorter_than_headers_are_rejected_uncounted",
                ETHER_1500,
                inputs_shorter_than_headers_are_rejected_uncounted,
            ),
            (
                "every_program_passes_every_crafted_packet",
                ETHER_1500,
                every_program_passes_every_crafted_packet,
            ),
            (
                "watching_again_loses_no_count",
                ETHER_1500,
                watching_again_loses_no_count,
            ),
            (
                "watching_again_repairs_the_slot_mapping",
                ETHER_1500,
                watching_again_repairs_the_slot_mapping,
            ),
        ],
    )
}

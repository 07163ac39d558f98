//! The local path's passive retransmission check (`ebpf/include/local_tcp.h`) on received
//! segments, against the sequence numbers the segments carry: exact on one CPU and with
//! connections interleaved, never counting data a connection had not sent before when its
//! segments move between CPUs (the per-CPU hint in the interface's first line goes stale
//! then), also 2^31 and more apart, where 32-bit sequence comparisons turn around.
//!
//! The cases run in a namespace of their own, with 10.0.0.2 (the packet builder's
//! destination) on its loopback and IPv4 forwarding off, so that received TCP segments to it
//! are local; their destination MAC is the loopback's (zero), which makes them PACKET_HOST.

use std::net::Ipv4Addr;

use anyhow::{ensure, Context, Result};
use netdoctor::kernel::packet::local_tcp::LocalTcp;
use netdoctor::kernel::packet::{Dataplane, Options, ProgramKind};
use netdoctor::kernel::views::Direction;
use netdoctor_lab::packet::builder as pkt;
use netdoctor_lab::packet::random::Rng;
use netdoctor_lab::{ci, lab_guard, Netns};

use crate::dataplane_test_run::harness::{
    counters, dir_of, pin, run, run_cases, tcp_seg, two_cpus, unpin, Case, ETHER_1500, LO,
};

/// A received data segment of connection `sport` -> 10.0.0.2:80.
fn segment(sport: u16, seq: u32, len: usize) -> Vec<u8> {
    let mut f = tcp_seg(sport, seq, pkt::ACK, len);
    f[0..6].fill(0); // the loopback's address: PACKET_HOST
    f
}

/// Local segments and retransmissions counted on ingress so far.
fn local(dp: &Dataplane<'_>) -> Result<(u64, u64)> {
    let c = counters(dp)?;
    let d = dir_of(&c, Direction::Ingress);
    Ok((d.local_tcp_segments, d.local_tcp_retransmits))
}

/// Sends `(cpu, sport, seq, len)` segments in order and returns the retransmissions counted.
fn send(dp: &Dataplane<'_>, segments: &[(usize, u16, u32, usize)]) -> Result<u64> {
    let (segs0, re0) = local(dp)?;
    for &(cpu, sport, seq, len) in segments {
        pin(cpu)?;
        run(dp, ProgramKind::TcIngress, &segment(sport, seq, len))?;
    }
    unpin()?;
    let (segs, re) = local(dp)?;
    ensure!(
        segs - segs0 == segments.len() as u64,
        "{} of {} segments took the local path",
        segs - segs0,
        segments.len()
    );
    ensure!(
        dp.flows()?.is_empty(),
        "local segments got flow records: {:?}",
        dp.flows()?
    );
    Ok(re - re0)
}

/// One CPU: in-order data counts nothing, data at or below the highest end counts once per
/// segment, a duplicate of the newest segment too.
fn one_cpu_exact(dp: &Dataplane<'_>) -> Result<()> {
    let s = |seq| (0, 40000, seq, 1000);
    let n = send(dp, &[s(1000), s(2000), s(3000), s(4000)])?;
    ensure!(n == 0, "in-order data counted {n} retransmissions");
    let n = send(dp, &[s(2000), s(5000), s(1000), s(5000), s(6000)])?;
    ensure!(
        n == 3,
        "three segments carried data seen before, counted {n}"
    );
    Ok(())
}

/// Two connections taking turns on one CPU (the hint changes hands every segment): each is
/// checked against its own entry, exactly.
fn interleaved_connections(dp: &Dataplane<'_>) -> Result<()> {
    let (a, b) = (40001, 40002);
    let n = send(
        dp,
        &[
            (0, a, 1000, 500),
            (0, b, 3_000_000_000, 500),
            (0, a, 1500, 500),
            (0, b, 3_000_000_500, 500),
            (0, a, 1000, 500),
            (0, b, 3_000_000_500, 500),
            (0, a, 2000, 500),
            (0, b, 3_000_001_000, 500),
        ],
    )?;
    ensure!(n == 2, "one retransmission per connection, counted {n}");
    Ok(())
}

/// One connection on two CPUs: a retransmission counts on the CPU that did not see the
/// data beyond it, and on the one whose hint is ahead.
fn split_across_cpus(dp: &Dataplane<'_>) -> Result<()> {
    let c = 40003;
    let n = send(
        dp,
        &[
            (0, c, 0, 1000),
            (1, c, 1000, 1000),
            (0, c, 2000, 1000),
            (1, c, 1000, 1000), // CPU 1 saw up to 2000 itself; 3000 was sent
            (0, c, 500, 500),
        ],
    )?;
    ensure!(n == 2, "two retransmissions, counted {n}");
    Ok(())
}

/// A hint left behind on one CPU while the connection moved 3 GiB on another: its new data
/// is 2^31 and more past the hint's end, where a 32-bit comparison calls it older. It must
/// not count, nor may anything after it.
fn stale_hint_never_counts_new_data(dp: &Dataplane<'_>) -> Result<()> {
    let c = 40004;
    let g = 1u32 << 30;
    let n = send(
        dp,
        &[
            (0, c, 0, 1000),
            (1, c, 1000, 1000),
            (1, c, g, 1000),
            (1, c, 2 * g, 1000),
            (1, c, 3 * g, 1000),
            (0, c, 3 * g + 1000, 1000),
            (0, c, 3 * g + 2000, 1000),
            (1, c, 3 * g + 3000, 1000),
        ],
    )?;
    ensure!(n == 0, "new data counted {n} retransmissions");
    Ok(())
}

/// Random traffic of three connections on two CPUs, each staying on its CPU most of the
/// time, with retransmissions and reordering: never more counted than segments that carried
/// data their connection had sent before (the model), and all of those while no connection
/// changes CPU.
fn random_never_invents(dp: &Dataplane<'_>) -> Result<()> {
    for (seed, moves) in [(1u64, 0usize), (2, 10), (3, 30)] {
        let mut rng = Rng::new(seed);
        let mut next = [0u32, 1 << 31, 3_000_000_000];
        // The highest end each connection sent; its first segment starts its check.
        let mut high: [Option<u32>; 3] = [None; 3];
        let mut cpu = [0usize, 1, 0];
        let mut segments = Vec::new();
        let mut seen_before = 0u64;
        for _ in 0..600 {
            let c = rng.below(3);
            if rng.chance(moves) {
                cpu[c] ^= 1;
            }
            let len = rng.pick(&[1usize, 500, 1000, 1448]);
            let seq = if rng.chance(10) {
                next[c].wrapping_sub(rng.below(20_000) as u32)
            } else {
                next[c]
            };
            let end = seq.wrapping_add(len as u32);
            match high[c] {
                Some(h) => {
                    if (seq.wrapping_sub(h) as i32) < 0 {
                        seen_before += 1;
                    }
                    if (end.wrapping_sub(h) as i32) > 0 {
                        high[c] = Some(end);
                    }
                }
                None => high[c] = Some(end),
            }
            if seq == next[c] {
                next[c] = end;
            }
            // Connections of their own per seed: the entries outlive the seed.
            segments.push((cpu[c], 41000 + 10 * seed as u16 + c as u16, seq, len));
        }
        let n = send(dp, &segments)?;
        ensure!(
            n <= seen_before,
            "seed {seed}: counted {n}, only {seen_before} segments carried data seen before"
        );
        if moves == 0 {
            ensure!(
                n == seen_before,
                "seed {seed}, no CPU changes: counted {n} of {seen_before}"
            );
        }
        ensure!(seen_before > 20, "seed {seed}: only {seen_before} to find");
    }
    Ok(())
}

#[test]
fn local_path_retransmission_check() -> Result<()> {
    lab_guard!();
    if !two_cpus() {
        ci::skip("the local path's cross-CPU cases need CPUs 0 and 1");
        return Ok(());
    }
    let ns = Netns::new()?;
    ns.set_up("lo")?;
    ns.add_addr("lo", &format!("{}/32", Ipv4Addr::new(10, 0, 0, 2)))?;
    ns.sysctl("net.ipv4.ip_forward", "0")?;
    let options = Options {
        local_tcp: LocalTcp::Sockets,
        ..Options::default()
    };
    let cases: Vec<Case> = vec![
        ("one_cpu_exact", ETHER_1500, one_cpu_exact),
        (
            "interleaved_connections",
            ETHER_1500,
            interleaved_connections,
        ),
        ("split_across_cpus", ETHER_1500, split_across_cpus),
        (
            "stale_hint_never_counts_new_data",
            ETHER_1500,
            stale_hint_never_counts_new_data,
        ),
        ("random_never_invents", ETHER_1500, random_never_invents),
    ];
    ns.run_in(move || run_cases(options, &cases))
        .context("in the test namespace")?
}

/// Forwarding switched off and on while the data plane runs: a received segment to this
/// host's address takes the local path only while the family is not forwarded, as the
/// agent's refresh (every evaluation) finds it. Loaded with forwarding on, the interface's
/// PATH_LOCAL_IN4 bit is clear, so the local path begins only once the refresh sets it.
#[test]
fn forwarding_switched_while_running_moves_the_local_path() -> Result<()> {
    lab_guard!();
    let ns = Netns::new()?;
    ns.set_up("lo")?;
    ns.add_addr("lo", &format!("{}/32", Ipv4Addr::new(10, 0, 0, 2)))?;
    ns.sysctl("net.ipv4.ip_forward", "1")?;
    ns.run_in(move || -> Result<()> {
        let mut storage = std::mem::MaybeUninit::uninit();
        let options = Options {
            local_tcp: LocalTcp::Sockets,
            ..Options::default()
        };
        let dp = Dataplane::load(&mut storage, options)?;
        dp.watch(LO, 1500, netdoctor::kernel::packet::LinkType::Ether)?;
        let forward = |on: &str| -> Result<()> {
            // This thread is in the namespace: /proc/sys/net is its own.
            std::fs::write("/proc/sys/net/ipv4/ip_forward", on)?;
            dp.refresh_local_addrs();
            Ok(())
        };
        // (local segments, flows) after one segment of a new connection.
        let one = |sport: u16| -> Result<(u64, usize)> {
            run(&dp, ProgramKind::TcIngress, &segment(sport, 1000, 100))?;
            Ok((local(&dp)?.0, dp.flows()?.len()))
        };
        ensure!(one(41000)? == (0, 1), "forwarding on: a flow record");
        forward("0")?;
        ensure!(one(41001)? == (1, 1), "forwarding off: the local path");
        forward("1")?;
        ensure!(one(41002)? == (1, 2), "forwarding on again: a flow record");
        Ok(())
    })
    .context("in the test namespace")?
}

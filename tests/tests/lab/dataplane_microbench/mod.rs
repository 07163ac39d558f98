//! Per-run cost of the packet programs through `BPF_PROG_TEST_RUN` with `repeat`: a quick,
//! low-noise A/B figure for the hot path (the kernel times the repeat loop itself). Not a
//! substitute for `netdoctor-bench` (real traffic, cache misses, several CPUs): it runs one
//! flow at a time on one CPU, so it measures the steady state of a flow's packets.
//!
//! `cargo test --release -p netdoctor-lab --test lab -- --ignored --nocapture dataplane_microbench::`
//!
//! For trying changes to the data plane without rebuilding the agent, two more measurements
//! take compiled variants of `ebpf/packet.bpf.c` (`clang -g -O2 -target bpf -mcpu=v3` with
//! the include paths of `ebpf/build_skeletons.rs`), several at once: `ND_OBJS=a.o,b.o`.
//! `objects_ns_per_run` is the warm loop above for each; `objects_under_iperf3` attaches
//! every variant's tc programs to the same veth in the same iperf3 runs, the A/B that shows
//! cache misses and the one to trust (single benchmark runs of one build vary by ±20 ns
//! from one run to the next on a shared VM).

use std::mem::MaybeUninit;
use std::net::Ipv4Addr;
use std::os::fd::{AsFd, AsRawFd};

use anyhow::{Context, Result};
use libbpf_rs::libbpf_sys;
use netdoctor::kernel::packet::LinkType;
use netdoctor::kernel::packet::{Dataplane, Options, ProgramKind};
use netdoctor_lab::bpf::test_run;
use netdoctor_lab::bpf::{floor, load_floor, prog_info};
use netdoctor_lab::lab_guard;
use netdoctor_lab::packet::builder::{self as pkt, Ipv4, Tcp};

const LO: u32 = 1;

/// Ethernet + IPv4 (10.0.0.1 -> 10.0.0.2, DF, id 0) around a transport header and payload.
fn frame_v4(proto: u8, l4: &[u8]) -> Vec<u8> {
    let mut ip = Ipv4::new(proto);
    ip.df = true;
    ip.id = 0;
    pkt::eth(pkt::ETH_IPV4, &ip.build(l4))
}

/// An ACK segment of a flow to port 5201 with `payload` bytes of 0xab.
fn frame_tcp(sport: u16, seq: u32, payload: usize) -> Vec<u8> {
    let tcp = Tcp::new(sport, 5201, seq, pkt::ACK).build(&vec![0xab; payload]);
    frame_v4(pkt::TCP, &tcp)
}

/// `frame` sent to the loopback's (zero) MAC address: PACKET_HOST, so a received TCP segment
/// to a local address takes the local path.
fn local(mut frame: Vec<u8>) -> Vec<u8> {
    frame[0..6].fill(0);
    frame
}

/// A datagram to port 9999 with `payload` bytes of 0xcd.
fn frame_udp(sport: u16, payload: usize) -> Vec<u8> {
    frame_v4(pkt::UDP, &pkt::udp(sport, 9999, &vec![0xcd; payload]))
}

/// Mean ns per run of `repeat` runs of `kind` on `data`, as the kernel timed them.
fn ns_per_run(dp: &Dataplane<'_>, kind: ProgramKind, data: &[u8], repeat: u32) -> Result<f64> {
    Ok(test_run::ns_per_run(
        dp.program(kind).as_fd().as_raw_fd(),
        data,
        repeat,
    )?)
}

/// Median of `rounds` measurements.
fn median_ns(
    dp: &Dataplane<'_>,
    kind: ProgramKind,
    data: &[u8],
    repeat: u32,
    rounds: usize,
) -> Result<f64> {
    let v: Vec<f64> = (0..rounds)
        .map(|_| ns_per_run(dp, kind, data, repeat))
        .collect::<Result<_>>()?;
    Ok(median(v))
}

#[test]
#[ignore = "a measurement, not a check: run with --ignored --nocapture"]
fn hot_path_ns_per_run() -> Result<()> {
    lab_guard!();
    let mut storage = MaybeUninit::uninit();
    let dp = Dataplane::load(&mut storage, Options::default()).context("load")?;
    dp.watch(LO, 1500, LinkType::Ether)?;
    let tcp = frame_tcp(40000, 1000, 1448);
    let udp = frame_udp(40001, 1200);
    let ack = frame_tcp(40002, 1000, 0);
    // WireGuard transport data on an underlay: the same message again and again (after the
    // first, a duplicate: the session's lookup and its window, not the counting).
    let wg = frame_v4(
        pkt::UDP,
        &pkt::udp(51820, 51820, &pkt::wg_data(7, 1000, 1200)),
    );
    for (name, kind, data) in [
        ("tc ingress wireguard data", ProgramKind::TcIngress, &wg),
        ("tc ingress tcp data 1448", ProgramKind::TcIngress, &tcp),
        ("tc egress tcp ack", ProgramKind::TcEgress, &ack),
        ("tc ingress udp 1200", ProgramKind::TcIngress, &udp),
        ("xdp tcp data 1448", ProgramKind::XdpIngress, &tcp),
    ] {
        let ns = median_ns(&dp, kind, data, 200_000, 9)?;
        println!("{name:28} {ns:6.1} ns/run");
    }
    // Several flows in turn, 64 packets each: cache and table behaviour with more keys.
    let frames: Vec<Vec<u8>> = (0..512u16).map(|i| frame_tcp(41000 + i, 1000, 0)).collect();
    let mut total = 0.0;
    for _ in 0..3 {
        for f in &frames {
            total += ns_per_run(&dp, ProgramKind::TcEgress, f, 64)?;
        }
    }
    println!(
        "{:28} {:6.1} ns/run",
        "tc egress 512 flows x64",
        total / (3.0 * frames.len() as f64)
    );
    println!("flows: {}", dp.flows()?.len());
    Ok(())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn env_or(name: &str, default: u32) -> u32 {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

mod variants;

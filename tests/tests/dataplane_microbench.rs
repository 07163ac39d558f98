//! Per-run cost of the packet programs through `BPF_PROG_TEST_RUN` with `repeat`: a quick,
//! low-noise A/B figure for the hot path (the kernel times the repeat loop itself). Not a
//! substitute for `netdoctor-bench` (real traffic, cache misses, several CPUs): it runs one
//! flow at a time on one CPU, so it measures the steady state of a flow's packets.
//!
//! `cargo test --release -p netdoctor-lab --test dataplane_microbench -- --ignored --nocapture`

use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd};

use anyhow::{ensure, Context, Result};
use libbpf_rs::libbpf_sys;
use netdoctor::dataplane::{Dataplane, Options, ProgramKind};
use netdoctor::iface::LinkType;
use netdoctor_lab::ci;

const LO: u32 = 1;

/// Ethernet + IPv4 (10.0.0.1 -> 10.0.0.2, DF) around a transport header and payload.
fn frame_v4(proto: u8, l4: &[u8]) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01, 0x08, 0x00];
    let tot = 20 + l4.len();
    f.extend([
        0x45,
        0,
        (tot >> 8) as u8,
        tot as u8,
        0,
        0,
        0x40,
        0,
        64,
        proto,
        0,
        0,
    ]);
    f.extend([10, 0, 0, 1, 10, 0, 0, 2]);
    f.extend(l4);
    f
}

fn frame_tcp(sport: u16, seq: u32, payload: usize) -> Vec<u8> {
    let mut l4 = Vec::new();
    l4.extend(sport.to_be_bytes());
    l4.extend(5201u16.to_be_bytes());
    l4.extend(seq.to_be_bytes());
    l4.extend(0u32.to_be_bytes());
    l4.extend([0x50, 0x10, 0xff, 0xff, 0, 0, 0, 0]);
    l4.extend(std::iter::repeat_n(0xab, payload));
    frame_v4(6, &l4)
}

fn frame_udp(sport: u16, payload: usize) -> Vec<u8> {
    let mut l4 = Vec::new();
    l4.extend(sport.to_be_bytes());
    l4.extend(9999u16.to_be_bytes());
    l4.extend(((8 + payload) as u16).to_be_bytes());
    l4.extend([0, 0]);
    l4.extend(std::iter::repeat_n(0xcd, payload));
    frame_v4(17, &l4)
}

/// Mean ns per run of `repeat` runs of `kind` on `data`, as the kernel timed them.
fn ns_per_run(dp: &Dataplane<'_>, kind: ProgramKind, data: &[u8], repeat: u32) -> Result<f64> {
    let mut opts = libbpf_sys::bpf_test_run_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_test_run_opts>() as _,
        data_in: data.as_ptr().cast(),
        data_size_in: u32::try_from(data.len())?,
        repeat: i32::try_from(repeat)?,
        ..Default::default()
    };
    let fd = dp.program(kind).as_fd().as_raw_fd();
    // SAFETY: `opts` borrows `data` for the call only; no output buffers; `fd` is live.
    let rc = unsafe { libbpf_sys::bpf_prog_test_run_opts(fd, &mut opts) };
    ensure!(rc == 0, "test run failed: {rc}");
    Ok(f64::from(opts.duration))
}

/// Median of `rounds` measurements.
fn median_ns(
    dp: &Dataplane<'_>,
    kind: ProgramKind,
    data: &[u8],
    repeat: u32,
    rounds: usize,
) -> Result<f64> {
    let mut v: Vec<f64> = (0..rounds)
        .map(|_| ns_per_run(dp, kind, data, repeat))
        .collect::<Result<_>>()?;
    v.sort_by(f64::total_cmp);
    Ok(v[v.len() / 2])
}

#[test]
#[ignore = "a measurement, not a check: run with --ignored --nocapture"]
fn hot_path_ns_per_run() -> Result<()> {
    if !(ci::require_root_or_skip() && ci::require_bpf_or_skip()) {
        return Ok(());
    }
    let mut storage = MaybeUninit::uninit();
    let dp = Dataplane::load(&mut storage, Options::default()).context("load")?;
    dp.watch(LO, 1500, LinkType::Ether)?;
    let tcp = frame_tcp(40000, 1000, 1448);
    let udp = frame_udp(40001, 1200);
    let ack = frame_tcp(40002, 1000, 0);
    for (name, kind, data) in [
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

/// The same measurement on any compiled variant of packet.bpf.c (`ND_OBJ=/path/x.o`): for
/// trying changes without rebuilding the agent.
#[test]
#[ignore = "a measurement for experiments: ND_OBJ=object.o"]
fn object_ns_per_run() -> Result<()> {
    use libbpf_rs::{MapCore, MapFlags, ObjectBuilder};
    let Ok(path) = std::env::var("ND_OBJ") else {
        return Ok(());
    };
    let ncpu = libbpf_rs::num_possible_cpus()?;
    let mut open = ObjectBuilder::default().open_file(&path)?;
    for mut m in open.maps_mut() {
        if m.name() == "flow_cache" || m.name() == "iface_stats" {
            m.set_max_entries(m.max_entries() * ncpu as u32)?;
        }
    }
    let obj = open.load()?;
    let find = |name: &str| {
        obj.maps()
            .find(|m| m.name() == name)
            .with_context(|| format!("map {name}"))
    };
    // The loopback in its preferred slot (LO % 256) on every CPU, both directions: owner
    // and MTU (struct nd_iface_dir).
    let stats = find("iface_stats")?;
    let mut v = vec![0u8; stats.value_size() as usize];
    v[0..4].copy_from_slice(&LO.to_ne_bytes());
    v[4..8].copy_from_slice(&1500u32.to_ne_bytes());
    for cpu in 0..ncpu as u32 {
        for dir in 0..2 {
            let key = (cpu * 256 + LO % 256) * 2 + dir;
            stats.update(&key.to_ne_bytes(), &v, MapFlags::ANY)?;
        }
    }
    let prog = |name: &str| -> Result<i32> {
        let p = obj
            .progs_mut()
            .find(|p| p.name() == name)
            .with_context(|| format!("prog {name}"))?;
        Ok(p.as_fd().as_raw_fd())
    };
    let run = |fd: i32, data: &[u8], repeat: i32| -> Result<f64> {
        let mut opts = libbpf_sys::bpf_test_run_opts {
            sz: std::mem::size_of::<libbpf_sys::bpf_test_run_opts>() as _,
            data_in: data.as_ptr().cast(),
            data_size_in: data.len() as u32,
            repeat,
            ..Default::default()
        };
        // SAFETY: as in ns_per_run.
        let rc = unsafe { libbpf_sys::bpf_prog_test_run_opts(fd, &mut opts) };
        ensure!(rc == 0, "test run failed: {rc}");
        Ok(f64::from(opts.duration))
    };
    let tcp = frame_tcp(40000, 1000, 1448);
    let ack = frame_tcp(40002, 1000, 0);
    let udp = frame_udp(40001, 1200);
    for name in ["nd_tc_ingress", "nd_xdp_ingress"] {
        let fd = prog(name)?;
        let mut info = libbpf_sys::bpf_prog_info::default();
        let mut len = std::mem::size_of::<libbpf_sys::bpf_prog_info>() as u32;
        // SAFETY: `info` is writable for `len` bytes; `fd` is a live program.
        unsafe { libbpf_sys::bpf_prog_get_info_by_fd(fd, &mut info, &mut len) };
        println!(
            "{name}: {} verified insns, jited {} B",
            info.verified_insns, info.jited_prog_len
        );
    }
    let ing = prog("nd_tc_ingress")?;
    let eg = prog("nd_tc_egress")?;
    let xdp = prog("nd_xdp_ingress")?;
    for (name, fd, data) in [
        ("tc ingress tcp data 1448", ing, &tcp),
        ("tc egress tcp ack", eg, &ack),
        ("tc ingress udp 1200", ing, &udp),
        ("xdp tcp data 1448", xdp, &tcp),
    ] {
        let mut v: Vec<f64> = (0..9)
            .map(|_| run(fd, data, 200_000))
            .collect::<Result<_>>()?;
        v.sort_by(f64::total_cmp);
        println!("{name:28} {:6.1} ns/run", v[4]);
    }
    let frames: Vec<Vec<u8>> = (0..512u16).map(|i| frame_tcp(41000 + i, 1000, 0)).collect();
    let mut total = 0.0;
    for _ in 0..3 {
        for f in &frames {
            total += run(eg, f, 64)?;
        }
    }
    println!(
        "{:28} {:6.1} ns/run",
        "tc egress 512 flows x64",
        total / (3.0 * frames.len() as f64)
    );
    // The cache's worst case: every packet a new flow (each taking and retiring a slot).
    let mut total = 0.0;
    for round in 0..2u16 {
        for i in 0..4096u16 {
            let f = frame_udp(1 + (i ^ (round << 12)), 64);
            total += run(eg, &f, 1)?;
        }
    }
    println!(
        "{:28} {:6.1} ns/run",
        "tc egress 8192 new flows",
        total / 8192.0
    );
    Ok(())
}

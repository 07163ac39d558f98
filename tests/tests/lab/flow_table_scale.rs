//! The flow table at scale: 10 k, 100 k and 1 M flows. For each size, a data plane is loaded
//! with `--max-flows` that size and filled to it through `BPF_PROG_TEST_RUN` (one UDP packet
//! per flow, spread over the CPUs: the LRU gives each CPU an equal share of the entries),
//! then it prints:
//! - the table's kernel memory (`memlock` of the map's fdinfo, the kernel's own accounting);
//! - the time to read the table as the agent does each interval (`Dataplane::flows_and_table`,
//!   median of 3) and this process's resident memory before and after (VmRSS, VmHWM): the
//!   agent holds the same reading; and the CPU time of a read (this thread's, median of 3)
//!   as a share of a core at the agent's default 10 s interval;
//! - per packet, as the kernel times test runs: a packet of a cached flow (the steady state),
//!   a packet of a flow spread over the whole table (its cache slot taken by another flow:
//!   the table lookup, over a table that big), and a packet of a new flow into the full table
//!   (an eviction); and the evictions counted.
//!
//! `a_window_at_10k_100k_1m` closes one window the way the agent does: a reading held from
//! the previous window, a packet on 10 % of the flows, a new reading and their difference
//! (`Snapshot::since`); it prints the window's CPU time and the peak resident memory above
//! the start (`ND_FLOWS=a,b` picks the sizes).
//!
//! Benchmarks, not tests: `nice -n 10 cargo test --release -p netdoctor-lab --test lab
//! -- --ignored --nocapture --test-threads=1 flow_table_scale::` (one at a time: the memory
//! figures are the process's). Figures from a shared machine are noisy.

use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd};
use std::time::Instant;

use anyhow::{Context, Result};
use netdoctor::kernel::packet::{Dataplane, LinkType, Options, ProgramKind};
use netdoctor_lab::bpf::{maps, test_run};
use netdoctor_lab::lab_guard;
use netdoctor_lab::packet::builder as pkt;
use netdoctor_lab::proc_usage::proc_status;

const LO: u32 = 1;

/// Flow `i`'s packet: distinct (source port, destination port) pairs.
pub(crate) fn frame(i: u32) -> Vec<u8> {
    let sport = 1024 + (i % 60_000) as u16;
    let dport = 1 + (i / 60_000) as u16;
    pkt::v4(pkt::UDP, &pkt::udp(sport, dport, &[0u8; 20]))
}

fn pin(cpu: usize) -> Result<()> {
    use nix::sched::{sched_setaffinity, CpuSet};
    let mut set = CpuSet::new();
    set.set(cpu)?;
    sched_setaffinity(nix::unistd::Pid::from_raw(0), &set)?;
    Ok(())
}

/// Field `field` of this process's `/proc/self/status`, kB (0 when unreadable).
fn status_kb(field: &str) -> u64 {
    proc_status(std::process::id())
        .ok()
        .and_then(|st| st.get(field).copied())
        .unwrap_or(0)
}

fn memlock(fd: i32) -> u64 {
    std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("memlock:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

/// CPU time this thread has used, ms (the read runs on it alone).
fn thread_cpu_ms() -> f64 {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_THREAD_CPUTIME_ID)
        .map_or(0.0, |t| t.tv_sec() as f64 * 1e3 + t.tv_nsec() as f64 / 1e6)
}

/// Mean ns per packet over single test runs of `frames`.
fn ns_per_packet(dp: &Dataplane<'_>, frames: impl Iterator<Item = Vec<u8>>) -> Result<f64> {
    let fd = dp.program(ProgramKind::TcIngress).as_fd().as_raw_fd();
    let (mut sum, mut n) = (0u64, 0u64);
    for f in frames {
        sum += u64::from(test_run::test_run(fd, &f, None, 1)?.duration_ns);
        n += 1;
    }
    Ok(sum as f64 / n.max(1) as f64)
}

/// A data plane with a table of `flows` entries, watching loopback.
fn loaded(storage: &mut MaybeUninit<libbpf_rs::OpenObject>, flows: u32) -> Result<Dataplane<'_>> {
    let options = Options {
        max_flows: flows,
        ..Options::default()
    };
    let dp = Dataplane::load(storage, options).context("load data plane")?;
    dp.watch(LO, 1500, LinkType::Ether)?;
    Ok(dp)
}

/// One packet of every `every`-th flow of 0..`flows` through `prog_fd` (with test-run
/// context `ctx`), each CPU in turn its share: the LRU table gives each CPU an equal share
/// of its entries.
pub(crate) fn send(
    prog_fd: i32,
    flows: u32,
    cpus: usize,
    every: usize,
    ctx: Option<&[u8]>,
) -> Result<()> {
    let share = flows / cpus as u32;
    for cpu in 0..cpus {
        pin(cpu)?;
        for i in (cpu as u32 * share..(cpu as u32 + 1) * share).step_by(every) {
            test_run::test_run(prog_fd, &frame(i), ctx, 1)?;
        }
    }
    Ok(())
}

fn one_size(flows: u32, cpus: usize) -> Result<()> {
    let mut storage = MaybeUninit::uninit();
    let dp = loaded(&mut storage, flows)?;
    let prog_fd = dp.program(ProgramKind::TcIngress).as_fd().as_raw_fd();
    let table = maps::program_maps(prog_fd)?
        .remove("flows")
        .context("the flows map")?;
    let fill = Instant::now();
    send(prog_fd, flows, cpus, 1, None)?;
    let share = flows / cpus as u32;
    let fill_s = fill.elapsed().as_secs_f64();
    let rss_before = status_kb("VmRSS");
    let mut reads = Vec::new();
    let mut cpu = Vec::new();
    let mut last = None;
    for _ in 0..3 {
        let (t, c) = (Instant::now(), thread_cpu_ms());
        let (all, use_) = dp.flows_and_table()?;
        reads.push(t.elapsed().as_secs_f64() * 1e3);
        last = Some((all.len(), use_));
        drop(all);
        cpu.push(thread_cpu_ms() - c);
    }
    reads.sort_by(f64::total_cmp);
    cpu.sort_by(f64::total_cmp);
    let (read_flows, use_) = last.context("a reading")?;
    let (rss_after, hwm) = (status_kb("VmRSS"), status_kb("VmHWM"));

    pin(0)?;
    // Steady state: one cached flow, repeat loop timed by the kernel.
    let hit = test_run::ns_per_run(prog_fd, &frame(0), 100_000)?;
    // Flows spread over the whole table (CPU 0's share), one packet each: the cache slot
    // holds another flow, so the packet goes to the table.
    let step = (share / 10_000).max(1);
    let spread = ns_per_packet(&dp, (0..share).step_by(step as usize).map(frame))?;
    // New flows into the full table: each evicts one.
    let new = ns_per_packet(&dp, (flows..flows + 10_000).map(frame))?;
    let (_, after) = dp.flows_and_table()?;
    println!(
        "{flows:>8} flows: table {:.1} MiB (memlock) | filled in {fill_s:.1} s | {} entries, {read_flows} flows read | \
         read {:.1} ms (median of 3: {:.1}/{:.1}/{:.1}) | CPU {:.1} ms a read, {:.2} % of a core at a 10 s interval | RSS {:.1} -> {:.1} MB (peak {:.1}) | \
         ns/packet: cached flow {hit:.0}, table lookup {spread:.0}, new flow evicting {new:.0} | \
         evictions {} after 10,000 new flows",
        memlock(table.as_fd().as_raw_fd()) as f64 / (1 << 20) as f64,
        use_.entries,
        reads[1],
        reads[0],
        reads[1],
        reads[2],
        cpu[1],
        cpu[1] / 10_000.0 * 100.0,
        rss_before as f64 / 1024.0,
        rss_after as f64 / 1024.0,
        hwm as f64 / 1024.0,
        after.evictions,
    );
    Ok(())
}

#[test]
#[ignore = "a benchmark: prints figures (run with --ignored --nocapture)"]
fn flow_table_at_10k_100k_1m() -> Result<()> {
    lab_guard!();
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!("flow table scale on {cpus} CPUs (test runs pinned to each CPU in turn to fill it)");
    for flows in [10_000, 100_000, 1_048_576] {
        one_size(flows, cpus)?;
    }
    Ok(())
}

/// Resets this process's peak resident set (VmHWM) to its current size.
fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// One window the way the agent closes it: a reading held from the previous window, 10 % of
/// the flows carrying a packet, a new reading and the difference of the two.
fn one_window(flows: u32, cpus: usize) -> Result<()> {
    let mut storage = MaybeUninit::uninit();
    let dp = loaded(&mut storage, flows)?;
    let prog_fd = dp.program(ProgramKind::TcIngress).as_fd().as_raw_fd();
    send(prog_fd, flows, cpus, 1, None)?;
    // The filled flows go idle, as most of a large table is in any one window.
    std::thread::sleep(std::time::Duration::from_secs(2));
    reset_peak_rss();
    let base = status_kb("VmRSS");
    let prev = dp.snapshot()?;
    send(prog_fd, flows, cpus, 10, None)?;
    let c = thread_cpu_ms();
    let now = dp.snapshot()?;
    let read_ms = thread_cpu_ms() - c;
    let mut cpu = Vec::new();
    let mut active = 0;
    for _ in 0..3 {
        let c = thread_cpu_ms();
        let window = now.since(&prev);
        cpu.push(thread_cpu_ms() - c);
        active = window.flows.len();
    }
    cpu.sort_by(f64::total_cmp);
    let peak = status_kb("VmHWM").saturating_sub(base);
    println!(
        "{flows:>8} flows, {active} active in the window: reading {read_ms:.0} ms CPU | \
         window (since) {:.1} ms CPU (median of 3: {:.1}/{:.1}/{:.1}) | peak RSS above the \
         start {:.1} MB (two readings and the window held, as the agent does)",
        cpu[1],
        cpu[0],
        cpu[1],
        cpu[2],
        peak as f64 / 1024.0,
    );
    Ok(())
}

#[test]
#[ignore = "a benchmark: prints figures (run with --ignored --nocapture)"]
fn a_window_at_10k_100k_1m() -> Result<()> {
    lab_guard!();
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let sizes = std::env::var("ND_FLOWS").unwrap_or_else(|_| "10000,100000,1048576".into());
    for flows in sizes.split(',').filter_map(|s| s.trim().parse().ok()) {
        one_window(flows, cpus)?;
    }
    Ok(())
}

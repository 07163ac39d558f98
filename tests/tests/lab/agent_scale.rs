//! The agent process with 10 k, 100 k and 1 M flows in its table (issue 34): the real
//! `netdoctor agent` (`NETDOCTOR_BIN`) in a lab namespace watching its veth with
//! `--max-flows N --interval 2s`, its own tc ingress program fed N distinct UDP flows
//! through `BPF_PROG_TEST_RUN` (an `__sk_buff` naming the veth, from a thread in the
//! namespace), then two phases of 3 evaluations each: every flow idle, and a packet on 10 %
//! of the flows every interval. Per phase it prints the agent's peak and current resident
//! memory (VmHWM, reset at the phase's start; VmRSS), its CPU time per evaluation, and how
//! long an evaluation took (its own histogram: the window's read, facts and rules).
//!
//! A benchmark, not a test: `NETDOCTOR_BIN=target/release/netdoctor cargo test --release -p
//! netdoctor-lab --test lab -- --ignored --nocapture agent_scale::` (`ND_FLOWS=a,b` picks
//! the sizes). Run two binaries one after the other to compare them.

use std::os::fd::{AsRawFd, RawFd};
use std::os::fd::{FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use libbpf_rs::{libbpf_sys, MapCore};
use netdoctor_lab::agent::Agent;
use netdoctor_lab::bpf::{maps, prog_info, query, test_run};
use netdoctor_lab::proc_usage::{proc_cpu_ticks, proc_status};
use netdoctor_lab::{lab_guard, PairTopology};

/// The agent's evaluation interval here.
const INTERVAL: Duration = Duration::from_secs(2);
/// Evaluations per phase.
const EVALUATIONS: u32 = 3;

/// The agent's `nd_tc_ingress` on `eth0` of the calling thread's namespace: (descriptor,
/// the veth's ifindex).
fn agents_ingress() -> Result<(OwnedFd, u32)> {
    let ifindex = nix::net::if_::if_nametoindex(PairTopology::IFNAME)?;
    for id in query::tcx_prog_ids(ifindex, libbpf_sys::BPF_TCX_INGRESS)? {
        // SAFETY: a plain syscall wrapper; it returns a new descriptor or a negative errno.
        let fd: RawFd = unsafe { libbpf_sys::bpf_prog_get_fd_by_id(id) };
        if fd < 0 {
            continue;
        }
        // SAFETY: the kernel just returned this descriptor, owned by nothing else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let info = prog_info(fd.as_raw_fd(), &mut [])?;
        let name: Vec<u8> = info
            .name
            .iter()
            .take_while(|c| **c != 0)
            .map(|c| *c as u8)
            .collect();
        if name == b"nd_tc_ingress" {
            return Ok((fd, ifindex));
        }
    }
    bail!("no nd_tc_ingress on the agent's {}", PairTopology::IFNAME)
}

/// Sends one packet of every `every`-th of flows 0..`flows` through the agent's program
/// (`flow_table_scale::send`), from a thread in the agent's namespace.
fn send(pair: &PairTopology, flows: u32, every: usize) -> Result<()> {
    pair.a.run_in(move || -> Result<()> {
        let (prog, ifindex) = agents_ingress()?;
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let ctx = test_run::skb_ctx_on(ifindex);
        crate::flow_table_scale::send(prog.as_raw_fd(), flows, cpus, every, Some(&ctx))
    })?
}

/// The entries of the agent's flow table (the map `flows` of its tc program), counted one
/// key at a time from this process.
fn table_entries(pair: &PairTopology) -> Result<u64> {
    pair.a.run_in(|| -> Result<u64> {
        let (prog, _) = agents_ingress()?;
        let maps = maps::program_maps(prog.as_raw_fd())?;
        let flows = maps.get("flows").context("the agent's flows map")?;
        Ok(flows.keys().count() as u64)
    })?
}

/// The agent's evaluations so far: (seconds they took, how many), from its histogram
/// `netdoctor_evaluation_duration_seconds` (the window's read, facts and rules, wall time).
fn evaluations(agent: &Agent) -> Result<(f64, f64)> {
    let metrics = agent.metrics()?;
    let value = |name: &str| -> Result<f64> {
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(name)?.trim().parse().ok())
            .with_context(|| format!("{name} in /metrics"))
    };
    Ok((
        value("netdoctor_evaluation_duration_seconds_sum ")?,
        value("netdoctor_evaluation_duration_seconds_count ")?,
    ))
}

/// (VmHWM, VmRSS) of `pid`, MB.
fn memory_mb(pid: u32) -> Result<(f64, f64)> {
    let status = proc_status(pid)?;
    let mb = |name: &str| -> Result<f64> {
        let kb = status
            .get(name)
            .with_context(|| format!("{name} of {pid}"))?;
        Ok(*kb as f64 / 1024.0)
    };
    Ok((mb("VmHWM")?, mb("VmRSS")?))
}

/// utime + stime of `pid` (its threads), seconds at 100 ticks a second.
fn cpu_s(pid: u32) -> Result<f64> {
    Ok(proc_cpu_ticks(pid)?.0 as f64 / 100.0)
}

/// One phase: peak memory reset, `EVALUATIONS` intervals with `each` run at every one.
fn phase(
    agent: &Agent,
    name: &str,
    flows: u32,
    mut each: impl FnMut() -> Result<()>,
) -> Result<()> {
    let pid = agent.pid();
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").context("resetting VmHWM")?;
    let e0 = evaluations(agent)?;
    let (start, c0) = (Instant::now(), cpu_s(pid)?);
    for n in 1..=EVALUATIONS {
        each()?;
        let due = INTERVAL * n;
        std::thread::sleep(due.saturating_sub(start.elapsed()));
    }
    let cpu = cpu_s(pid)? - c0;
    let (hwm, rss) = memory_mb(pid)?;
    let e1 = evaluations(agent)?;
    let per_eval_ms = cpu * 1e3 / f64::from(EVALUATIONS);
    let wall_ms = (e1.0 - e0.0) * 1e3 / (e1.1 - e0.1).max(1.0);
    println!(
        "{flows:>8} flows, {name:<12}: agent peak RSS {hwm:.1} MB, RSS {rss:.1} MB | CPU {per_eval_ms:.0} ms \
         per evaluation ({:.2} % of a core at a 10 s interval) | an evaluation {wall_ms:.0} ms \
         ({:.0} evaluations)",
        per_eval_ms / 10_000.0 * 100.0,
        e1.1 - e0.1
    );
    Ok(())
}

fn one_size(flows: u32) -> Result<()> {
    let pair = PairTopology::new(1500)?;
    let max = flows.to_string();
    let interval = format!("{}s", INTERVAL.as_secs());
    let agent = Agent::start(
        &pair.a,
        &["--no-probe", "--max-flows", &max, "--interval", &interval],
    )?;
    agent.poll(
        "/api/v1/interfaces/eth0",
        Duration::from_secs(30),
        "eth0 watched",
        |r| (r.status == 200 && r.json["watched"] == true).then_some(()),
    )?;
    let fill = Instant::now();
    send(&pair, flows, 1)?;
    let fill_s = fill.elapsed().as_secs_f64();
    // Let the agent close the windows of the fill before the phases.
    std::thread::sleep(INTERVAL * 2);
    let entries = table_entries(&pair)?;
    ensure!(
        entries >= u64::from(flows) * 9 / 10,
        "the agent's flow table holds {entries} flows of {flows} sent"
    );
    println!("{flows:>8} flows: filled in {fill_s:.1} s, the agent's table holds {entries}");
    phase(&agent, "idle", flows, || Ok(()))?;
    phase(&agent, "10 % active", flows, || send(&pair, flows, 10))?;
    Ok(())
}

#[test]
#[ignore = "a benchmark: prints figures (run with --ignored --nocapture)"]
fn agent_at_10k_100k_1m() -> Result<()> {
    lab_guard!();
    let sizes = std::env::var("ND_FLOWS").unwrap_or_else(|_| "10000,100000,1048576".into());
    for flows in sizes.split(',').filter_map(|s| s.trim().parse().ok()) {
        one_size(flows)?;
    }
    Ok(())
}

//! `netdoctor-bench`: what netdoctor's data plane costs, measured on a veth pair.
//!
//! Three paths (`--paths`, see [`lab::NetPath`]), each a lab of its own, interleave in
//! every round: local (the pair below), forwarded (a router's client-facing veth: nothing
//! local) and wireguard (wireguard-go's underlay veth). On each, netdoctor's default tc
//! configuration runs beside the floor and NetObserv on the same packets, and [`paths`]
//! reports per path and direction the Δs, their ratio and the verdict against the targets;
//! [`quiet`] idles before every round to tell a busy machine, whose run counts for nothing.
//! The rest of this note describes the local path's sections.
//!
//! Builds a [`PairTopology`] (`a/eth0` 10.201.0.1 — `b/eth0` 10.201.0.2), runs iperf3 TCP
//! a→b (one stream, default congestion control) and, round after round, alternates runs
//! with nothing attached (baseline) and runs with `netdoctor flows` watching one end of the
//! link in each configuration:
//!
//! * `tc`: default on veth (tcx ingress + egress; this host's own TCP, here all of iperf3's,
//!   on the minimal path of the default `--local-tcp sockets`),
//! * `tc-packets`: the same with `--local-tcp packets` (this host's TCP accounted per flow
//!   in the flow table, like forwarded traffic),
//! * `xdp-generic`: `--ingress xdp --xdp-mode generic` (XDP ingress + tc egress),
//! * `xdp-native`: `--ingress xdp --xdp-mode native` (veth has native XDP).
//!
//! Throughput is compared as medians (single iperf3 runs vary ±10-20 % here). The
//! per-packet cost comes from the kernel's BPF run-time statistics (`run_cnt`,
//! `run_time_ns` per program): on this machine the clock reads of that accounting alone cost
//! ~100 ns per run, so every figure is reported beside the *floor*, the ns/run of empty
//! programs (`tests/bpf/floor.bpf.c`) on the same hooks, and the data-plane cost is the
//! difference. tc floors run in the same iperf3 runs on the same tcx hooks, in front of
//! netdoctor's programs (the first program of a chain pays the chain's shared cache misses;
//! see [`floor`]); an interface takes only one XDP program, so the XDP floor comes from a
//! separate run of the same configuration with the empty programs in netdoctor's place
//! (whose throughput is reported too: it is what XDP itself costs, whatever the program).
//!
//! Because the throughput ratio cannot resolve a cost of 1 % here, the report also gives
//! each configuration's *CPU share*: the programs' run time above the floor (Δ × runs) over
//! the CPU time the machine spent busy during the same run (`/proc/stat`: user, nice,
//! system, irq, softirq; steal left out). A transfer bound by CPU loses about that share of
//! its throughput to netdoctor.
//!
//! netdoctor's programs are identified by id: the `nd_*` programs whose id appeared after
//! that netdoctor process started *and* that are attached to the watched interface (other
//! netdoctor processes on the machine may have `nd_*` programs loaded).
//!
//! The `tracing` section (on by default; `--configs tracing` alone runs only it) measures
//! netdoctor's tracing programs per event, loaded as the product loads them: `netdoctor
//! flows` (iter/tcp `nd_iter_tcp`, tp_btf `nd_tcp_retransmit` and `nd_sock_state`, which
//! snapshots all sockets at the start and the end of its window) and `netdoctor drops`
//! (tp_btf `nd_kfree_skb`), each run in the watched namespace and stopped with SIGINT. For
//! each command: an idle window (nothing generated), then a load window: iperf3 a→b with
//! random loss on `b/eth0` ingress (nft; retransmissions and drops) and a loop of short TCP
//! connections over `lo` in the watched namespace (socket state changes; kept off the lossy
//! link, where one lost SYN stalls a connection for a second). Tracepoints fire in every
//! namespace, so other activity on the machine counts too. There is no empty program for
//! tracepoints, so ns/event is raw; the empty tc programs attached to the watched interface
//! in the same window are printed beside it: that is what the statistics' clock reads cost.
//! The kernel counts one iter/tcp run per socket visited plus a closing run, so the
//! snapshot cost is reported per snapshot and per socket, beside `ss -tan`'s count. These
//! programs are identified by the ids the netdoctor process holds (`/proc/PID/fdinfo`),
//! kept open so that the end-of-window snapshot can still be read after netdoctor exits.
//!
//! The `agent` section (on by default; `--configs agent` alone runs only it) measures the
//! always-on `netdoctor agent` as a process: it runs in the watched namespace (`--interval
//! 10s --no-probe`, a temporary database, the API on that namespace's loopback) and watches
//! its veth end. Idle: no traffic for `--agent-idle` seconds; CPU is Δ(utime + stime) of
//! `/proc/PID/stat` over the window, as % of one core; memory is VmRSS and the peak VmHWM of
//! `/proc/PID/status`. Every window runs from the middle of one evaluation interval to the
//! middle of another, so that it holds whole evaluations (evaluations run every 10 s from
//! the agent's start; `/readyz` turns 200 when the first one ends). Load: per round, an
//! iperf3 run with nothing attached (baseline), then a fresh agent and the same iperf3 run
//! with it watching, CPU measured from the start of the run to the middle of the interval
//! after it (so it includes the evaluation of that traffic); each agent is stopped with
//! SIGTERM and must exit 0 and leave nothing attached. The agent's own `/metrics` gives
//! the evaluation time (`netdoctor_evaluation_duration_seconds` sum/count) and the number
//! of series it exposes; scrapes happen between windows, never inside one. BPF statistics
//! are off in this section (they would slow the agent's programs down).
//!
//! Statistics are switched on with `BPF_ENABLE_STATS` (the mechanism behind
//! `kernel.bpf_stats_enabled`): the kernel switches them off again when the benchmark's
//! descriptor closes, even if it is killed, and the sysctl itself is never written.
//!
//! Run as root: `bash .ci/bench [--duration 5] [--rounds 3] [--json] ...`; `--help` lists
//! the options. Text goes to stdout, progress to stderr; `--json` prints one JSON document.
//!
//! One module per section: [`args`] (the command line), [`programs`] (hook and program
//! ids, statistics), [`floor`] and [`lab`] (what every section uses), [`packet`] (the
//! packet runs), [`peer`] (NetObserv's tc programs, measured in the same tc runs),
//! [`tracing`], [`agent`], [`tables`], [`sidebyside`] and [`paths`] (summaries of the packet
//! runs), [`quiet`] (busy machine), [`machine`] and [`report`] (text and JSON); this file
//! holds the targets and the plan.

mod agent;
mod args;
mod floor;
mod lab;
mod machine;
mod packet;
mod paths;
mod peer;
mod programs;
mod quiet;
mod report;
mod sidebyside;
mod tables;
mod tracing;

use std::mem::MaybeUninit;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use anyhow::{ensure, Context, Result};
use netdoctor_lab::bpf::StatsGuard;
use netdoctor_lab::ci;
use nix::sys::signal::Signal;

use agent::run_agent;
use args::{Args, Config};
use floor::Floor;
use lab::{Lab, NetPath};
use machine::{loadavg, machine};
use packet::run::Kind;
use packet::{progress, run_once};
use peer::Peer;
use quiet::Quiet;
use report::Report;
use tracing::run_tracing;

/// Data-plane targets of the foundation issue.
pub(crate) const TARGET_RATIO: f64 = 0.99;
pub(crate) const TARGET_NS_ABOVE_FLOOR: f64 = 40.0;
pub(crate) const IPERF_PORT: u16 = 5201;
/// Needle netdoctor prints on stderr once its programs are attached.
pub(crate) const WATCHING: &str = "netdoctor: watching";
/// The --configs entry selecting the tracing-program section.
pub(crate) const TRACING: &str = "tracing";
/// The --configs entry selecting the agent section.
pub(crate) const AGENT: &str = "agent";
/// Agent targets (issue 5): resident memory and idle CPU.
pub(crate) const TARGET_AGENT_RSS_MB: f64 = 20.0;
pub(crate) const TARGET_AGENT_IDLE_CPU_PERCENT: f64 = 0.5;

/// Set by SIGINT/SIGTERM: stop after the current run and clean up.
pub(crate) static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_stop_signal(_: i32) {
    STOP.store(true, Ordering::SeqCst);
}

fn install_signal_handlers() -> Result<()> {
    use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet};
    let action = SigAction::new(
        SigHandler::Handler(on_stop_signal),
        SaFlags::empty(),
        SigSet::empty(),
    );
    for sig in [Signal::SIGINT, Signal::SIGTERM] {
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
        unsafe { sigaction(sig, &action) }
            .with_context(|| format!("installing a {sig} handler"))?;
    }
    Ok(())
}

/// One run of the plan: path, what is attached, round, iperf3 seconds, streams.
type Step = (NetPath, Kind, u32, u32, u32);

/// The plan: per round, on the local path a baseline before each configuration (so `tc`
/// and `tc-packets` alternate within every round; XDP configurations are followed by their
/// floor run), then netdoctor's default configuration on each other path: the paths
/// interleave in every round.
fn plan(args: &Args) -> Vec<Step> {
    let mut steps = Vec::new();
    let local = args.paths.contains(NetPath::Local);
    for round in 0..args.rounds {
        for &config in args.configs.packet.iter().filter(|_| local) {
            steps.push((NetPath::Local, Kind::Baseline, round, args.duration, 1));
            let attached = Kind::Netdoctor(config);
            steps.push((NetPath::Local, attached, round, args.duration, 1));
            if !config.is_tc() {
                let floor = Kind::Floor(config);
                steps.push((NetPath::Local, floor, round, args.duration, 1));
            }
        }
        for path in args.paths.remote() {
            steps.push((path, Kind::Netdoctor(Config::Tc), round, args.duration, 1));
        }
    }
    // The many-flows runs belong to the packet section: none when it measures nothing.
    if args.parallel > 1 && local {
        for config in args.configs.many_flows() {
            let (secs, n) = (args.parallel_duration, args.parallel);
            steps.push((NetPath::Local, Kind::Baseline, 0, secs, n));
            steps.push((NetPath::Local, Kind::Netdoctor(config), 0, secs, n));
        }
    }
    steps
}

/// The labs of the selected paths other than the local one, warmed up.
fn remote_labs(args: &Args) -> Result<Vec<Lab>> {
    let mut labs = Vec::new();
    for path in args.paths.remote() {
        eprintln!("netdoctor-bench: building the {} path", path.name());
        let lab =
            Lab::for_path(path).with_context(|| format!("building the {} path", path.name()))?;
        lab.iperf(1, 1)
            .with_context(|| format!("warm-up iperf3 run on the {} path", path.name()))?;
        labs.push(lab);
    }
    Ok(labs)
}

fn run(args: &Args) -> Result<ExitCode> {
    let mut tools = vec!["iperf3", "ss", "date"];
    if args.configs.tracing {
        tools.push("nft");
    }
    if args.configs.agent {
        tools.push("getconf");
    }
    if !(ci::require_bpf_or_skip() && ci::require_tools_or_skip(&tools)) {
        return Ok(ExitCode::from(2));
    }
    ensure!(
        args.netdoctor.is_file(),
        "netdoctor binary {} not found: build it (cargo build --release -p netdoctor) or pass --netdoctor",
        args.netdoctor.display()
    );
    let netdoctor = args
        .netdoctor
        .canonicalize()
        .context("resolving the netdoctor path")?
        .to_string_lossy()
        .into_owned();
    install_signal_handlers()?;
    let mut machine = machine();

    let mut storage = MaybeUninit::uninit();
    let floor = Floor::load(&mut storage)?;
    // Only the packet and tracing sections read BPF statistics; the agent's is measured
    // without them (they slow every program run down).
    let stats = if args.configs.tracing || !args.configs.packet.is_empty() {
        Some(StatsGuard::enable()?)
    } else {
        None
    };
    if args.configs.packet.contains(&Config::TcPackets) {
        lab::require_local_tcp(&netdoctor)?;
    }
    let local = args.paths.contains(NetPath::Local);
    let peer = if (local && !args.configs.tc().is_empty()) || !args.paths.remote().is_empty() {
        Peer::load(&args.peer).context("loading NetObserv's tc object")?
    } else {
        None
    };
    let peer_note = peer.is_none().then(|| {
        format!(
            "skipped: no {} in {} (NetObserv's committed x86 tc object; --peer DIR)",
            peer::OBJECT,
            args.peer.display()
        )
    });
    if let Some(note) = &peer_note {
        eprintln!("netdoctor-bench: side by side with NetObserv {note}");
    }
    let lab = Lab::new(args.side)?;
    let labs = remote_labs(args)?;

    eprintln!("netdoctor-bench: warm-up run");
    let warm = lab.iperf(1, 1).context("warm-up iperf3 run")?;
    let cc = warm.sender_congestion.clone().unwrap_or_else(|| "?".into());

    let steps = plan(args);
    let total = steps.len();
    let mut runs = Vec::with_capacity(total);
    let mut quiet = Quiet::start();
    let mut probed = None;
    for (i, (path, kind, round, secs, parallel)) in steps.into_iter().enumerate() {
        if probed != Some(round) {
            quiet.probe();
            probed = Some(round);
        }
        let here = std::iter::once(&lab)
            .chain(&labs)
            .find(|l| l.path == path)
            .context("no lab for the path")?;
        let run = run_once(
            here,
            &floor,
            peer.as_ref(),
            &netdoctor,
            kind,
            round,
            secs,
            parallel,
        )
        .with_context(|| {
            let what = format!("{} {}", path.name(), kind.label());
            format!("run {} ({what}, round {})", i + 1, round + 1)
        })?;
        progress(&run, total, i + 1);
        runs.push(run);
    }
    quiet.finish();
    drop(labs);
    let path_rows = paths::path_rows(&runs, &args.paths.0);
    runs.retain(|r| r.path == NetPath::Local);
    let tracing = if args.configs.tracing {
        let started = Instant::now();
        let t = run_tracing(&lab, &floor, &netdoctor, args).context("tracing section")?;
        eprintln!(
            "netdoctor-bench: tracing section took {:.1} s",
            started.elapsed().as_secs_f64()
        );
        Some(t)
    } else {
        None
    };
    drop(stats);
    let agent = if args.configs.agent {
        let started = Instant::now();
        let a = run_agent(&lab, &netdoctor, args).context("agent section")?;
        eprintln!(
            "netdoctor-bench: agent section took {:.1} s",
            started.elapsed().as_secs_f64()
        );
        Some(a)
    } else {
        None
    };
    drop(lab);
    machine.loadavg_end = loadavg();

    let report = Report {
        args,
        machine,
        cc,
        runs,
        tracing,
        agent,
        peer_note,
        path_rows,
        quiet,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report.json())?);
    } else {
        report.print_text();
    }
    Ok(ExitCode::SUCCESS)
}

fn main() -> ExitCode {
    let args = match Args::from_command_line() {
        Ok(args) => args,
        Err(e) => {
            eprintln!("netdoctor-bench: {e:#}");
            return ExitCode::from(2);
        }
    };
    match run(&args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("netdoctor-bench: {e:#}");
            ExitCode::FAILURE
        }
    }
}

//! `netdoctor-bench`: what netdoctor's data plane costs, measured on a veth pair.
//!
//! Builds a [`PairTopology`] (`a/eth0` 10.201.0.1 — `b/eth0` 10.201.0.2), runs iperf3 TCP
//! a→b (one stream, default congestion control) and, round after round, alternates runs
//! with nothing attached (baseline) and runs with `netdoctor flows` watching one end of the
//! link in each configuration:
//!
//! * `tc`: default on veth (tcx ingress + egress),
//! * `xdp-generic`: `--ingress xdp --xdp-mode generic` (XDP ingress + tc egress),
//! * `xdp-native`: `--ingress xdp --xdp-mode native` (veth has native XDP).
//!
//! Throughput is compared as medians (single iperf3 runs vary ±10-20 % here). The
//! per-packet cost comes from the kernel's BPF run-time statistics (`run_cnt`,
//! `run_time_ns` per program): on this machine the clock reads of that accounting alone cost
//! ~100 ns per run, so every figure is reported beside the *floor*, the ns/run of empty
//! programs (`tests/bpf/floor.bpf.c`) on the same hooks, and the data-plane cost is the
//! difference. tc floors run in the same iperf3 runs, behind netdoctor's programs on the
//! same tcx hooks; an interface takes only one XDP program, so the XDP floor comes from a
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

mod agent;

use agent::{run_agent, AgentBench};

use std::collections::{HashMap, HashSet};
use std::io::{self, Read, Write};
use std::mem::MaybeUninit;
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use libbpf_rs::libbpf_sys;
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::OpenObject;
use netdoctor_lab::bpf::floor::{FloorSkel, FloorSkelBuilder};
use netdoctor_lab::bpf::{link_create, prog_info, StatsGuard};
use netdoctor_lab::{
    ci, cmd, traffic, BgProcess, Direction, Iperf3Opts, Iperf3Server, Netns, PacketLoss,
    PairTopology,
};
use nix::sys::signal::Signal;
use serde_json::{json, Value};

/// Data-plane targets of the foundation issue.
const TARGET_RATIO: f64 = 0.99;
const TARGET_NS_ABOVE_FLOOR: f64 = 40.0;
const IPERF_PORT: u16 = 5201;
/// Needle netdoctor prints on stderr once its programs are attached.
const WATCHING: &str = "netdoctor: watching";
/// The --configs entry selecting the tracing-program section.
const TRACING: &str = "tracing";
/// The --configs entry selecting the agent section.
const AGENT: &str = "agent";
/// Agent targets (issue 5): resident memory and idle CPU.
const TARGET_AGENT_RSS_MB: f64 = 20.0;
const TARGET_AGENT_IDLE_CPU_PERCENT: f64 = 0.5;

/// Set by SIGINT/SIGTERM: stop after the current run and clean up.
static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_stop_signal(_: i32) {
    STOP.store(true, Ordering::SeqCst);
}

// ---------------------------------------------------------------------------------------
// Options
// ---------------------------------------------------------------------------------------

/// Which end of the link netdoctor watches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    /// `b/eth0`: ingress carries the data (GSO super-packets), egress the ACKs.
    Receiver,
    /// `a/eth0`: egress carries the data, ingress the ACKs.
    Sender,
}

impl Side {
    fn name(self) -> &'static str {
        match self {
            Side::Receiver => "receiver",
            Side::Sender => "sender",
        }
    }
}

/// A netdoctor configuration under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Config {
    Tc,
    XdpGeneric,
    XdpNative,
}

impl Config {
    const ALL: [Config; 3] = [Config::Tc, Config::XdpGeneric, Config::XdpNative];

    fn name(self) -> &'static str {
        match self {
            Config::Tc => "tc",
            Config::XdpGeneric => "xdp-generic",
            Config::XdpNative => "xdp-native",
        }
    }

    fn parse(s: &str) -> Result<Config> {
        Config::ALL
            .into_iter()
            .find(|c| c.name() == s)
            .with_context(|| {
                format!("unknown configuration {s:?} (tc, xdp-generic, xdp-native, tracing, agent)")
            })
    }

    /// netdoctor's flags for this configuration (`tc` uses the default, which must pick tc
    /// on veth; the run checks the hooks netdoctor reports).
    fn netdoctor_args(self) -> &'static [&'static str] {
        match self {
            Config::Tc => &[],
            Config::XdpGeneric => &["--ingress", "xdp", "--xdp-mode", "generic"],
            Config::XdpNative => &["--ingress", "xdp", "--xdp-mode", "native"],
        }
    }

    /// The ingress hook netdoctor must report (`hooks.ingress`).
    fn expected_ingress(self) -> &'static str {
        match self {
            Config::Tc => "tc",
            Config::XdpGeneric => "xdp-generic",
            Config::XdpNative => "xdp-native",
        }
    }

    /// XDP attach flags of the empty XDP program standing in for netdoctor's.
    fn xdp_flags(self) -> Option<u32> {
        match self {
            Config::Tc => None,
            Config::XdpGeneric => Some(libbpf_sys::XDP_FLAGS_SKB_MODE),
            Config::XdpNative => Some(libbpf_sys::XDP_FLAGS_DRV_MODE),
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Config::Tc => "netdoctor tc in+out (default)",
            Config::XdpGeneric => "netdoctor xdp-generic in + tc out",
            Config::XdpNative => "netdoctor xdp-native in + tc out",
        }
    }

    fn describe_floor(self) -> &'static str {
        match self {
            Config::Tc => "empty tc in+out",
            Config::XdpGeneric => "empty xdp-generic in + tc out",
            Config::XdpNative => "empty xdp-native in + tc out",
        }
    }
}

#[derive(Debug, Clone)]
struct Args {
    duration: u32,
    rounds: u32,
    parallel: u32,
    parallel_duration: u32,
    json: bool,
    netdoctor: PathBuf,
    side: Side,
    /// Packet configurations (the `tracing` and `agent` entries of --configs are the
    /// booleans below).
    configs: Vec<Config>,
    /// Measure the tracing programs (`tracing` in --configs).
    tracing: bool,
    tracing_duration: u32,
    tracing_loss: u8,
    /// Measure the agent process (`agent` in --configs).
    agent: bool,
    agent_idle: u32,
}

const USAGE: &str = "\
netdoctor-bench: throughput and per-packet cost of netdoctor's data plane on a veth pair

USAGE: netdoctor-bench [OPTIONS]   (root; build first: cargo build --release -p netdoctor)

OPTIONS:
  --duration SECS           iperf3 time per run (default 5)
  --rounds N                alternations of baseline and attached runs (default 3)
  --parallel N              streams of the extra many-flows tc run, 0 skips it (default 8)
  --parallel-duration SECS  iperf3 time of that run (default 3)
  --side receiver|sender    end netdoctor watches: b/eth0 (receiver, default: ingress sees
                            the data, so XDP handles GSO super-packets) or a/eth0 (sender)
  --configs LIST            comma-separated subset of tc,xdp-generic,xdp-native,tracing,agent
                            (default all); tracing = per-event cost of the socket probes
                            (netdoctor flows) and the kfree_skb program (netdoctor drops);
                            agent = RSS and CPU of `netdoctor agent`, idle and under iperf3
                            (--rounds runs of --duration s against baselines; ~2.5 min)
  --tracing-duration SECS   load window per tracing command (default 6; plus 2 s idle each)
  --tracing-loss PCT        random loss on the receiver's ingress during it (default 3)
  --agent-idle SECS         the agent's idle window (default 30: three evaluations)
  --netdoctor PATH          netdoctor binary (default: next to this binary)
  --json                    print one JSON document instead of the text report
  -h, --help                this text
";

fn parse_args() -> Result<Option<Args>> {
    let exe_dir = std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("."));
    let mut args = Args {
        duration: 5,
        rounds: 3,
        parallel: 8,
        parallel_duration: 3,
        json: false,
        netdoctor: exe_dir.join("netdoctor"),
        side: Side::Receiver,
        configs: Config::ALL.to_vec(),
        tracing: true,
        tracing_duration: 6,
        tracing_loss: 3,
        agent: true,
        agent_idle: 30,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_owned(), Some(v.to_owned())),
            _ => (arg.clone(), None),
        };
        let mut value = || -> Result<String> {
            match &inline {
                Some(v) => Ok(v.clone()),
                None => it.next().with_context(|| format!("{flag} needs a value")),
            }
        };
        let number = |v: String| -> Result<u32> {
            v.parse::<u32>()
                .with_context(|| format!("{flag}: {v:?} is not a whole number"))
        };
        match flag.as_str() {
            "-h" | "--help" => {
                print!("{USAGE}");
                return Ok(None);
            }
            "--duration" => args.duration = number(value()?)?,
            "--rounds" => args.rounds = number(value()?)?,
            "--parallel" => args.parallel = number(value()?)?,
            "--parallel-duration" => args.parallel_duration = number(value()?)?,
            "--json" => args.json = true,
            "--netdoctor" => args.netdoctor = PathBuf::from(value()?),
            "--side" => {
                args.side = match value()?.as_str() {
                    "receiver" => Side::Receiver,
                    "sender" => Side::Sender,
                    other => bail!("--side: {other:?} is neither receiver nor sender"),
                }
            }
            "--configs" => {
                let list = value()?;
                let items: Vec<&str> = list.split(',').filter(|s| !s.is_empty()).collect();
                args.tracing = items.contains(&TRACING);
                args.agent = items.contains(&AGENT);
                args.configs = items
                    .into_iter()
                    .filter(|s| *s != TRACING && *s != AGENT)
                    .map(Config::parse)
                    .collect::<Result<_>>()?;
            }
            "--tracing-duration" => args.tracing_duration = number(value()?)?,
            "--tracing-loss" => {
                args.tracing_loss = u8::try_from(number(value()?)?)
                    .ok()
                    .filter(|p| *p <= 100)
                    .context("--tracing-loss must be a percentage (0-100)")?;
            }
            "--agent-idle" => args.agent_idle = number(value()?)?,
            other => bail!("unknown argument {other:?}; see --help"),
        }
    }
    ensure!(args.duration >= 1, "--duration must be at least 1 s");
    ensure!(args.rounds >= 1, "--rounds must be at least 1");
    ensure!(
        args.tracing_duration >= 1,
        "--tracing-duration must be at least 1 s"
    );
    ensure!(args.agent_idle >= 1, "--agent-idle must be at least 1 s");
    ensure!(
        args.tracing || args.agent || !args.configs.is_empty(),
        "--configs selects nothing to measure"
    );
    ensure!(
        args.parallel == 0 || args.parallel_duration >= 1,
        "--parallel-duration must be at least 1 s"
    );
    Ok(Some(args))
}

// ---------------------------------------------------------------------------------------
// Kernel plumbing: stats, links, queries
// ---------------------------------------------------------------------------------------

/// Ids of the programs on a tcx hook of `ifindex`, in chain order.
fn tcx_prog_ids(ifindex: u32, attach_type: u32) -> io::Result<Vec<u32>> {
    let mut ids = [0u32; 64];
    let mut opts = libbpf_sys::bpf_prog_query_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_prog_query_opts>() as _,
        prog_ids: ids.as_mut_ptr(),
        ..Default::default()
    };
    opts.__bindgen_anon_1.prog_cnt = ids.len() as u32;
    let target = i32::try_from(ifindex).map_err(|_| io::Error::other("ifindex out of range"))?;
    // SAFETY: `opts.prog_ids` points at `ids`, which holds `prog_cnt` entries and outlives
    // the call; `opts` is otherwise zero-initialised with a matching `sz`.
    let rc = unsafe { libbpf_sys::bpf_prog_query_opts(target, attach_type, &mut opts) };
    if rc < 0 {
        return Err(io::Error::from_raw_os_error(-rc));
    }
    // SAFETY: both union members are the same `u32`; the kernel wrote the count.
    let n = unsafe { opts.__bindgen_anon_1.prog_cnt } as usize;
    Ok(ids[..n.min(ids.len())].to_vec())
}

/// The XDP program attached to `ifindex` in any mode (0 for none).
fn xdp_prog_id(ifindex: u32) -> io::Result<u32> {
    let mut opts = libbpf_sys::bpf_xdp_query_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_xdp_query_opts>() as _,
        ..Default::default()
    };
    let target = i32::try_from(ifindex).map_err(|_| io::Error::other("ifindex out of range"))?;
    // SAFETY: `opts` is a valid, initialised options struct that outlives the call.
    let rc = unsafe { libbpf_sys::bpf_xdp_query(target, 0, &mut opts) };
    if rc < 0 {
        return Err(io::Error::from_raw_os_error(-rc));
    }
    Ok([opts.prog_id, opts.drv_prog_id, opts.skb_prog_id]
        .into_iter()
        .find(|&id| id != 0)
        .unwrap_or(0))
}

/// Program ids attached to one interface.
#[derive(Debug, Clone, Default)]
struct HookIds {
    xdp: u32,
    tc_in: Vec<u32>,
    tc_out: Vec<u32>,
}

impl HookIds {
    fn contains(&self, id: u32) -> bool {
        self.xdp == id || self.tc_in.contains(&id) || self.tc_out.contains(&id)
    }
}

fn query_hooks(ns: &Netns, ifindex: u32) -> Result<HookIds> {
    ns.run_in(move || -> io::Result<HookIds> {
        Ok(HookIds {
            xdp: xdp_prog_id(ifindex)?,
            tc_in: tcx_prog_ids(ifindex, libbpf_sys::BPF_TCX_INGRESS)?,
            tc_out: tcx_prog_ids(ifindex, libbpf_sys::BPF_TCX_EGRESS)?,
        })
    })?
    .context("querying the programs attached to the watched interface")
}

/// One program's cumulative statistics.
#[derive(Debug, Clone)]
struct ProgStat {
    name: String,
    run_cnt: u64,
    run_time_ns: u64,
}

/// Names and statistics of every loaded program.
fn all_programs() -> HashMap<u32, ProgStat> {
    libbpf_rs::query::ProgInfoIter::default()
        .map(|p| {
            (
                p.id,
                ProgStat {
                    name: p.name.to_string_lossy().into_owned(),
                    run_cnt: p.run_cnt,
                    run_time_ns: p.run_time_ns,
                },
            )
        })
        .collect()
}

// ---------------------------------------------------------------------------------------
// Runs
// ---------------------------------------------------------------------------------------

/// Hook a measured program runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Hook {
    Xdp,
    TcIn,
    TcOut,
}

impl Hook {
    fn name(self) -> &'static str {
        match self {
            Hook::Xdp => "xdp",
            Hook::TcIn => "tc-in",
            Hook::TcOut => "tc-out",
        }
    }

    fn from_netdoctor_name(name: &str) -> Option<Hook> {
        match name {
            "nd_xdp_ingress" => Some(Hook::Xdp),
            "nd_tc_ingress" => Some(Hook::TcIn),
            "nd_tc_egress" => Some(Hook::TcOut),
            _ => None,
        }
    }

    fn ingress(self) -> bool {
        self != Hook::TcOut
    }
}

/// Whose program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Netdoctor,
    Floor,
}

/// What a run has attached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Baseline,
    /// netdoctor in this configuration, plus the empty tc programs behind it.
    Netdoctor(Config),
    /// Only the empty programs, in the configuration's hook layout (XDP floor runs).
    Floor(Config),
}

impl Kind {
    fn label(self) -> String {
        match self {
            Kind::Baseline => "baseline".into(),
            Kind::Netdoctor(c) => c.name().into(),
            Kind::Floor(c) => format!("floor-{}", c.name()),
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Kind::Baseline => "baseline (nothing attached)",
            Kind::Netdoctor(c) => c.describe(),
            Kind::Floor(c) => c.describe_floor(),
        }
    }
}

/// One program measured over one iperf3 run.
#[derive(Debug, Clone)]
struct ProgRun {
    role: Role,
    hook: Hook,
    name: String,
    id: u32,
    runs: u64,
    run_time_ns: u64,
}

impl ProgRun {
    fn ns_per_run(&self) -> Option<f64> {
        (self.runs > 0).then(|| self.run_time_ns as f64 / self.runs as f64)
    }
}

/// Packets and segments one direction of netdoctor's counters saw.
#[derive(Debug, Clone, Copy, Default)]
struct DirCount {
    packets: u64,
    segments: u64,
}

impl DirCount {
    fn from_json(v: &Value) -> DirCount {
        let u = |k: &str| v.get(k).and_then(Value::as_u64).unwrap_or(0);
        DirCount {
            packets: u("packets"),
            segments: u("segments"),
        }
    }

    fn segments_per_packet(self) -> Option<f64> {
        (self.packets > 0).then(|| self.segments as f64 / self.packets as f64)
    }
}

/// The result of one iperf3 run.
#[derive(Debug, Clone)]
struct Run {
    kind: Kind,
    round: u32,
    parallel: u32,
    /// iperf3 test length.
    secs: u32,
    /// Wall-clock time of the whole run (netdoctor start and stop included).
    duration_s: f64,
    gbps: f64,
    retransmits: Option<u64>,
    programs: Vec<ProgRun>,
    /// `counters.ingress` / `counters.egress` of netdoctor's JSON report.
    counters: Option<(DirCount, DirCount)>,
    flows_total: Option<u64>,
    /// The hooks netdoctor reported (`hooks.ingress`).
    ingress_hook: Option<String>,
    /// CPU time the machine spent busy during the iperf3 run (see [`cpu_busy_ns`]).
    cpu_busy_ns: Option<u64>,
}

impl Run {
    fn prog(&self, role: Role, hook: Hook) -> Option<&ProgRun> {
        self.programs
            .iter()
            .find(|p| p.role == role && p.hook == hook)
    }

    fn segments_per_run(&self, hook: Hook) -> Option<f64> {
        let (ingress, egress) = self.counters?;
        if hook.ingress() {
            ingress.segments_per_packet()
        } else {
            egress.segments_per_packet()
        }
    }
}

/// The empty programs, loaded once; attached per run.
struct Floor<'obj> {
    skel: FloorSkel<'obj>,
    xdp_id: u32,
    tc_in_id: u32,
    tc_out_id: u32,
}

impl std::fmt::Debug for Floor<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Floor")
            .field("xdp_id", &self.xdp_id)
            .field("tc_in_id", &self.tc_in_id)
            .field("tc_out_id", &self.tc_out_id)
            .finish()
    }
}

impl<'obj> Floor<'obj> {
    fn load(storage: &'obj mut MaybeUninit<OpenObject>) -> Result<Floor<'obj>> {
        let open = FloorSkelBuilder::default()
            .open(storage)
            .context("opening the floor programs")?;
        let skel = open.load().context("loading the floor programs")?;
        let id = |fd| libbpf_rs::Program::id_from_fd(fd).context("floor program id");
        Ok(Floor {
            xdp_id: id(skel.progs.floor_xdp.as_fd())?,
            tc_in_id: id(skel.progs.floor_tc_in.as_fd())?,
            tc_out_id: id(skel.progs.floor_tc_out.as_fd())?,
            skel,
        })
    }

    fn id(&self, hook: Hook) -> u32 {
        match hook {
            Hook::Xdp => self.xdp_id,
            Hook::TcIn => self.tc_in_id,
            Hook::TcOut => self.tc_out_id,
        }
    }

    /// Cumulative statistics of the empty program for `hook`.
    fn counter(&self, hook: Hook) -> io::Result<Counter> {
        Counter::read(match hook {
            Hook::Xdp => self.skel.progs.floor_xdp.as_fd(),
            Hook::TcIn => self.skel.progs.floor_tc_in.as_fd(),
            Hook::TcOut => self.skel.progs.floor_tc_out.as_fd(),
        })
    }

    /// Attaches the empty programs on `hooks` of the watched interface; they stay attached
    /// while the returned descriptors are open. tcx appends them behind what is there.
    fn attach(
        &self,
        ns: &Netns,
        ifindex: u32,
        hooks: &[Hook],
        xdp_flags: u32,
    ) -> Result<Vec<OwnedFd>> {
        let plan: Vec<(RawFd, u32, u32, &'static str)> = hooks
            .iter()
            .map(|h| match h {
                Hook::Xdp => (
                    self.skel.progs.floor_xdp.as_fd().as_raw_fd(),
                    libbpf_sys::BPF_XDP,
                    xdp_flags,
                    "xdp",
                ),
                Hook::TcIn => (
                    self.skel.progs.floor_tc_in.as_fd().as_raw_fd(),
                    libbpf_sys::BPF_TCX_INGRESS,
                    0,
                    "tcx ingress",
                ),
                Hook::TcOut => (
                    self.skel.progs.floor_tc_out.as_fd().as_raw_fd(),
                    libbpf_sys::BPF_TCX_EGRESS,
                    0,
                    "tcx egress",
                ),
            })
            .collect();
        // The descriptors in `plan` belong to `self.skel`, which outlives this call.
        ns.run_in(move || -> Result<Vec<OwnedFd>> {
            plan.iter()
                .map(|&(fd, attach_type, flags, what)| {
                    link_create(fd, ifindex, attach_type, flags)
                        .with_context(|| format!("attaching the empty {what} program"))
                })
                .collect()
        })?
    }
}

/// The lab: topology, iperf3 server, watched interface.
struct Lab {
    topo: PairTopology,
    _server: Iperf3Server,
    side: Side,
    ifindex: u32,
}

impl std::fmt::Debug for Lab {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lab")
            .field("side", &self.side)
            .field("ifindex", &self.ifindex)
            .finish()
    }
}

impl Lab {
    fn new(side: Side) -> Result<Lab> {
        let topo = PairTopology::new(1500)?;
        let server = Iperf3Server::start(&topo.b, IPERF_PORT)?;
        let watched = match side {
            Side::Receiver => &topo.b,
            Side::Sender => &topo.a,
        };
        let json = watched.ip(&["-j", "link", "show", "dev", PairTopology::IFNAME])?;
        let v: Value = serde_json::from_str(&json).context("parsing `ip -j link show`")?;
        let ifindex = v
            .get(0)
            .and_then(|l| l.get("ifindex"))
            .and_then(Value::as_u64)
            .and_then(|i| u32::try_from(i).ok())
            .with_context(|| format!("no ifindex in {json}"))?;
        Ok(Lab {
            topo,
            _server: server,
            side,
            ifindex,
        })
    }

    fn watched(&self) -> &Netns {
        match self.side {
            Side::Receiver => &self.topo.b,
            Side::Sender => &self.topo.a,
        }
    }

    fn iperf(&self, secs: u32, parallel: u32) -> Result<traffic::Iperf3Report> {
        let mut opts = Iperf3Opts::new(PairTopology::B_IP);
        opts.port = IPERF_PORT;
        opts.duration_secs = secs;
        opts.parallel = parallel;
        traffic::iperf3_client(&self.topo.a, &opts)
    }
}

/// CPU time all CPUs spent busy since boot, in ns, from `/proc/stat`: user, nice, system,
/// irq and softirq. Idle, iowait and steal (time the hypervisor gave to someone else) are
/// left out.
fn cpu_busy_ns(clk_tck: f64) -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    let ticks = v.first()? + v.get(1)? + v.get(2)? + v.get(5)? + v.get(6)?;
    Some((ticks as f64 / clk_tck * 1e9) as u64)
}

/// Runs `f` and returns, beside its result, the statistics deltas of the programs in `ids`
/// and how much CPU time the machine spent busy meanwhile.
fn measure<T>(
    ids: &[(Role, Hook, u32)],
    f: impl FnOnce() -> Result<T>,
) -> Result<(T, Vec<ProgRun>, Option<u64>)> {
    // Asked once (it runs `getconf`), not at every run.
    static CLK_TCK: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    let clk_tck = *CLK_TCK.get_or_init(agent::clk_tck);
    let busy_before = cpu_busy_ns(clk_tck);
    let before = all_programs();
    let out = f()?;
    let after = all_programs();
    let busy = cpu_busy_ns(clk_tck)
        .zip(busy_before)
        .map(|(b, a)| b.saturating_sub(a));
    let mut progs = Vec::new();
    for &(role, hook, id) in ids {
        let (Some(b), Some(a)) = (before.get(&id), after.get(&id)) else {
            bail!("program {id} vanished during the run");
        };
        progs.push(ProgRun {
            role,
            hook,
            name: a.name.clone(),
            id,
            runs: a.run_cnt.saturating_sub(b.run_cnt),
            run_time_ns: a.run_time_ns.saturating_sub(b.run_time_ns),
        });
    }
    Ok((out, progs, busy))
}

/// Starts `netdoctor flows` on the watched interface and finds its attached programs.
fn start_netdoctor(
    lab: &Lab,
    netdoctor: &str,
    config: Config,
) -> Result<(BgProcess, Vec<(Hook, u32)>)> {
    let known: HashSet<u32> = all_programs().into_keys().collect();
    let mut argv = vec![
        netdoctor,
        "flows",
        PairTopology::IFNAME,
        "--duration",
        "10m",
        "--json",
        "--top",
        "0",
    ];
    argv.extend_from_slice(config.netdoctor_args());
    let mut nd = lab.watched().spawn(&argv)?;
    nd.wait_for_output(WATCHING, Duration::from_secs(30))
        .context("netdoctor did not attach")?;
    let attached = query_hooks(lab.watched(), lab.ifindex)?;
    let mut found: Vec<(Hook, u32)> = all_programs()
        .into_iter()
        .filter(|(id, _)| !known.contains(id) && attached.contains(*id))
        .filter_map(|(id, p)| Hook::from_netdoctor_name(&p.name).map(|h| (h, id)))
        .collect();
    found.sort();
    let hooks: Vec<Hook> = found.iter().map(|(h, _)| *h).collect();
    let want: &[Hook] = match config {
        Config::Tc => &[Hook::TcIn, Hook::TcOut],
        Config::XdpGeneric | Config::XdpNative => &[Hook::Xdp, Hook::TcOut],
    };
    ensure!(
        hooks == want,
        "expected netdoctor's new programs on {want:?} of the watched interface, found {found:?} \
         (attached: {attached:?}); netdoctor stderr: {}",
        nd.stderr().unwrap_or_default().trim()
    );
    Ok((nd, found))
}

/// Stops netdoctor (SIGINT: it reports what it saw) and parses its JSON report.
fn finish_netdoctor(mut nd: BgProcess) -> Result<Value> {
    nd.signal(Signal::SIGINT)?;
    let status = nd.wait_timeout(Duration::from_secs(20))?;
    let stdout = nd.stdout()?;
    ensure!(
        status.success(),
        "netdoctor exited with {status}; stderr: {}",
        nd.stderr().unwrap_or_default().trim()
    );
    serde_json::from_str(&stdout)
        .with_context(|| format!("netdoctor's output is not JSON: {stdout}"))
}

fn run_once(
    lab: &Lab,
    floor: &Floor<'_>,
    netdoctor: &str,
    kind: Kind,
    round: u32,
    secs: u32,
    parallel: u32,
) -> Result<Run> {
    if STOP.load(Ordering::SeqCst) {
        bail!("interrupted");
    }
    let mut run = Run {
        kind,
        round,
        parallel,
        secs,
        duration_s: 0.0,
        gbps: 0.0,
        retransmits: None,
        programs: Vec::new(),
        counters: None,
        flows_total: None,
        ingress_hook: None,
        cpu_busy_ns: None,
    };
    let started = Instant::now();
    let report = match kind {
        Kind::Baseline => lab.iperf(secs, parallel)?,
        Kind::Netdoctor(config) => {
            let (nd, found) = start_netdoctor(lab, netdoctor, config)?;
            let floor_hooks: Vec<Hook> = found
                .iter()
                .map(|(h, _)| *h)
                .filter(|h| *h != Hook::Xdp)
                .collect();
            let links = floor.attach(lab.watched(), lab.ifindex, &floor_hooks, 0)?;
            let mut ids: Vec<(Role, Hook, u32)> = found
                .iter()
                .map(|&(h, id)| (Role::Netdoctor, h, id))
                .collect();
            ids.extend(floor_hooks.iter().map(|&h| (Role::Floor, h, floor.id(h))));
            let (report, progs, busy) = measure(&ids, || lab.iperf(secs, parallel))?;
            drop(links);
            run.cpu_busy_ns = busy;
            let json = finish_netdoctor(nd)?;
            let counters = json.get("counters").cloned().unwrap_or(Value::Null);
            run.counters = Some((
                DirCount::from_json(&counters["ingress"]),
                DirCount::from_json(&counters["egress"]),
            ));
            run.flows_total = json.get("flows_total").and_then(Value::as_u64);
            let ingress = json["hooks"]["ingress"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            ensure!(
                ingress == config.expected_ingress(),
                "netdoctor used ingress hook {ingress:?}, expected {:?}",
                config.expected_ingress()
            );
            run.ingress_hook = Some(ingress);
            run.programs = progs;
            report
        }
        Kind::Floor(config) => {
            let hooks: &[Hook] = match config {
                Config::Tc => &[Hook::TcIn, Hook::TcOut],
                Config::XdpGeneric | Config::XdpNative => &[Hook::Xdp, Hook::TcOut],
            };
            let links = floor.attach(
                lab.watched(),
                lab.ifindex,
                hooks,
                config.xdp_flags().unwrap_or(0),
            )?;
            let ids: Vec<(Role, Hook, u32)> = hooks
                .iter()
                .map(|&h| (Role::Floor, h, floor.id(h)))
                .collect();
            let (report, progs, busy) = measure(&ids, || lab.iperf(secs, parallel))?;
            drop(links);
            run.cpu_busy_ns = busy;
            run.programs = progs;
            report
        }
    };
    run.duration_s = started.elapsed().as_secs_f64();
    run.gbps = report.received_bits_per_second / 1e9;
    run.retransmits = report.retransmits;
    Ok(run)
}

fn progress(run: &Run, total: usize, done: usize) {
    let mut line = format!(
        "[{done:>2}/{total}] round {} {:<20} {:>6.2} Gbit/s",
        run.round + 1,
        if run.parallel > 1 {
            format!("{} -P {}", run.kind.label(), run.parallel)
        } else {
            run.kind.label()
        },
        run.gbps
    );
    for p in &run.programs {
        let who = match p.role {
            Role::Netdoctor => "nd",
            Role::Floor => "floor",
        };
        match p.ns_per_run() {
            Some(ns) => line.push_str(&format!("  {who} {} {ns:.0} ns/run", p.hook.name())),
            None => line.push_str(&format!("  {who} {} no runs", p.hook.name())),
        }
    }
    eprintln!("{line}");
}

// ---------------------------------------------------------------------------------------
// Tracing programs
// ---------------------------------------------------------------------------------------

/// Needle `netdoctor drops` prints on stderr once its program is attached.
const COUNTING_DROPS: &str = "netdoctor: counting kernel drops";
/// Idle window before each load window: nothing generated.
const TRACING_IDLE: Duration = Duration::from_secs(2);
/// Request and reply size of one short connection.
const SHORT_CONN_BYTES: usize = 64;
/// The kernel keeps 15 characters of a program's name (BPF_OBJ_NAME_LEN − 1).
const BPF_NAME_MAX: usize = 15;

/// A netdoctor tracing program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct TraceProg {
    /// Function name in `ebpf/*.bpf.c`.
    name: &'static str,
    /// ELF section (hook).
    section: &'static str,
    /// The netdoctor command that loads it.
    command: &'static str,
}

impl TraceProg {
    /// The name as the kernel reports it.
    fn kernel_name(self) -> &'static str {
        &self.name[..self.name.len().min(BPF_NAME_MAX)]
    }
}

const ND_TCP_RETRANSMIT: TraceProg = TraceProg {
    name: "nd_tcp_retransmit",
    section: "tp_btf/tcp_retransmit_skb",
    command: "flows",
};
const ND_SOCK_STATE: TraceProg = TraceProg {
    name: "nd_sock_state",
    section: "tp_btf/inet_sock_set_state",
    command: "flows",
};
const ND_ITER_TCP: TraceProg = TraceProg {
    name: "nd_iter_tcp",
    section: "iter/tcp",
    command: "flows",
};
const ND_KFREE_SKB: TraceProg = TraceProg {
    name: "nd_kfree_skb",
    section: "tp_btf/kfree_skb",
    command: "drops",
};

/// Cumulative (or, after [`Counter::since`], windowed) statistics of one program.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Counter {
    runs: u64,
    run_time_ns: u64,
    /// Runs the kernel skipped because the program was already running on that CPU.
    recursion_misses: u64,
}

impl Counter {
    fn read(fd: BorrowedFd<'_>) -> io::Result<Counter> {
        let info = prog_info(fd.as_raw_fd(), &mut [])?;
        Ok(Counter {
            runs: info.run_cnt,
            run_time_ns: info.run_time_ns,
            recursion_misses: info.recursion_misses,
        })
    }

    fn since(self, before: Counter) -> Counter {
        Counter {
            runs: self.runs.saturating_sub(before.runs),
            run_time_ns: self.run_time_ns.saturating_sub(before.run_time_ns),
            recursion_misses: self
                .recursion_misses
                .saturating_sub(before.recursion_misses),
        }
    }

    fn plus(self, other: Counter) -> Counter {
        Counter {
            runs: self.runs + other.runs,
            run_time_ns: self.run_time_ns + other.run_time_ns,
            recursion_misses: self.recursion_misses + other.recursion_misses,
        }
    }

    fn ns_per_run(self) -> Option<f64> {
        (self.runs > 0).then(|| self.run_time_ns as f64 / self.runs as f64)
    }
}

/// A netdoctor program held open by id: its statistics stay readable after netdoctor
/// exits (the end-of-window snapshot of `netdoctor flows` runs just before it exits).
#[derive(Debug)]
struct HeldProg {
    prog: TraceProg,
    id: u32,
    fd: OwnedFd,
}

impl HeldProg {
    fn open(prog: TraceProg, id: u32) -> Result<HeldProg> {
        // SAFETY: plain syscall wrapper without pointer arguments.
        let fd = unsafe { libbpf_sys::bpf_prog_get_fd_by_id(id) };
        if fd < 0 {
            return Err(io::Error::from_raw_os_error(-fd))
                .with_context(|| format!("opening program {id} ({})", prog.name));
        }
        // SAFETY: bpf_prog_get_fd_by_id returned a new descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(HeldProg { prog, id, fd })
    }

    fn stats(&self) -> Result<Counter> {
        Counter::read(self.fd.as_fd())
            .with_context(|| format!("statistics of {} (id {})", self.prog.name, self.id))
    }
}

/// Ids of the BPF programs process `pid` holds (program and link descriptors).
fn process_prog_ids(pid: u32) -> Result<HashSet<u32>> {
    let dir = PathBuf::from(format!("/proc/{pid}/fdinfo"));
    let mut ids = HashSet::new();
    for entry in std::fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))? {
        // A descriptor may close while we look: skip it.
        let Ok(text) = entry.and_then(|e| std::fs::read_to_string(e.path())) else {
            continue;
        };
        ids.extend(
            text.lines()
                .filter_map(|l| l.strip_prefix("prog_id:"))
                .filter_map(|v| v.trim().parse::<u32>().ok()),
        );
    }
    Ok(ids)
}

/// Opens `wanted`, each the one program of that name that the netdoctor process holds and
/// that appeared after it started (other netdoctor processes may run the same programs).
fn hold_programs(
    nd: &BgProcess,
    known: &HashSet<u32>,
    wanted: &[TraceProg],
) -> Result<Vec<HeldProg>> {
    let held_by = process_prog_ids(nd.pid())?;
    let all = all_programs();
    wanted
        .iter()
        .map(|&prog| {
            let ids: Vec<u32> = held_by
                .iter()
                .copied()
                .filter(|id| !known.contains(id))
                .filter(|id| all.get(id).is_some_and(|p| p.name == prog.kernel_name()))
                .collect();
            ensure!(
                ids.len() == 1,
                "expected one new {} program held by netdoctor (pid {}), found {ids:?}; \
                 netdoctor stderr: {}",
                prog.name,
                nd.pid(),
                nd.stderr().unwrap_or_default().trim()
            );
            HeldProg::open(prog, ids[0])
        })
        .collect()
}

/// A `u64` global in the `.bss` of a held program's object (e.g. `sock_events_lost`).
struct BssCounter {
    map: libbpf_rs::MapHandle,
    offset: usize,
}

impl std::fmt::Debug for BssCounter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BssCounter")
            .field("offset", &self.offset)
            .finish()
    }
}

impl BssCounter {
    fn open(prog: &HeldProg, var: &str) -> Result<BssCounter> {
        use libbpf_rs::btf::types::{DataSec, Var};
        use libbpf_rs::MapCore;

        let mut ids = [0u32; 32];
        let info =
            prog_info(prog.fd.as_raw_fd(), &mut ids).context("listing the program's maps")?;
        let n = (info.nr_map_ids as usize).min(ids.len());
        let map = ids[..n]
            .iter()
            .filter_map(|&id| libbpf_rs::MapHandle::from_map_id(id).ok())
            .find(|m| m.name().to_string_lossy().ends_with(".bss"))
            .with_context(|| format!("{} uses no .bss map", prog.prog.name))?;
        let btf = libbpf_rs::btf::Btf::from_prog_id(prog.id).context("the program's BTF")?;
        let sec: DataSec<'_> = btf
            .type_by_name(".bss")
            .context("no .bss section in the program's BTF")?;
        let offset = (0..sec.len())
            .filter_map(|i| sec.get(i))
            .find(|v| {
                btf.type_by_id::<Var<'_>>(v.ty)
                    .and_then(|t| t.name())
                    .is_some_and(|name| name == var)
            })
            .map(|v| v.offset as usize)
            .with_context(|| format!("no {var} in .bss"))?;
        ensure!(
            offset + 8 <= map.value_size() as usize,
            "{var} at offset {offset} lies outside the .bss map"
        );
        Ok(BssCounter { map, offset })
    }

    fn read(&self) -> Result<u64> {
        use libbpf_rs::MapCore;

        let value = self
            .map
            .lookup(&0u32.to_ne_bytes(), libbpf_rs::MapFlags::ANY)
            .context("reading .bss")?
            .context(".bss has no value")?;
        let bytes: [u8; 8] = value
            .get(self.offset..self.offset + 8)
            .and_then(|b| b.try_into().ok())
            .context(".bss value too short")?;
        Ok(u64::from_ne_bytes(bytes))
    }
}

/// Sockets `ss -tan` lists in a namespace.
#[derive(Debug, Clone, Copy)]
struct SsCount {
    sockets: u64,
    time_wait: u64,
}

fn ss_count(ns: &Netns) -> Option<SsCount> {
    let out = ns.run(&["ss", "-Htan"]).ok()?;
    let lines = out.lines().filter(|l| !l.trim().is_empty());
    let (mut sockets, mut time_wait) = (0, 0);
    for l in lines {
        sockets += 1;
        if l.starts_with("TIME-WAIT") {
            time_wait += 1;
        }
    }
    Some(SsCount { sockets, time_wait })
}

/// Short TCP connections made by the client loop.
#[derive(Debug, Clone, Copy, Default)]
struct ConnStats {
    connections: u64,
    failures: u64,
}

/// Connect, send a request, read the reply until the server closes, close.
fn one_connection(addr: SocketAddr) -> io::Result<()> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
    s.set_read_timeout(Some(Duration::from_secs(2)))?;
    s.write_all(&[0x5a; SHORT_CONN_BYTES])?;
    let mut reply = Vec::with_capacity(SHORT_CONN_BYTES);
    s.read_to_end(&mut reply)?;
    if reply.len() != SHORT_CONN_BYTES {
        return Err(io::Error::other("short reply"));
    }
    Ok(())
}

fn client_loop(addr: SocketAddr, stop: &AtomicBool) -> ConnStats {
    let mut st = ConnStats::default();
    while !stop.load(Ordering::Relaxed) && !STOP.load(Ordering::Relaxed) {
        match one_connection(addr) {
            Ok(()) => st.connections += 1,
            Err(_) => {
                st.failures += 1;
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    }
    st
}

/// Serves one connection at a time: read the request, answer, close first (the
/// TIME-WAIT stays on this side). The listener's receive timeout bounds each accept.
fn serve_loop(listener: &TcpListener, stop: &AtomicBool) {
    let mut buf = [0u8; SHORT_CONN_BYTES];
    while !stop.load(Ordering::Relaxed) {
        let Ok((mut s, _)) = listener.accept() else {
            continue;
        };
        let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
        if s.read_exact(&mut buf).is_ok() {
            let _ = s.write_all(&buf);
        }
    }
}

/// A listener on 127.0.0.1 in `ns` whose accept() returns after 100 ms without a client
/// (SO_RCVTIMEO applies to accept; std sets it only through TcpStream).
fn short_conn_listener(ns: &Netns) -> Result<TcpListener> {
    ns.run_in(|| -> io::Result<TcpListener> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
        let sock = TcpStream::from(OwnedFd::from(listener));
        sock.set_read_timeout(Some(Duration::from_millis(100)))?;
        Ok(TcpListener::from(OwnedFd::from(sock)))
    })?
    .context("creating the short-connection listener")
}

/// What was generated in one load window.
#[derive(Debug, Clone, Copy)]
struct TraceTraffic {
    secs: f64,
    gbps: f64,
    retransmits: Option<u64>,
    conns: ConnStats,
    nft_dropped: Option<u64>,
}

/// iperf3 a→b for `secs` (through the lossy link) while a client loop makes short TCP
/// connections over lo in the watched namespace.
fn tracing_traffic(lab: &Lab, secs: u32) -> Result<(traffic::Iperf3Report, ConnStats)> {
    let ns = lab.watched();
    let listener = short_conn_listener(ns)?;
    let addr = listener.local_addr()?;
    let stop = Arc::new(AtomicBool::new(false));
    std::thread::scope(|scope| -> Result<(traffic::Iperf3Report, ConnStats)> {
        let server = {
            let stop = Arc::clone(&stop);
            scope.spawn(move || serve_loop(&listener, &stop))
        };
        let client = {
            let stop = Arc::clone(&stop);
            scope.spawn(move || ns.run_in(move || client_loop(addr, &stop)))
        };
        let iperf = lab.iperf(secs, 1);
        stop.store(true, Ordering::SeqCst);
        let conns = client.join();
        let served = server.join();
        let conns = match conns {
            Ok(c) => c?,
            Err(_) => bail!("the short-connection client panicked"),
        };
        ensure!(served.is_ok(), "the short-connection server panicked");
        Ok((iperf?, conns))
    })
}

/// One program over the idle and the load window.
#[derive(Debug, Clone)]
struct TraceRow {
    prog: TraceProg,
    id: u32,
    idle: Counter,
    load: Counter,
    /// Empty tc programs on the watched interface in the same load window (in + out).
    floor: Counter,
}

/// The tracepoint programs of one command over an idle and a load window.
#[derive(Debug, Clone)]
struct TracePhase {
    command: &'static str,
    idle_secs: f64,
    load_secs: f64,
    rows: Vec<TraceRow>,
    floor: Counter,
    traffic: TraceTraffic,
}

/// Idle window, then the load window with the empty tc programs attached.
fn trace_windows(
    lab: &Lab,
    floor: &Floor<'_>,
    loss: &PacketLoss,
    held: &[&HeldProg],
    command: &'static str,
    secs: u32,
) -> Result<TracePhase> {
    let read = || held.iter().map(|h| h.stats()).collect::<Result<Vec<_>>>();
    let idle0 = read()?;
    let t0 = Instant::now();
    std::thread::sleep(TRACING_IDLE);
    let idle1 = read()?;
    let idle_secs = t0.elapsed().as_secs_f64();

    let hooks = [Hook::TcIn, Hook::TcOut];
    let links = floor.attach(lab.watched(), lab.ifindex, &hooks, 0)?;
    let floor_stats = || -> Result<Counter> {
        hooks.iter().try_fold(Counter::default(), |acc, &h| {
            Ok(acc.plus(floor.counter(h).context("floor statistics")?))
        })
    };
    let nft0 = loss.dropped_packets().ok();
    let floor0 = floor_stats()?;
    let load0 = read()?;
    let t1 = Instant::now();
    let (report, conns) = tracing_traffic(lab, secs)?;
    let load1 = read()?;
    let load_secs = t1.elapsed().as_secs_f64();
    let floor1 = floor_stats()?;
    let nft1 = loss.dropped_packets().ok();
    drop(links);
    let floor = floor1.since(floor0);

    let rows = held
        .iter()
        .enumerate()
        .map(|(i, h)| TraceRow {
            prog: h.prog,
            id: h.id,
            idle: idle1[i].since(idle0[i]),
            load: load1[i].since(load0[i]),
            floor,
        })
        .collect();
    Ok(TracePhase {
        command,
        idle_secs,
        load_secs,
        rows,
        floor,
        traffic: TraceTraffic {
            secs: load_secs,
            gbps: report.received_bits_per_second / 1e9,
            retransmits: report.retransmits,
            conns,
            nft_dropped: nft0.zip(nft1).map(|(a, b)| b.saturating_sub(a)),
        },
    })
}

/// One iter/tcp snapshot of `netdoctor flows`.
#[derive(Debug, Clone, Copy)]
struct IterSnapshot {
    when: &'static str,
    /// Program runs: one per socket visited plus one closing run.
    stats: Counter,
    ss: Option<SsCount>,
}

impl IterSnapshot {
    fn sockets_visited(&self) -> u64 {
        self.stats.runs.saturating_sub(1)
    }
}

/// The statistics once netdoctor's start-of-window snapshot is complete.
fn wait_first_snapshot(iter: &HeldProg) -> Result<Counter> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let c = iter.stats()?;
        if c.runs > 0 {
            std::thread::sleep(Duration::from_millis(50));
            let again = iter.stats()?;
            if again == c {
                return Ok(c);
            }
            continue;
        }
        ensure!(
            Instant::now() < deadline,
            "netdoctor flows took no iter/tcp snapshot within 10 s"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// What the tracing section measured.
#[derive(Debug, Clone)]
struct Tracing {
    loss_percent: u8,
    secs: u32,
    phases: Vec<TracePhase>,
    iter: Option<(u32, Vec<IterSnapshot>)>,
    /// Close events `netdoctor flows` could not queue (its ring buffer was full).
    sock_events_lost: Option<u64>,
    /// Drops `netdoctor drops` reported: all, and NETFILTER_DROP.
    drops_reported: Option<(u64, u64)>,
}

fn spawn_netdoctor(lab: &Lab, argv: &[&str], needle: &str) -> Result<(BgProcess, HashSet<u32>)> {
    let known: HashSet<u32> = all_programs().into_keys().collect();
    let mut nd = lab.watched().spawn(argv)?;
    nd.wait_for_output(needle, Duration::from_secs(30))
        .with_context(|| format!("`{}` did not start", argv.join(" ")))?;
    Ok((nd, known))
}

fn run_tracing(lab: &Lab, floor: &Floor<'_>, netdoctor: &str, args: &Args) -> Result<Tracing> {
    let loss = PacketLoss::add(
        &lab.topo.b,
        PairTopology::IFNAME,
        Direction::Ingress,
        args.tracing_loss,
    )?;
    let ns = lab.watched();
    let mut out = Tracing {
        loss_percent: args.tracing_loss,
        secs: args.tracing_duration,
        phases: Vec::new(),
        iter: None,
        sock_events_lost: None,
        drops_reported: None,
    };

    // netdoctor flows: iter/tcp + the two socket tracepoints (and its tc programs).
    ensure!(!STOP.load(Ordering::SeqCst), "interrupted");
    eprintln!("netdoctor-bench: tracing — netdoctor flows (socket probes)");
    let argv = [
        netdoctor,
        "flows",
        PairTopology::IFNAME,
        "--duration",
        "10m",
        "--json",
        "--top",
        "0",
    ];
    let (nd, known) = spawn_netdoctor(lab, &argv, WATCHING)?;
    let held = hold_programs(
        &nd,
        &known,
        &[ND_TCP_RETRANSMIT, ND_SOCK_STATE, ND_ITER_TCP],
    )?;
    let lost = match BssCounter::open(&held[1], "sock_events_lost") {
        Ok(c) => Some(c),
        Err(e) => {
            eprintln!("netdoctor-bench: cannot read sock_events_lost: {e:#}");
            None
        }
    };
    let iter = &held[2];
    let first = wait_first_snapshot(iter)?;
    let ss_start = ss_count(ns);
    let phase = trace_windows(
        lab,
        floor,
        &loss,
        &[&held[0], &held[1]],
        "flows",
        args.tracing_duration,
    )?;
    progress_tracing(&phase);
    out.phases.push(phase);
    let ss_end = ss_count(ns);
    finish_netdoctor(nd).context("netdoctor flows")?;
    let total = iter.stats()?;
    out.iter = Some((
        iter.id,
        vec![
            IterSnapshot {
                when: "start",
                stats: first,
                ss: ss_start,
            },
            IterSnapshot {
                when: "end",
                stats: total.since(first),
                ss: ss_end,
            },
        ],
    ));
    out.sock_events_lost = lost.as_ref().and_then(|l| l.read().ok());
    drop(lost);
    drop(held);

    // netdoctor drops: kfree_skb.
    ensure!(!STOP.load(Ordering::SeqCst), "interrupted");
    eprintln!("netdoctor-bench: tracing — netdoctor drops (kfree_skb)");
    let argv = [netdoctor, "drops", "--duration", "10m", "--json"];
    let (nd, known) = spawn_netdoctor(lab, &argv, COUNTING_DROPS)?;
    let held = hold_programs(&nd, &known, &[ND_KFREE_SKB])?;
    let phase = trace_windows(
        lab,
        floor,
        &loss,
        &[&held[0]],
        "drops",
        args.tracing_duration,
    )?;
    progress_tracing(&phase);
    out.phases.push(phase);
    let json = finish_netdoctor(nd).context("netdoctor drops")?;
    out.drops_reported = json["drops"].as_array().map(|drops| {
        let packets = |d: &Value| d["packets"].as_u64().unwrap_or(0);
        (
            drops.iter().map(packets).sum(),
            drops
                .iter()
                .filter(|d| d["reason"] == "NETFILTER_DROP")
                .map(packets)
                .sum(),
        )
    });
    drop(loss);
    Ok(out)
}

fn progress_tracing(phase: &TracePhase) {
    let mut line = format!("netdoctor-bench: tracing {:<6}", phase.command);
    for r in &phase.rows {
        line.push_str(&format!(
            "  {} {:.0} ev/s {} ns/ev",
            r.prog.name,
            r.load.runs as f64 / phase.load_secs,
            fmt_opt(r.load.ns_per_run(), 0)
        ));
    }
    line.push_str(&format!(
        "  floor {} ns/run",
        fmt_opt(phase.floor.ns_per_run(), 0)
    ));
    eprintln!("{line}");
}

/// Median ns/run of the empty tc programs over the packet section's single-stream runs.
fn packet_floor(runs: &[Run]) -> Option<f64> {
    let v: Vec<f64> = runs
        .iter()
        .filter(|r| r.parallel == 1)
        .flat_map(|r| r.programs.iter())
        .filter(|p| p.role == Role::Floor && p.hook != Hook::Xdp)
        .filter_map(ProgRun::ns_per_run)
        .collect();
    median(&v)
}

impl Tracing {
    fn watched_text(side: Side) -> &'static str {
        match side {
            Side::Receiver => "b",
            Side::Sender => "a",
        }
    }

    fn print_text(&self, side: Side, packet_floor: Option<f64>) {
        let ns = Self::watched_text(side);
        println!("Tracing programs (ns per event = Δrun_time_ns / Δrun_cnt; raw, see floor)");
        println!(
            "  load:  iperf3 a→b 1 stream with {} % random loss on b/eth0 ingress (nft), plus short TCP",
            self.loss_percent
        );
        println!(
            "         connections ({SHORT_CONN_BYTES} B each way, server closes) over lo in {ns}, {} s per command;",
            self.secs
        );
        println!(
            "         netdoctor runs in {ns} and watches {ns}/eth0; stopped with SIGINT after the window"
        );
        println!(
            "  idle:  {} s before each load window with nothing generated. Tracepoints fire in every",
            TRACING_IDLE.as_secs()
        );
        println!("         namespace: whatever else runs on the machine counts in both windows");
        println!("  floor: there is no empty program for tracepoints; bpf_stats' own clock reads cost ~100 ns");
        println!("         per run on this VM. Beside each row: the empty tc programs (tests/bpf/floor.bpf.c) on");
        let packet = packet_floor
            .map(|f| format!("packet section above: median {f:.1} ns/run"))
            .unwrap_or_else(|| "packet section not run".into());
        println!(
            "         {ns}/eth0 in the same load window ({packet}); −floor is indicative only"
        );
        println!(
            "  {:<6} {:<18} {:<27} {:>9} {:>9} {:>9} {:>9} {:>7} {:>8} {:>10}",
            "cmd",
            "program",
            "hook",
            "idle ev/s",
            "load ev/s",
            "events",
            "ns/event",
            "floor",
            "−floor",
            "idle ns/ev"
        );
        for phase in &self.phases {
            for r in &phase.rows {
                let ns_ev = r.load.ns_per_run();
                let floor = r.floor.ns_per_run();
                println!(
                    "  {:<6} {:<18} {:<27} {:>9.1} {:>9.1} {:>9} {:>9} {:>7} {:>8} {:>10}",
                    phase.command,
                    r.prog.name,
                    r.prog.section,
                    r.idle.runs as f64 / phase.idle_secs,
                    r.load.runs as f64 / phase.load_secs,
                    r.load.runs,
                    fmt_opt(ns_ev, 1),
                    fmt_opt(floor, 1),
                    fmt_opt(ns_ev.zip(floor).map(|(a, b)| a - b), 1),
                    fmt_opt(r.idle.ns_per_run(), 1),
                );
            }
        }
        if let Some((_, snaps)) = &self.iter {
            println!(
                "  {:<6} {:<18} {:<27} one run per socket visited (+1 closing run), per snapshot:",
                "flows", ND_ITER_TCP.name, ND_ITER_TCP.section
            );
            for s in snaps {
                let ss =
                    s.ss.map(|c| {
                        format!(
                            "ss -tan in {ns}: {} sockets ({} time-wait)",
                            c.sockets, c.time_wait
                        )
                    })
                    .unwrap_or_else(|| "ss -tan failed".into());
                println!(
                    "         {:<5} snapshot: {:>6} sockets visited, {:>8.3} ms = {:>7} ns/run; {ss}",
                    s.when,
                    s.sockets_visited(),
                    s.stats.run_time_ns as f64 / 1e6,
                    fmt_opt(s.stats.ns_per_run(), 1),
                );
            }
        }
        for phase in &self.phases {
            let t = &phase.traffic;
            println!(
                "  traffic ({} window, {:.1} s): iperf3 {:.2} Gbit/s, {} retransmitted segments; {} short connections ({:.0}/s, {} failed); nft dropped {} packets",
                phase.command,
                t.secs,
                t.gbps,
                t.retransmits.map(|r| r.to_string()).unwrap_or_else(|| "?".into()),
                t.conns.connections,
                t.conns.connections as f64 / t.secs,
                t.conns.failures,
                t.nft_dropped.map(|r| r.to_string()).unwrap_or_else(|| "?".into()),
            );
        }
        if let Some(lost) = self.sock_events_lost {
            println!(
                "  netdoctor flows: {lost} close events did not fit its ring buffer (bss sock_events_lost; not in its report)"
            );
        }
        if let Some((all, nf)) = self.drops_reported {
            println!(
                "  netdoctor drops: reported {all} dropped packets over its whole run (NETFILTER_DROP {nf}), all namespaces"
            );
        }
        let misses: Vec<String> = self
            .phases
            .iter()
            .flat_map(|p| p.rows.iter())
            .filter(|r| r.idle.recursion_misses + r.load.recursion_misses > 0)
            .map(|r| {
                format!(
                    "{} {}",
                    r.prog.name,
                    r.idle.recursion_misses + r.load.recursion_misses
                )
            })
            .collect();
        if !misses.is_empty() {
            println!(
                "  recursion misses (runs skipped by the kernel): {}",
                misses.join(", ")
            );
        }
    }

    fn json(&self, side: Side, packet_floor: Option<f64>) -> Value {
        let ns = Self::watched_text(side);
        let window = |c: Counter, secs: f64| {
            json!({
                "secs": secs,
                "events": c.runs,
                "run_time_ns": c.run_time_ns,
                "events_per_s": c.runs as f64 / secs,
                "ns_per_event": c.ns_per_run(),
                "recursion_misses": c.recursion_misses,
            })
        };
        let programs: Vec<Value> = self
            .phases
            .iter()
            .flat_map(|p| p.rows.iter().map(move |r| (p, r)))
            .map(|(p, r)| {
                json!({
                    "command": p.command,
                    "program": r.prog.name,
                    "kernel_name": r.prog.kernel_name(),
                    "hook": r.prog.section,
                    "id": r.id,
                    "idle": window(r.idle, p.idle_secs),
                    "load": window(r.load, p.load_secs),
                    "floor_ns_per_run": r.floor.ns_per_run(),
                    "ns_per_event_minus_floor": r.load.ns_per_run().zip(r.floor.ns_per_run()).map(|(a, b)| a - b),
                })
            })
            .collect();
        let iter = self.iter.as_ref().map(|(id, snaps)| {
            json!({
                "command": "flows",
                "program": ND_ITER_TCP.name,
                "hook": ND_ITER_TCP.section,
                "id": id,
                "note": "one program run per socket visited plus one closing run per snapshot",
                "snapshots": snaps.iter().map(|s| json!({
                    "when": s.when,
                    "runs": s.stats.runs,
                    "sockets_visited": s.sockets_visited(),
                    "run_time_ns": s.stats.run_time_ns,
                    "ns_per_run": s.stats.ns_per_run(),
                    "ss_sockets": s.ss.map(|c| c.sockets),
                    "ss_time_wait": s.ss.map(|c| c.time_wait),
                })).collect::<Vec<_>>(),
            })
        });
        let traffic: Vec<Value> = self
            .phases
            .iter()
            .map(|p| {
                let t = &p.traffic;
                json!({
                    "command": p.command,
                    "secs": t.secs,
                    "iperf3_gbps": t.gbps,
                    "iperf3_retransmits": t.retransmits,
                    "short_connections": t.conns.connections,
                    "short_connection_failures": t.conns.failures,
                    "nft_dropped_packets": t.nft_dropped,
                    "floor_tc": window(p.floor, p.load_secs),
                })
            })
            .collect();
        json!({
            "setup": {
                "load": format!("iperf3 a->b 1 stream, {} % random loss on b/eth0 ingress (nft), plus short TCP connections ({SHORT_CONN_BYTES} B each way, server closes first) over lo in {ns}", self.loss_percent),
                "load_secs_per_command": self.secs,
                "idle_secs_per_command": TRACING_IDLE.as_secs(),
                "netdoctor": format!("`netdoctor flows eth0` and `netdoctor drops` in {ns}, stopped with SIGINT"),
                "scope": "tracepoints fire in every namespace: other activity on the machine counts too",
            },
            "floor": {
                "note": "no empty program exists for tracepoints: ns_per_event is raw; bpf_stats' own clock reads cost ~100 ns per run on this VM, as the empty tc programs show",
                "packet_section_tc_floor_ns_per_run": packet_floor,
            },
            "programs": programs,
            "iter_tcp": iter,
            "traffic": traffic,
            "sock_events_lost": self.sock_events_lost,
            "netdoctor_drops_reported": self.drops_reported.map(|(all, nf)| json!({"packets": all, "netfilter_drop": nf})),
        })
    }
}

// ---------------------------------------------------------------------------------------
// Summary
// ---------------------------------------------------------------------------------------

fn median(values: &[f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

fn min_max(values: &[f64]) -> (f64, f64) {
    values
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &v| {
            (lo.min(v), hi.max(v))
        })
}

#[derive(Debug, Clone)]
struct ThroughputRow {
    kind: Kind,
    parallel: u32,
    runs: Vec<f64>,
    median: f64,
    ratio: Option<f64>,
}

#[derive(Debug, Clone)]
struct ProgRow {
    config: Config,
    parallel: u32,
    hook: Hook,
    name: String,
    ns: Vec<f64>,
    floor_ns: Vec<f64>,
    median_ns: Option<f64>,
    median_floor: Option<f64>,
    /// Median over runs of (netdoctor − floor) when both come from the same run, else the
    /// difference of the medians.
    above_floor: Option<f64>,
    floor_same_run: bool,
    runs_per_s: Option<f64>,
    segments_per_run: Option<f64>,
    /// Median over runs of the program's run time above the floor (Δ × runs) as a share
    /// of the CPU time the machine spent busy in that run: what a CPU-bound transfer loses
    /// to it.
    cpu_share: Option<f64>,
}

/// Per configuration, the CPU share of each program that has one.
fn cpu_shares(rows: &[ProgRow]) -> Vec<(Config, Vec<(String, f64)>)> {
    let mut out: Vec<(Config, Vec<(String, f64)>)> = Vec::new();
    for r in rows {
        let Some(share) = r.cpu_share else { continue };
        match out.iter_mut().find(|(c, _)| *c == r.config) {
            Some((_, v)) => v.push((r.name.clone(), share)),
            None => out.push((r.config, vec![(r.name.clone(), share)])),
        }
    }
    out
}

fn throughput_rows(runs: &[Run], parallel: u32) -> Vec<ThroughputRow> {
    let mut kinds: Vec<Kind> = Vec::new();
    for r in runs.iter().filter(|r| r.parallel == parallel) {
        if !kinds.contains(&r.kind) {
            kinds.push(r.kind);
        }
    }
    let gbps = |k: Kind| -> Vec<f64> {
        runs.iter()
            .filter(|r| r.kind == k && r.parallel == parallel)
            .map(|r| r.gbps)
            .collect()
    };
    let base = median(&gbps(Kind::Baseline));
    kinds
        .into_iter()
        .filter_map(|k| {
            let v = gbps(k);
            let m = median(&v)?;
            Some(ThroughputRow {
                kind: k,
                parallel,
                median: m,
                ratio: base
                    .filter(|b| *b > 0.0 && k != Kind::Baseline)
                    .map(|b| m / b),
                runs: v,
            })
        })
        .collect()
}

fn prog_rows(runs: &[Run], parallel: u32, configs: &[Config]) -> Vec<ProgRow> {
    let mut rows = Vec::new();
    for &config in configs {
        let nd_runs: Vec<&Run> = runs
            .iter()
            .filter(|r| r.kind == Kind::Netdoctor(config) && r.parallel == parallel)
            .collect();
        if nd_runs.is_empty() {
            continue;
        }
        let floor_runs: Vec<&Run> = runs
            .iter()
            .filter(|r| r.kind == Kind::Floor(config) && r.parallel == parallel)
            .collect();
        let mut hooks: Vec<Hook> = nd_runs
            .iter()
            .flat_map(|r| {
                r.programs
                    .iter()
                    .filter(|p| p.role == Role::Netdoctor)
                    .map(|p| p.hook)
            })
            .collect();
        hooks.sort();
        hooks.dedup();
        for hook in hooks {
            let ns: Vec<f64> = nd_runs
                .iter()
                .filter_map(|r| r.prog(Role::Netdoctor, hook)?.ns_per_run())
                .collect();
            let same_run = nd_runs.iter().any(|r| r.prog(Role::Floor, hook).is_some());
            let (floor_ns, above): (Vec<f64>, Option<f64>) = if same_run {
                let floor_ns: Vec<f64> = nd_runs
                    .iter()
                    .filter_map(|r| r.prog(Role::Floor, hook)?.ns_per_run())
                    .collect();
                let diffs: Vec<f64> = nd_runs
                    .iter()
                    .filter_map(|r| {
                        Some(
                            r.prog(Role::Netdoctor, hook)?.ns_per_run()?
                                - r.prog(Role::Floor, hook)?.ns_per_run()?,
                        )
                    })
                    .collect();
                (floor_ns, median(&diffs))
            } else {
                let floor_ns: Vec<f64> = floor_runs
                    .iter()
                    .filter_map(|r| r.prog(Role::Floor, hook)?.ns_per_run())
                    .collect();
                let above = median(&ns).zip(median(&floor_ns)).map(|(a, b)| a - b);
                (floor_ns, above)
            };
            let rates: Vec<f64> = nd_runs
                .iter()
                .filter_map(|r| {
                    let p = r.prog(Role::Netdoctor, hook)?;
                    (r.secs > 0).then(|| p.runs as f64 / f64::from(r.secs))
                })
                .collect();
            let segs: Vec<f64> = nd_runs
                .iter()
                .filter_map(|r| r.segments_per_run(hook))
                .collect();
            let median_floor = median(&floor_ns);
            let shares: Vec<f64> = nd_runs
                .iter()
                .filter_map(|r| {
                    let p = r.prog(Role::Netdoctor, hook)?;
                    let floor = match r.prog(Role::Floor, hook) {
                        Some(f) => f.ns_per_run()?,
                        None => median_floor?,
                    };
                    let above = (p.ns_per_run()? - floor).max(0.0) * p.runs as f64;
                    let busy = r.cpu_busy_ns.filter(|b| *b > 0)? as f64;
                    Some(above / busy)
                })
                .collect();
            let name = nd_runs
                .iter()
                .find_map(|r| r.prog(Role::Netdoctor, hook).map(|p| p.name.clone()))
                .unwrap_or_default();
            rows.push(ProgRow {
                config,
                parallel,
                hook,
                name,
                median_ns: median(&ns),
                median_floor,
                cpu_share: median(&shares),
                above_floor: above,
                floor_same_run: same_run,
                runs_per_s: median(&rates),
                segments_per_run: median(&segs),
                ns,
                floor_ns,
            });
        }
    }
    rows
}

// ---------------------------------------------------------------------------------------
// Output
// ---------------------------------------------------------------------------------------

#[derive(Debug, Clone)]
struct Machine {
    kernel: String,
    cpu: String,
    cores: usize,
    date: String,
    loadavg_start: String,
    loadavg_end: String,
    bpf_stats_sysctl: String,
}

fn read_trim(path: &str) -> String {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_owned())
        .unwrap_or_else(|_| "?".into())
}

fn machine() -> Machine {
    let cpu = netdoctor_lab::stats::cpu_model();
    let cores = std::thread::available_parallelism()
        .map(usize::from)
        .unwrap_or(0);
    let date = cmd::host_run(&["date", "-u", "+%Y-%m-%dT%H:%M:%SZ"])
        .map(|s| s.trim().to_owned())
        .unwrap_or_else(|_| "?".into());
    Machine {
        kernel: netdoctor_lab::stats::kernel_release(),
        cpu,
        cores,
        date,
        loadavg_start: loadavg(),
        loadavg_end: String::new(),
        bpf_stats_sysctl: read_trim("/proc/sys/kernel/bpf_stats_enabled"),
    }
}

fn loadavg() -> String {
    read_trim("/proc/loadavg")
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

fn fmt_opt(v: Option<f64>, decimals: usize) -> String {
    v.map(|x| format!("{x:.decimals$}"))
        .unwrap_or_else(|| "–".into())
}

fn verdict(ok: bool) -> &'static str {
    if ok {
        "met"
    } else {
        "MISSED"
    }
}

fn side_text(side: Side) -> &'static str {
    match side {
        Side::Receiver => {
            "b/eth0, the receiver: ingress (tc or XDP) sees the data as GSO super-packets, egress the ACKs"
        }
        Side::Sender => {
            "a/eth0, the sender: egress sees the data as GSO super-packets, ingress (tc or XDP) the ACKs"
        }
    }
}

struct Report<'a> {
    args: &'a Args,
    machine: Machine,
    cc: String,
    runs: Vec<Run>,
    tracing: Option<Tracing>,
    agent: Option<AgentBench>,
}

impl Report<'_> {
    fn print_text(&self) {
        let a = self.args;
        let m = &self.machine;
        println!("netdoctor-bench — data-plane cost of netdoctor on a veth pair");
        println!(
            "machine: kernel {} | CPU {} | {} cores | {} | load avg {} (start) / {} (end)",
            m.kernel, m.cpu, m.cores, m.date, m.loadavg_start, m.loadavg_end
        );
        if !self.runs.is_empty() {
            println!(
                "traffic: iperf3 TCP a→b, 1 stream, cc {}, {} s per run, {} rounds (baseline runs alternate with attached runs)",
                self.cc, a.duration, a.rounds
            );
        }
        let load1 = m
            .loadavg_start
            .split_whitespace()
            .next()
            .and_then(|l| l.parse::<f64>().ok())
            .unwrap_or(0.0);
        if load1 > 1.0 {
            println!(
                "warning: the machine was busy before the benchmark started (1-min load {load1:.1} on {} cores):",
                m.cores
            );
            println!("         other processes compete with iperf3 and evict caches; expect noisy figures");
        }
        println!("watched: {}", side_text(a.side));
        if !self.runs.is_empty() || self.tracing.is_some() {
            println!(
                "stats:   BPF_ENABLE_STATS held for the packet and tracing sections, released before the agent's (kernel.bpf_stats_enabled was {} and is not written)",
                m.bpf_stats_sysctl
            );
        }
        if !self.runs.is_empty() {
            self.print_packet_text();
        }
        if let Some(t) = &self.tracing {
            if !self.runs.is_empty() {
                println!();
            }
            t.print_text(a.side, packet_floor(&self.runs));
        }
        if let Some(agent) = &self.agent {
            if !self.runs.is_empty() || self.tracing.is_some() {
                println!();
            }
            agent.print_text(a.side);
        }
    }

    fn print_packet_text(&self) {
        let a = self.args;
        println!("floor:   empty programs (tests/bpf/floor.bpf.c, same sections and return codes as netdoctor's):");
        println!("         tc  — attached behind netdoctor's programs on the same tcx hooks in the same runs;");
        println!("         xdp — one XDP program per interface, so measured in separate runs of the same");
        println!("               configuration (same interface, same mode) with the empty programs in netdoctor's place");
        println!();

        println!(
            "Throughput, iperf3 1 stream (Gbit/s; median [min..max] of n runs; ratio = median / baseline median; target ≥ {:.0} %)",
            TARGET_RATIO * 100.0
        );
        for row in throughput_rows(&self.runs, 1) {
            let (lo, hi) = min_max(&row.runs);
            let ratio = match (row.kind, row.ratio) {
                (Kind::Netdoctor(_), Some(r)) => {
                    format!("{:6.1} %  {}", r * 100.0, verdict(r >= TARGET_RATIO))
                }
                (_, Some(r)) => format!("{:6.1} %", r * 100.0),
                (_, None) => String::new(),
            };
            println!(
                "  {:<34} {:>6.2} [{:.2}..{:.2}] n={}  {ratio}",
                row.kind.describe(),
                row.median,
                lo,
                hi,
                row.runs.len()
            );
        }
        println!("  (attached runs also carry the empty tc programs and BPF statistics; ratios are pessimistic)");
        println!();

        println!(
            "Per-program cost (ns per run; median over rounds; Δ = netdoctor − floor; target Δ ≤ {TARGET_NS_ABOVE_FLOOR:.0} ns)"
        );
        println!(
            "  {:<12} {:<15} {:>10} {:>8} {:>9} {:>8} {:>8}  {:<8} per-round netdoctor / floor",
            "config", "program", "runs/s", "seg/run", "netdoctor", "floor", "Δ", "target"
        );
        let print_rows = |rows: Vec<ProgRow>| {
            for r in rows {
                let target = r
                    .above_floor
                    .map(|d| verdict(d <= TARGET_NS_ABOVE_FLOOR))
                    .unwrap_or("–");
                let per_round = format!(
                    "{} / {}{}",
                    r.ns.iter()
                        .map(|v| format!("{v:.0}"))
                        .collect::<Vec<_>>()
                        .join(","),
                    r.floor_ns
                        .iter()
                        .map(|v| format!("{v:.0}"))
                        .collect::<Vec<_>>()
                        .join(","),
                    if r.floor_same_run {
                        ""
                    } else {
                        " (floor runs)"
                    }
                );
                let config = if r.parallel > 1 {
                    format!("{} -P {}", r.config.name(), r.parallel)
                } else {
                    r.config.name().to_owned()
                };
                println!(
                    "  {:<12} {:<15} {:>10} {:>8} {:>9} {:>8} {:>8}  {:<8} {per_round}",
                    config,
                    r.name,
                    fmt_opt(r.runs_per_s, 0),
                    fmt_opt(r.segments_per_run, 1),
                    fmt_opt(r.median_ns, 1),
                    fmt_opt(r.median_floor, 1),
                    fmt_opt(r.above_floor, 1),
                    target,
                );
            }
        };
        print_rows(prog_rows(&self.runs, 1, &a.configs));
        if a.parallel > 1 {
            print_rows(prog_rows(&self.runs, a.parallel, &[Config::Tc]));
        }
        println!("  seg/run: wire segments per program run from netdoctor's own counters (counters.<dir>.segments / packets);");
        println!("           XDP cannot see gso_segs, so it counts every frame as one segment.");
        println!();
        println!(
            "CPU share (Δ × runs / CPU time the machine spent busy in the run, median over rounds): what a transfer"
        );
        println!(
            "bound by CPU loses to netdoctor's programs, without the noise of iperf3's throughput (target ≥ {:.0} % kept)",
            TARGET_RATIO * 100.0
        );
        for (config, rows) in cpu_shares(&prog_rows(&self.runs, 1, &a.configs)) {
            let total: f64 = rows.iter().map(|(_, s)| s).sum();
            let parts = rows
                .iter()
                .map(|(name, s)| format!("{name} {:.2} %", s * 100.0))
                .collect::<Vec<_>>()
                .join(" + ");
            println!(
                "  {:<12} {:.2} % ({parts})  throughput kept ≈ {:.1} %  {}",
                config.name(),
                total * 100.0,
                (1.0 - total) * 100.0,
                verdict(1.0 - total >= TARGET_RATIO)
            );
        }
        if a.parallel > 1 {
            println!();
            println!(
                "Many flows: iperf3 -P {} for {} s, tc configuration (one run each)",
                a.parallel, a.parallel_duration
            );
            for row in throughput_rows(&self.runs, a.parallel) {
                let ratio = row
                    .ratio
                    .map(|r| format!("  {:.1} % of baseline", r * 100.0))
                    .unwrap_or_default();
                println!(
                    "  {:<34} {:>6.2} Gbit/s{ratio}",
                    row.kind.describe(),
                    row.median
                );
            }
            if let Some(flows) = self
                .runs
                .iter()
                .filter(|r| r.parallel == a.parallel)
                .find_map(|r| r.flows_total)
            {
                println!("  flow-table entries on the watched interface: {flows}");
            }
        }
    }

    fn json(&self) -> Value {
        let a = self.args;
        let m = &self.machine;
        let prog_json = |r: &ProgRow| {
            json!({
                "config": r.config.name(),
                "parallel": r.parallel,
                "hook": r.hook.name(),
                "program": r.name,
                "runs_per_s": r.runs_per_s,
                "cpu_share": r.cpu_share,
                "segments_per_run": r.segments_per_run,
                "ns_per_run": r.median_ns,
                "floor_ns_per_run": r.median_floor,
                "ns_above_floor": r.above_floor,
                "floor_measured": if r.floor_same_run { "same runs, same hook" } else { "separate runs, same configuration" },
                "ns_per_run_by_round": r.ns,
                "floor_ns_per_run_by_round": r.floor_ns,
                "target_met": r.above_floor.map(|d| d <= TARGET_NS_ABOVE_FLOOR),
            })
        };
        let tp_json = |r: &ThroughputRow| {
            json!({
                "case": r.kind.label(),
                "description": r.kind.describe(),
                "parallel": r.parallel,
                "median_gbps": r.median,
                "gbps_by_run": r.runs,
                "ratio_vs_baseline": r.ratio,
                "target_met": match r.kind {
                    Kind::Netdoctor(_) => r.ratio.map(|x| x >= TARGET_RATIO),
                    _ => None,
                },
            })
        };
        let mut programs: Vec<Value> = prog_rows(&self.runs, 1, &a.configs)
            .iter()
            .map(prog_json)
            .collect();
        let mut throughput: Vec<Value> =
            throughput_rows(&self.runs, 1).iter().map(tp_json).collect();
        if a.parallel > 1 {
            programs.extend(
                prog_rows(&self.runs, a.parallel, &[Config::Tc])
                    .iter()
                    .map(prog_json),
            );
            throughput.extend(throughput_rows(&self.runs, a.parallel).iter().map(tp_json));
        }
        let runs: Vec<Value> = self
            .runs
            .iter()
            .map(|r| {
                json!({
                    "case": r.kind.label(),
                    "round": r.round + 1,
                    "parallel": r.parallel,
                    "gbps": r.gbps,
                    "cpu_busy_ns": r.cpu_busy_ns,
                    "retransmits": r.retransmits,
                    "ingress_hook": r.ingress_hook,
                    "flows_total": r.flows_total,
                    "counters": r.counters.map(|(i, e)| json!({
                        "ingress": {"packets": i.packets, "segments": i.segments},
                        "egress": {"packets": e.packets, "segments": e.segments},
                    })),
                    "programs": r.programs.iter().map(|p| json!({
                        "role": match p.role { Role::Netdoctor => "netdoctor", Role::Floor => "floor" },
                        "hook": p.hook.name(),
                        "name": p.name,
                        "id": p.id,
                        "runs": p.runs,
                        "run_time_ns": p.run_time_ns,
                        "ns_per_run": p.ns_per_run(),
                    })).collect::<Vec<_>>(),
                })
            })
            .collect();
        json!({
            "machine": {
                "kernel": m.kernel,
                "cpu": m.cpu,
                "cores": m.cores,
                "date": m.date,
                "loadavg_start": m.loadavg_start,
                "loadavg_end": m.loadavg_end,
            },
            "setup": {
                "traffic": "iperf3 TCP a->b over veth, MTU 1500",
                "congestion_control": self.cc,
                "duration_s": a.duration,
                "rounds": a.rounds,
                "configs": a.configs.iter().map(|c| c.name()).chain(a.tracing.then_some(TRACING)).chain(a.agent.then_some(AGENT)).collect::<Vec<_>>(),
                "parallel": a.parallel,
                "parallel_duration_s": a.parallel_duration,
                "watched": format!("{}/eth0 ({})", if a.side == Side::Receiver { "b" } else { "a" }, a.side.name()),
                "bpf_stats": "BPF_ENABLE_STATS descriptor held during the packet and tracing sections (not the agent section)",
                "bpf_stats_enabled_sysctl": m.bpf_stats_sysctl,
                "floor": "tc: empty programs behind netdoctor's on the same tcx hooks in the same runs; xdp: separate runs of the same configuration with empty programs",
            },
            "targets": {"throughput_ratio_min": TARGET_RATIO, "ns_above_floor_max": TARGET_NS_ABOVE_FLOOR},
            "throughput": throughput,
            "programs": programs,
            "runs": runs,
            "tracing": self.tracing.as_ref().map(|t| t.json(a.side, packet_floor(&self.runs))),
            "agent": self.agent.as_ref().map(|g| g.json(a.side)),
        })
    }
}

// ---------------------------------------------------------------------------------------
// Main
// ---------------------------------------------------------------------------------------

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

/// The plan: per round, baseline before each configuration; XDP configurations are followed
/// by their floor run.
fn plan(args: &Args) -> Vec<(Kind, u32, u32, u32)> {
    let mut steps = Vec::new();
    for round in 0..args.rounds {
        for &config in &args.configs {
            steps.push((Kind::Baseline, round, args.duration, 1));
            steps.push((Kind::Netdoctor(config), round, args.duration, 1));
            if config != Config::Tc {
                steps.push((Kind::Floor(config), round, args.duration, 1));
            }
        }
    }
    // The many-flows run belongs to the packet section: skipped when it measures nothing.
    if args.parallel > 1 && !args.configs.is_empty() {
        steps.push((Kind::Baseline, 0, args.parallel_duration, args.parallel));
        steps.push((
            Kind::Netdoctor(Config::Tc),
            0,
            args.parallel_duration,
            args.parallel,
        ));
    }
    steps
}

fn run(args: &Args) -> Result<ExitCode> {
    let mut tools = vec!["iperf3", "ss", "date"];
    if args.tracing {
        tools.push("nft");
    }
    if args.agent {
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
    let stats = if args.tracing || !args.configs.is_empty() {
        Some(StatsGuard::enable()?)
    } else {
        None
    };
    let lab = Lab::new(args.side)?;

    eprintln!("netdoctor-bench: warm-up run");
    let warm = lab.iperf(1, 1).context("warm-up iperf3 run")?;
    let cc = warm.sender_congestion.clone().unwrap_or_else(|| "?".into());

    let steps = plan(args);
    let total = steps.len();
    let mut runs = Vec::with_capacity(total);
    for (i, (kind, round, secs, parallel)) in steps.into_iter().enumerate() {
        let run = run_once(&lab, &floor, &netdoctor, kind, round, secs, parallel)
            .with_context(|| format!("run {} ({}, round {})", i + 1, kind.label(), round + 1))?;
        progress(&run, total, i + 1);
        runs.push(run);
    }
    let tracing = if args.tracing {
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
    let agent = if args.agent {
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
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report.json())?);
    } else {
        report.print_text();
    }
    Ok(ExitCode::SUCCESS)
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(Some(args)) => args,
        Ok(None) => return ExitCode::SUCCESS,
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

//! The agent section: `netdoctor agent` as a process, its CPU and memory idle and under
//! load, and the throughput it leaves.

mod metrics;
mod process;
mod report;
mod usage;

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};

use crate::args::Args;
use crate::lab::Lab;
use crate::machine::clk_tck;
use crate::programs::query_hooks;
use crate::tables::median;
use crate::STOP;
use metrics::{AgentMetrics, Evaluations};
use process::{free_port, AgentProc};
use usage::{bpf_memlock, thread_names, AgentMem, BpfMemlock, CpuMark, CpuWindow};

/// `--interval` of the measured agent.
pub(crate) const AGENT_INTERVAL: Duration = Duration::from_secs(10);
/// How long the agent may take to answer `/readyz` with 200 beyond its first interval.
pub(crate) const AGENT_READY_GRACE: Duration = Duration::from_secs(30);
/// How long the agent may take to exit after SIGTERM.
pub(crate) const AGENT_STOP_TIMEOUT: Duration = Duration::from_secs(20);

/// Sleeps until `t`; returns early (with an error) on SIGINT/SIGTERM.
pub(crate) fn sleep_until(t: Instant) -> Result<()> {
    loop {
        ensure!(!STOP.load(Ordering::SeqCst), "interrupted");
        let now = Instant::now();
        if now >= t {
            return Ok(());
        }
        std::thread::sleep((t - now).min(Duration::from_millis(200)));
    }
}

/// The idle window of the first agent.
#[derive(Debug, Clone)]
pub(crate) struct AgentIdle {
    pub(crate) cpu: CpuWindow,
    pub(crate) evaluations: Evaluations,
    pub(crate) mem: AgentMem,
    pub(crate) bpf: BpfMemlock,
    pub(crate) threads: Vec<(String, u64)>,
}

/// One round: baseline run, then a fresh agent and the same run with it watching.
#[derive(Debug, Clone)]
pub(crate) struct AgentRound {
    pub(crate) baseline_gbps: f64,
    pub(crate) gbps: f64,
    pub(crate) retransmits: Option<u64>,
    /// From agent start to `/readyz` 200.
    pub(crate) ready_s: f64,
    /// CPU from agent start to `/readyz` 200, children included (loading and verifying
    /// BPF programs, the first evaluation).
    pub(crate) startup_cpu_s: f64,
    /// From the start of the iperf3 run to the middle of the interval after it.
    pub(crate) load: CpuWindow,
    pub(crate) evaluations: Evaluations,
    /// After the load window.
    pub(crate) mem: AgentMem,
    pub(crate) stop_s: f64,
    /// netdoctor programs still attached to the watched interface after the agent exited.
    pub(crate) left_attached: usize,
}

/// What the agent section measured.
#[derive(Debug, Clone)]
pub(crate) struct AgentBench {
    pub(crate) clk_tck: f64,
    pub(crate) idle_secs: u32,
    pub(crate) duration: u32,
    pub(crate) idle: Option<AgentIdle>,
    pub(crate) rounds: Vec<AgentRound>,
    /// `/metrics` of the first agent, read after its load window.
    pub(crate) metrics: AgentMetrics,
}

pub(crate) fn run_agent(lab: &Lab, netdoctor: &str, args: &Args) -> Result<AgentBench> {
    let ns = lab.watched();
    let dir = tempfile::tempdir().context("creating the agent's database directory")?;
    let db = dir.path().join("nd.db");
    let port = free_port(ns)?;
    let mut out = AgentBench {
        clk_tck: clk_tck(),
        idle_secs: args.agent_idle,
        duration: args.duration,
        idle: None,
        rounds: Vec::new(),
        metrics: AgentMetrics::default(),
    };
    for round in 0..args.rounds {
        ensure!(!STOP.load(Ordering::SeqCst), "interrupted");
        let base = lab.iperf(args.duration, 1).context("baseline iperf3 run")?;
        let agent = AgentProc::start(lab, netdoctor, &db, port)?;
        let pid = agent.pid;
        let ready = CpuMark::read(pid)?;
        let ready_s = agent.ready_at.duration_since(agent.started).as_secs_f64();
        let startup_cpu_s = (ready.ticks + ready.child_ticks) as f64 / out.clk_tck;
        let attached = query_hooks(ns, lab.ifindex)?;
        let ours = attached.tc_in.len() + attached.tc_out.len() + usize::from(attached.xdp != 0);
        ensure!(
            ours > 0,
            "the agent is ready but nothing is attached to the watched interface; stderr: {}",
            agent.nd.stderr().unwrap_or_default().trim()
        );
        sleep_until(agent.midpoint_after(Instant::now()))?;

        if round == 0 {
            eprintln!(
                "netdoctor-bench: agent — idle for {} s (ready after {ready_s:.1} s)",
                args.agent_idle
            );
            let m0 = agent.metrics(ns)?;
            let c0 = CpuMark::read(pid)?;
            sleep_until(c0.at + Duration::from_secs(u64::from(args.agent_idle)))?;
            let c1 = CpuMark::read(pid)?;
            let mem = AgentMem::read(pid)?;
            let bpf = bpf_memlock(pid)?;
            let threads = thread_names(pid);
            let m1 = agent.metrics(ns)?;
            let idle = AgentIdle {
                cpu: CpuWindow::between(c0, c1, out.clk_tck),
                evaluations: Evaluations::between(&m0, &m1),
                mem,
                bpf,
                threads,
            };
            eprintln!(
                "netdoctor-bench: agent idle  {:.3} % of a core, VmRSS {:.1} MB (peak {:.1}), {} evaluations",
                idle.cpu.percent(),
                idle.mem.rss_mb(),
                idle.mem.hwm_mb(),
                idle.evaluations.count
            );
            out.idle = Some(idle);
            // The load window starts in the middle of an interval too.
            let now = Instant::now();
            let next = agent.midpoint_after(now);
            if next.duration_since(now) < AGENT_INTERVAL - Duration::from_secs(1) {
                sleep_until(next)?;
            }
        }

        let m0 = agent.metrics(ns)?;
        let c0 = CpuMark::read(pid)?;
        let report = lab
            .iperf(args.duration, 1)
            .context("iperf3 run with the agent")?;
        sleep_until(agent.midpoint_after(Instant::now()))?;
        let c1 = CpuMark::read(pid)?;
        let mem = AgentMem::read(pid)?;
        let m1 = agent.metrics(ns)?;
        let stop_s = agent.stop()?;
        let after = query_hooks(ns, lab.ifindex)?;
        let left_attached = after.tc_in.len() + after.tc_out.len() + usize::from(after.xdp != 0);
        let r = AgentRound {
            baseline_gbps: base.received_bits_per_second / 1e9,
            gbps: report.received_bits_per_second / 1e9,
            retransmits: report.retransmits,
            ready_s,
            startup_cpu_s,
            load: CpuWindow::between(c0, c1, out.clk_tck),
            evaluations: Evaluations::between(&m0, &m1),
            mem,
            stop_s,
            left_attached,
        };
        eprintln!(
            "netdoctor-bench: agent round {} baseline {:.2} Gbit/s, with agent {:.2} Gbit/s, load {:.2} % of a core over {:.1} s, VmRSS {:.1} MB (peak {:.1})",
            round + 1,
            r.baseline_gbps,
            r.gbps,
            r.load.percent(),
            r.load.secs,
            r.mem.rss_mb(),
            r.mem.hwm_mb()
        );
        if round == 0 {
            out.metrics = m1;
        }
        out.rounds.push(r);
    }
    Ok(out)
}

impl AgentBench {
    pub(crate) fn load_cpu_percent(&self) -> Option<f64> {
        median(
            &self
                .rounds
                .iter()
                .map(|r| r.load.percent())
                .collect::<Vec<_>>(),
        )
    }

    pub(crate) fn load_rss_mb(&self) -> Option<f64> {
        self.rounds.iter().map(|r| r.mem.rss_mb()).reduce(f64::max)
    }

    /// The highest VmHWM of any agent instance.
    pub(crate) fn peak_mb(&self) -> Option<f64> {
        self.rounds.iter().map(|r| r.mem.hwm_mb()).reduce(f64::max)
    }

    pub(crate) fn gbps(&self) -> (Option<f64>, Option<f64>) {
        let base: Vec<f64> = self.rounds.iter().map(|r| r.baseline_gbps).collect();
        let with: Vec<f64> = self.rounds.iter().map(|r| r.gbps).collect();
        (median(&base), median(&with))
    }

    pub(crate) fn ratio(&self) -> Option<f64> {
        let (b, w) = self.gbps();
        b.zip(w).filter(|(b, _)| *b > 0.0).map(|(b, w)| w / b)
    }

    pub(crate) fn load_evaluations(&self) -> Evaluations {
        self.rounds
            .iter()
            .fold(Evaluations::default(), |acc, r| Evaluations {
                count: acc.count + r.evaluations.count,
                sum_s: acc.sum_s + r.evaluations.sum_s,
            })
    }
}

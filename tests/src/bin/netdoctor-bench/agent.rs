//! The agent section: `netdoctor agent` as a process, its CPU and memory idle and under
//! load, and the throughput it leaves.

use std::collections::HashMap;
use std::io;
use std::net::{Ipv4Addr, TcpListener};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use netdoctor_lab::{BgProcess, Netns};
use nix::sys::signal::Signal;
use serde_json::{json, Value};

use crate::args::{Args, Side};
use crate::lab::Lab;
use crate::machine::clk_tck;
use crate::programs::query_hooks;
use crate::report::{fmt_opt, verdict};
use crate::tables::median;
use crate::{STOP, TARGET_AGENT_IDLE_CPU_PERCENT, TARGET_AGENT_RSS_MB};

/// `--interval` of the measured agent.
const AGENT_INTERVAL: Duration = Duration::from_secs(10);
/// How long the agent may take to answer `/readyz` with 200 beyond its first interval.
const AGENT_READY_GRACE: Duration = Duration::from_secs(30);
/// How long the agent may take to exit after SIGTERM.
const AGENT_STOP_TIMEOUT: Duration = Duration::from_secs(20);
const KIB_PER_MB: f64 = 1024.0;

/// GET `path` from the agent on `port` of `ns`'s loopback (from a thread inside `ns`).
/// Returns the status and the body; any status is a success here.
fn agent_get(ns: &Netns, port: u16, path: &str) -> Result<(u16, String)> {
    let url = format!("http://127.0.0.1:{port}{path}");
    ns.run_in(move || -> Result<(u16, String)> {
        let config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .proxy(None)
            .timeout_global(Some(Duration::from_secs(5)))
            .build();
        let client = ureq::Agent::new_with_config(config);
        let mut resp = client
            .get(&url)
            .call()
            .with_context(|| format!("GET {url}"))?;
        let status = resp.status().as_u16();
        let body = resp
            .body_mut()
            .read_to_string()
            .with_context(|| format!("reading the body of GET {url}"))?;
        Ok((status, body))
    })?
}

/// A free TCP port on `ns`'s loopback (the namespace is the lab's own: nothing else
/// competes for it).
fn free_port(ns: &Netns) -> Result<u16> {
    ns.run_in(|| -> io::Result<u16> {
        Ok(TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?
            .local_addr()?
            .port())
    })?
    .context("finding a free port for the agent")
}

/// utime + stime of every thread of `pid`, alive or exited, and cutime + cstime of its
/// reaped children (clock ticks).
fn proc_cpu_ticks(pid: u32) -> Result<(u64, u64)> {
    let path = format!("/proc/{pid}/stat");
    let stat = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
    // The command name may hold spaces and parentheses: fields start after the last ')'.
    let rest = stat
        .rsplit_once(')')
        .map(|(_, r)| r)
        .with_context(|| format!("unexpected {path}: {stat}"))?;
    // After ')': field 3 (state) is index 0, so utime (14) is 11, stime (15) 12, cutime
    // (16) 13 and cstime (17) 14.
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |i: usize| -> Result<u64> {
        fields
            .get(i)
            .and_then(|v| v.parse::<u64>().ok())
            .with_context(|| format!("no field {} in {path}", i + 3))
    };
    Ok((field(11)? + field(12)?, field(13)? + field(14)?))
}

/// `Key:   value ...` lines of `/proc/PID/status`, first number only.
fn proc_status(pid: u32) -> Result<HashMap<String, u64>> {
    let path = format!("/proc/{pid}/status");
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
    Ok(text
        .lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(':')?;
            let n = v.split_whitespace().next()?.parse::<u64>().ok()?;
            Some((k.trim().to_owned(), n))
        })
        .collect())
}

/// The agent's memory at one moment (`/proc/PID/status`, kB).
#[derive(Debug, Clone, Copy, Default)]
struct AgentMem {
    rss_kb: u64,
    hwm_kb: u64,
    anon_kb: u64,
    file_kb: u64,
    shmem_kb: u64,
    threads: u64,
}

impl AgentMem {
    fn read(pid: u32) -> Result<AgentMem> {
        let st = proc_status(pid)?;
        let kb = |k: &str| st.get(k).copied().unwrap_or(0);
        Ok(AgentMem {
            rss_kb: kb("VmRSS"),
            hwm_kb: kb("VmHWM"),
            anon_kb: kb("RssAnon"),
            file_kb: kb("RssFile"),
            shmem_kb: kb("RssShmem"),
            threads: kb("Threads"),
        })
    }

    fn rss_mb(&self) -> f64 {
        self.rss_kb as f64 / KIB_PER_MB
    }

    fn hwm_mb(&self) -> f64 {
        self.hwm_kb as f64 / KIB_PER_MB
    }

    pub(crate) fn json(&self) -> Value {
        json!({
            "vm_rss_mb": self.rss_mb(),
            "vm_hwm_mb": self.hwm_mb(),
            "rss_anon_mb": self.anon_kb as f64 / KIB_PER_MB,
            "rss_file_mb": self.file_kb as f64 / KIB_PER_MB,
            "rss_shmem_mb": self.shmem_kb as f64 / KIB_PER_MB,
            "threads": self.threads,
        })
    }
}

/// Kernel memory the agent's BPF objects hold (`memlock` of its map and program
/// descriptors, each object once): not part of its RSS.
#[derive(Debug, Clone, Copy, Default)]
struct BpfMemlock {
    maps: u64,
    map_bytes: u64,
    progs: u64,
    prog_bytes: u64,
}

fn bpf_memlock(pid: u32) -> Result<BpfMemlock> {
    let dir = PathBuf::from(format!("/proc/{pid}/fdinfo"));
    let (mut maps, mut progs) = (HashMap::new(), HashMap::new());
    for entry in std::fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))? {
        let Ok(text) = entry.and_then(|e| std::fs::read_to_string(e.path())) else {
            continue;
        };
        let field = |key: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(key))
                .and_then(|v| v.trim().parse::<u64>().ok())
        };
        let Some(memlock) = field("memlock:") else {
            continue;
        };
        if text.contains("map_type:") {
            if let Some(id) = field("map_id:") {
                maps.insert(id, memlock);
            }
        } else if text.contains("prog_type:") {
            if let Some(id) = field("prog_id:") {
                progs.insert(id, memlock);
            }
        }
    }
    Ok(BpfMemlock {
        maps: maps.len() as u64,
        map_bytes: maps.values().sum(),
        progs: progs.len() as u64,
        prog_bytes: progs.values().sum(),
    })
}

/// Names of the agent's threads (`/proc/PID/task/*/comm`), with their count.
fn thread_names(pid: u32) -> Vec<(String, u64)> {
    let mut names: HashMap<String, u64> = HashMap::new();
    if let Ok(entries) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for e in entries.flatten() {
            if let Ok(comm) = std::fs::read_to_string(e.path().join("comm")) {
                *names.entry(comm.trim().to_owned()).or_default() += 1;
            }
        }
    }
    let mut v: Vec<(String, u64)> = names.into_iter().collect();
    v.sort();
    v
}

/// What the agent's `/metrics` said at one moment.
#[derive(Debug, Clone, Default)]
struct AgentMetrics {
    series: usize,
    families: usize,
    eval_sum_s: f64,
    eval_count: u64,
    /// Series per metric family, largest first.
    by_family: Vec<(String, usize)>,
}

fn parse_metrics(text: &str) -> AgentMetrics {
    let mut m = AgentMetrics::default();
    let mut family = String::new();
    let mut by_family: HashMap<String, usize> = HashMap::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            family = rest
                .split_whitespace()
                .next()
                .unwrap_or_default()
                .to_owned();
            m.families += 1;
            continue;
        }
        if line.starts_with('#') {
            continue;
        }
        m.series += 1;
        let name = line.split(['{', ' ']).next().unwrap_or_default().to_owned();
        let value = line
            .rsplit_once('}')
            .map_or(line, |(_, r)| r)
            .split_whitespace()
            .last()
            .and_then(|v| v.parse::<f64>().ok());
        match (name.as_str(), value) {
            ("netdoctor_evaluation_duration_seconds_sum", Some(v)) => m.eval_sum_s = v,
            ("netdoctor_evaluation_duration_seconds_count", Some(v)) => m.eval_count = v as u64,
            _ => {}
        }
        let key = if !family.is_empty() && name.starts_with(&family) {
            family.clone()
        } else {
            name
        };
        *by_family.entry(key).or_default() += 1;
    }
    m.by_family = by_family.into_iter().collect();
    m.by_family
        .sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    m
}

/// Evaluations between two `/metrics` reads.
#[derive(Debug, Clone, Copy, Default)]
struct Evaluations {
    count: u64,
    sum_s: f64,
}

impl Evaluations {
    fn between(before: &AgentMetrics, after: &AgentMetrics) -> Evaluations {
        Evaluations {
            count: after.eval_count.saturating_sub(before.eval_count),
            sum_s: (after.eval_sum_s - before.eval_sum_s).max(0.0),
        }
    }

    fn mean_ms(&self) -> Option<f64> {
        (self.count > 0).then(|| self.sum_s * 1e3 / self.count as f64)
    }

    pub(crate) fn json(&self) -> Value {
        json!({"count": self.count, "sum_s": self.sum_s, "mean_ms": self.mean_ms()})
    }
}

/// CPU and wall-clock time at one moment.
#[derive(Debug, Clone, Copy)]
struct CpuMark {
    at: Instant,
    ticks: u64,
    /// Of reaped children (the agent runs `nft` and `iptables-save` for some facts).
    child_ticks: u64,
    /// Voluntary context switches of the main (tokio) thread: its wake-ups.
    wakeups: u64,
}

impl CpuMark {
    fn read(pid: u32) -> Result<CpuMark> {
        let (ticks, child_ticks) = proc_cpu_ticks(pid)?;
        let wakeups = proc_status(pid)?
            .get("voluntary_ctxt_switches")
            .copied()
            .unwrap_or(0);
        Ok(CpuMark {
            at: Instant::now(),
            ticks,
            child_ticks,
            wakeups,
        })
    }
}

/// CPU over one window.
#[derive(Debug, Clone, Copy, Default)]
struct CpuWindow {
    secs: f64,
    cpu_s: f64,
    children_cpu_s: f64,
    wakeups: u64,
}

impl CpuWindow {
    fn between(a: CpuMark, b: CpuMark, clk_tck: f64) -> CpuWindow {
        CpuWindow {
            secs: b.at.duration_since(a.at).as_secs_f64(),
            cpu_s: b.ticks.saturating_sub(a.ticks) as f64 / clk_tck,
            children_cpu_s: b.child_ticks.saturating_sub(a.child_ticks) as f64 / clk_tck,
            wakeups: b.wakeups.saturating_sub(a.wakeups),
        }
    }

    /// Percent of one core.
    fn percent(&self) -> f64 {
        if self.secs > 0.0 {
            self.cpu_s / self.secs * 100.0
        } else {
            0.0
        }
    }

    /// Percent of one core used by the children the agent reaped in the window.
    fn children_percent(&self) -> f64 {
        if self.secs > 0.0 {
            self.children_cpu_s / self.secs * 100.0
        } else {
            0.0
        }
    }

    fn wakeups_per_s(&self) -> f64 {
        if self.secs > 0.0 {
            self.wakeups as f64 / self.secs
        } else {
            0.0
        }
    }

    pub(crate) fn json(&self) -> Value {
        json!({
            "secs": self.secs,
            "cpu_s": self.cpu_s,
            "cpu_percent_of_core": self.percent(),
            "children_cpu_s": self.children_cpu_s,
            "children_cpu_percent_of_core": self.children_percent(),
            "main_thread_wakeups_per_s": self.wakeups_per_s(),
        })
    }
}

/// A running `netdoctor agent`.
#[derive(Debug)]
struct AgentProc {
    nd: BgProcess,
    pid: u32,
    port: u16,
    started: Instant,
    /// When `/readyz` first answered 200: just after the first evaluation. Evaluations
    /// then follow every interval.
    ready_at: Instant,
}

impl AgentProc {
    fn start(lab: &Lab, netdoctor: &str, db: &std::path::Path, port: u16) -> Result<AgentProc> {
        let ns = lab.watched();
        let db = db.to_string_lossy();
        let listen = format!("127.0.0.1:{port}");
        let interval = format!("{}s", AGENT_INTERVAL.as_secs());
        let argv = [
            netdoctor,
            "agent",
            "--interval",
            &interval,
            "--no-probe",
            "--database",
            &db,
            "--listen",
            &listen,
        ];
        let started = Instant::now();
        let mut nd = ns.spawn(&argv)?;
        let pid = nd.pid();
        let deadline = started + AGENT_INTERVAL + AGENT_READY_GRACE;
        let mut last = String::from("no answer yet");
        loop {
            ensure!(!STOP.load(Ordering::SeqCst), "interrupted");
            if let Some(status) = nd.try_status()? {
                bail!(
                    "`{}` exited ({status}) before /readyz answered 200 (last: {last}); stderr: {}",
                    argv.join(" "),
                    nd.stderr().unwrap_or_default().trim()
                );
            }
            match agent_get(ns, port, "/readyz") {
                Ok((200, _)) => break,
                Ok((code, body)) => last = format!("{code} {}", body.trim()),
                Err(e) => last = format!("{e:#}"),
            }
            if Instant::now() >= deadline {
                bail!(
                    "`{}`: /readyz did not answer 200 within {:?} (last: {last}); stderr: {}",
                    argv.join(" "),
                    deadline.duration_since(started),
                    nd.stderr().unwrap_or_default().trim()
                );
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        Ok(AgentProc {
            nd,
            pid,
            port,
            started,
            ready_at: Instant::now(),
        })
    }

    fn metrics(&self, ns: &Netns) -> Result<AgentMetrics> {
        let (status, body) = agent_get(ns, self.port, "/metrics")?;
        ensure!(status == 200, "GET /metrics: {status} {}", body.trim());
        Ok(parse_metrics(&body))
    }

    /// The first middle of an evaluation interval at or after `t` (evaluations end just
    /// before `ready_at + k × interval`).
    fn midpoint_after(&self, t: Instant) -> Instant {
        let half = AGENT_INTERVAL / 2;
        let mut m = self.ready_at + half;
        while m < t {
            m += AGENT_INTERVAL;
        }
        m
    }

    /// SIGTERM; returns how long the agent took to exit, which must be with status 0.
    fn stop(mut self) -> Result<f64> {
        let t = Instant::now();
        self.nd.signal(Signal::SIGTERM)?;
        let status = self.nd.wait_timeout(AGENT_STOP_TIMEOUT)?;
        ensure!(
            status.success(),
            "netdoctor agent exited with {status} after SIGTERM (0 expected); stderr: {}",
            self.nd.stderr().unwrap_or_default().trim()
        );
        Ok(t.elapsed().as_secs_f64())
    }
}

/// Sleeps until `t`; returns early (with an error) on SIGINT/SIGTERM.
fn sleep_until(t: Instant) -> Result<()> {
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
struct AgentIdle {
    cpu: CpuWindow,
    evaluations: Evaluations,
    mem: AgentMem,
    bpf: BpfMemlock,
    threads: Vec<(String, u64)>,
}

/// One round: baseline run, then a fresh agent and the same run with it watching.
#[derive(Debug, Clone)]
struct AgentRound {
    baseline_gbps: f64,
    gbps: f64,
    retransmits: Option<u64>,
    /// From agent start to `/readyz` 200.
    ready_s: f64,
    /// CPU from agent start to `/readyz` 200, children included (loading and verifying
    /// BPF programs, the first evaluation).
    startup_cpu_s: f64,
    /// From the start of the iperf3 run to the middle of the interval after it.
    load: CpuWindow,
    evaluations: Evaluations,
    /// After the load window.
    mem: AgentMem,
    stop_s: f64,
    /// netdoctor programs still attached to the watched interface after the agent exited.
    left_attached: usize,
}

/// What the agent section measured.
#[derive(Debug, Clone)]
pub(crate) struct AgentBench {
    clk_tck: f64,
    idle_secs: u32,
    duration: u32,
    idle: Option<AgentIdle>,
    rounds: Vec<AgentRound>,
    /// `/metrics` of the first agent, read after its load window.
    metrics: AgentMetrics,
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
    fn load_cpu_percent(&self) -> Option<f64> {
        median(
            &self
                .rounds
                .iter()
                .map(|r| r.load.percent())
                .collect::<Vec<_>>(),
        )
    }

    fn load_rss_mb(&self) -> Option<f64> {
        self.rounds.iter().map(|r| r.mem.rss_mb()).reduce(f64::max)
    }

    /// The highest VmHWM of any agent instance.
    fn peak_mb(&self) -> Option<f64> {
        self.rounds.iter().map(|r| r.mem.hwm_mb()).reduce(f64::max)
    }

    fn gbps(&self) -> (Option<f64>, Option<f64>) {
        let base: Vec<f64> = self.rounds.iter().map(|r| r.baseline_gbps).collect();
        let with: Vec<f64> = self.rounds.iter().map(|r| r.gbps).collect();
        (median(&base), median(&with))
    }

    fn ratio(&self) -> Option<f64> {
        let (b, w) = self.gbps();
        b.zip(w).filter(|(b, _)| *b > 0.0).map(|(b, w)| w / b)
    }

    fn load_evaluations(&self) -> Evaluations {
        self.rounds
            .iter()
            .fold(Evaluations::default(), |acc, r| Evaluations {
                count: acc.count + r.evaluations.count,
                sum_s: acc.sum_s + r.evaluations.sum_s,
            })
    }

    pub(crate) fn print_text(&self, side: Side) {
        let ns = side.namespace();
        println!(
            "Agent: `netdoctor agent --interval {}s --no-probe` in {ns}, watching {ns}/eth0 (the process itself: /proc/PID/stat, /proc/PID/status)",
            AGENT_INTERVAL.as_secs()
        );
        println!(
            "  CPU = Δ(utime + stime) / (elapsed × CLK_TCK {}) in % of one core; windows run from the middle of one",
            self.clk_tck
        );
        println!("  evaluation interval to the middle of another, so they hold whole evaluations; /metrics scrapes");
        println!("  fall between windows. The data-plane programs' own cost is in softirq time, not the agent's:");
        println!("  see the packet section. MB = 1024 kB as /proc reports.");
        println!("  {:<44} {:>16}  {:<10}", "figure", "value", "target");
        let row = |what: String, value: String, target: &str, verdict_: &str| {
            println!("  {what:<44} {value:>16}  {target:<10} {verdict_}");
        };
        if let Some(idle) = &self.idle {
            let pct = idle.cpu.percent();
            row(
                format!(
                    "idle CPU ({:.1} s, {} evaluations)",
                    idle.cpu.secs, idle.evaluations.count
                ),
                format!("{pct:.3} %"),
                &format!("≤ {TARGET_AGENT_IDLE_CPU_PERCENT} %"),
                verdict(pct <= TARGET_AGENT_IDLE_CPU_PERCENT),
            );
            let rss = idle.mem.rss_mb();
            row(
                "idle RSS (VmRSS at the end of the window)".into(),
                format!("{rss:.1} MB"),
                &format!("≤ {TARGET_AGENT_RSS_MB:.0} MB"),
                verdict(rss <= TARGET_AGENT_RSS_MB),
            );
        }
        if let Some(rss) = self.load_rss_mb() {
            row(
                format!("RSS after load (VmRSS, max of {})", self.rounds.len()),
                format!("{rss:.1} MB"),
                &format!("≤ {TARGET_AGENT_RSS_MB:.0} MB"),
                verdict(rss <= TARGET_AGENT_RSS_MB),
            );
        }
        if let Some(peak) = self.peak_mb() {
            row(
                "peak RSS (VmHWM, whole life, max)".into(),
                format!("{peak:.1} MB"),
                &format!("≤ {TARGET_AGENT_RSS_MB:.0} MB"),
                verdict(peak <= TARGET_AGENT_RSS_MB),
            );
        }
        if let Some(pct) = self.load_cpu_percent() {
            let secs =
                median(&self.rounds.iter().map(|r| r.load.secs).collect::<Vec<_>>()).unwrap_or(0.0);
            row(
                format!(
                    "load CPU ({} s iperf3 in {secs:.1} s, median of {})",
                    self.duration,
                    self.rounds.len()
                ),
                format!("{pct:.3} %"),
                "–",
                "",
            );
        }
        if let (Some(ratio), (Some(b), Some(w))) = (self.ratio(), self.gbps()) {
            row(
                "throughput with the agent / baseline".into(),
                format!("{:.1} %", ratio * 100.0),
                "–",
                &format!("({w:.2} / {b:.2} Gbit/s, medians)"),
            );
        }
        if let Some(idle) = &self.idle {
            let load = self.load_evaluations();
            println!(
                "  evaluation (netdoctor_evaluation_duration_seconds sum/count): idle {} ms mean of {}, load {} ms mean of {}",
                fmt_opt(idle.evaluations.mean_ms(), 2),
                idle.evaluations.count,
                fmt_opt(load.mean_ms(), 2),
                load.count
            );
            println!(
                "  idle, not in the figure above: the children it ran and reaped (nft, iptables-save, ...) {:.3} % of a core",
                idle.cpu.children_percent()
            );
            println!(
                "  idle detail: main-thread wake-ups {:.1}/s; RssAnon {:.1} MB, RssFile {:.1} MB, RssShmem {:.1} MB; {} threads ({})",
                idle.cpu.wakeups_per_s(),
                idle.mem.anon_kb as f64 / KIB_PER_MB,
                idle.mem.file_kb as f64 / KIB_PER_MB,
                idle.mem.shmem_kb as f64 / KIB_PER_MB,
                idle.mem.threads,
                idle.threads
                    .iter()
                    .map(|(n, c)| if *c > 1 { format!("{n} ×{c}") } else { n.clone() })
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            println!(
                "  kernel memory (not in RSS): BPF maps {:.1} MB in {} maps, programs {:.1} MB in {} programs (memlock)",
                idle.bpf.map_bytes as f64 / 1048576.0,
                idle.bpf.maps,
                idle.bpf.prog_bytes as f64 / 1048576.0,
                idle.bpf.progs
            );
        }
        let m = &self.metrics;
        println!(
            "  /metrics (first agent, after its load window): {} series in {} families; largest: {}",
            m.series,
            m.families,
            m.by_family
                .iter()
                .take(5)
                .map(|(f, n)| format!("{f} {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        println!("  per round: baseline / with agent Gbit/s, ready after, startup CPU, load CPU (+ children), VmRSS / VmHWM, SIGTERM → exit");
        for (i, r) in self.rounds.iter().enumerate() {
            println!(
                "    {}: {:>6.2} / {:>6.2}  ready {:>4.1} s  startup {:>5.2} s CPU  load {:>6.3} % (+{:.3} %; {} eval, {} ms)  {:>5.1} / {:>5.1} MB  exit 0 in {:.2} s{}",
                i + 1,
                r.baseline_gbps,
                r.gbps,
                r.ready_s,
                r.startup_cpu_s,
                r.load.percent(),
                r.load.children_percent(),
                r.evaluations.count,
                fmt_opt(r.evaluations.mean_ms(), 1),
                r.mem.rss_mb(),
                r.mem.hwm_mb(),
                r.stop_s,
                if r.left_attached > 0 {
                    format!("; {} programs LEFT ATTACHED", r.left_attached)
                } else {
                    String::new()
                }
            );
        }
    }

    pub(crate) fn json(&self, side: Side) -> Value {
        let ns = side.namespace();
        let load = self.load_evaluations();
        let (b, w) = self.gbps();
        json!({
            "setup": {
                "agent": format!("netdoctor agent --interval {}s --no-probe --database TMP/nd.db --listen 127.0.0.1:PORT, in {ns}, watching {ns}/eth0", AGENT_INTERVAL.as_secs()),
                "idle_secs": self.idle_secs,
                "load": format!("per round: iperf3 a->b 1 stream {} s with nothing attached, then a fresh agent and the same run; CPU from the run's start to the middle of the next evaluation interval", self.duration),
                "cpu": "delta(utime+stime) of /proc/PID/stat / (elapsed * CLK_TCK), percent of one core; windows from mid-interval to mid-interval",
                "memory": "VmRSS / VmHWM of /proc/PID/status; MB = 1024 kB",
                "clk_tck": self.clk_tck,
                "bpf_stats": "off in this section",
            },
            "targets": {
                "rss_mb_max": TARGET_AGENT_RSS_MB,
                "idle_cpu_percent_max": TARGET_AGENT_IDLE_CPU_PERCENT,
            },
            "idle": self.idle.as_ref().map(|i| json!({
                "cpu": i.cpu.json(),
                "evaluations": i.evaluations.json(),
                "memory": i.mem.json(),
                "bpf_memlock": {
                    "maps": i.bpf.maps,
                    "map_bytes": i.bpf.map_bytes,
                    "programs": i.bpf.progs,
                    "program_bytes": i.bpf.prog_bytes,
                },
                "threads": i.threads.iter().map(|(n, c)| json!({"name": n, "count": c})).collect::<Vec<_>>(),
                "target_met": {
                    "cpu": i.cpu.percent() <= TARGET_AGENT_IDLE_CPU_PERCENT,
                    "rss": i.mem.rss_mb() <= TARGET_AGENT_RSS_MB,
                },
            })),
            "load": {
                "cpu_percent_of_core_median": self.load_cpu_percent(),
                "vm_rss_mb_max": self.load_rss_mb(),
                "vm_hwm_mb_max": self.peak_mb(),
                "evaluations": load.json(),
                "baseline_gbps_median": b,
                "with_agent_gbps_median": w,
                "ratio_vs_baseline": self.ratio(),
                "target_met": {
                    "rss": self.load_rss_mb().map(|r| r <= TARGET_AGENT_RSS_MB),
                    "peak_rss": self.peak_mb().map(|r| r <= TARGET_AGENT_RSS_MB),
                },
            },
            "metrics": {
                "series": self.metrics.series,
                "families": self.metrics.families,
                "evaluation_sum_s": self.metrics.eval_sum_s,
                "evaluation_count": self.metrics.eval_count,
                "evaluation_mean_ms": (self.metrics.eval_count > 0).then(|| self.metrics.eval_sum_s * 1e3 / self.metrics.eval_count as f64),
                "series_by_family": self.metrics.by_family.iter().map(|(f, n)| json!({"family": f, "series": n})).collect::<Vec<_>>(),
            },
            "rounds": self.rounds.iter().map(|r| json!({
                "baseline_gbps": r.baseline_gbps,
                "with_agent_gbps": r.gbps,
                "retransmits": r.retransmits,
                "ready_s": r.ready_s,
                "startup_cpu_s": r.startup_cpu_s,
                "load": r.load.json(),
                "evaluations": r.evaluations.json(),
                "memory": r.mem.json(),
                "sigterm_exit_0_s": r.stop_s,
                "programs_left_attached": r.left_attached,
            })).collect::<Vec<_>>(),
        })
    }
}

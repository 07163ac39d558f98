//! The agent section's text table and JSON.

use serde_json::{json, Value};

use crate::agent::usage::KIB_PER_MB;
use crate::agent::{AgentBench, AGENT_INTERVAL};
use crate::args::Side;
use crate::report::{fmt_opt, verdict};
use crate::tables::median;
use crate::{TARGET_AGENT_IDLE_CPU_PERCENT, TARGET_AGENT_RSS_MB};

impl AgentBench {
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

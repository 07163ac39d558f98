//! What a process uses, from `/proc`: CPU ticks and wake-ups over a window, resident
//! memory, the kernel memory its BPF objects hold, its threads.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result};
use netdoctor_lab::proc_usage::{proc_cpu_ticks, proc_status};
use serde_json::{json, Value};

/// kB in an MB, as `/proc` counts them.
pub(crate) const KIB_PER_MB: f64 = 1024.0;

/// The agent's memory at one moment (`/proc/PID/status`, kB).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct AgentMem {
    pub(crate) rss_kb: u64,
    pub(crate) hwm_kb: u64,
    pub(crate) anon_kb: u64,
    pub(crate) file_kb: u64,
    pub(crate) shmem_kb: u64,
    pub(crate) threads: u64,
}

impl AgentMem {
    pub(crate) fn read(pid: u32) -> Result<AgentMem> {
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

    pub(crate) fn rss_mb(&self) -> f64 {
        self.rss_kb as f64 / KIB_PER_MB
    }

    pub(crate) fn hwm_mb(&self) -> f64 {
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
pub(crate) struct BpfMemlock {
    pub(crate) maps: u64,
    pub(crate) map_bytes: u64,
    pub(crate) progs: u64,
    pub(crate) prog_bytes: u64,
}

pub(crate) fn bpf_memlock(pid: u32) -> Result<BpfMemlock> {
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
pub(crate) fn thread_names(pid: u32) -> Vec<(String, u64)> {
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

/// CPU and wall-clock time at one moment.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CpuMark {
    pub(crate) at: Instant,
    pub(crate) ticks: u64,
    /// Of reaped children (the agent runs `nft` and `iptables-save` for some facts).
    pub(crate) child_ticks: u64,
    /// Voluntary context switches of the main (tokio) thread: its wake-ups.
    pub(crate) wakeups: u64,
}

impl CpuMark {
    pub(crate) fn read(pid: u32) -> Result<CpuMark> {
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
pub(crate) struct CpuWindow {
    pub(crate) secs: f64,
    pub(crate) cpu_s: f64,
    pub(crate) children_cpu_s: f64,
    pub(crate) wakeups: u64,
}

impl CpuWindow {
    pub(crate) fn between(a: CpuMark, b: CpuMark, clk_tck: f64) -> CpuWindow {
        CpuWindow {
            secs: b.at.duration_since(a.at).as_secs_f64(),
            cpu_s: b.ticks.saturating_sub(a.ticks) as f64 / clk_tck,
            children_cpu_s: b.child_ticks.saturating_sub(a.child_ticks) as f64 / clk_tck,
            wakeups: b.wakeups.saturating_sub(a.wakeups),
        }
    }

    /// Percent of one core.
    pub(crate) fn percent(&self) -> f64 {
        if self.secs > 0.0 {
            self.cpu_s / self.secs * 100.0
        } else {
            0.0
        }
    }

    /// Percent of one core used by the children the agent reaped in the window.
    pub(crate) fn children_percent(&self) -> f64 {
        if self.secs > 0.0 {
            self.children_cpu_s / self.secs * 100.0
        } else {
            0.0
        }
    }

    pub(crate) fn wakeups_per_s(&self) -> f64 {
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

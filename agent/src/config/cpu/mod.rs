//! What the userspace daemon serving a TUN/TAP tunnel (tincd, fastd, wireguard-go,
//! boringtun, tailscaled, OpenVPN, VpnCloud) used of the CPU during the observation, against
//! what it can get: a daemon that uses all of it limits the tunnel, whatever the link
//! carries.
//!
//! - **Used**: `utime + stime` of `/proc/PID/stat` at the window's start and end, in clock
//!   ticks (`sysconf(_SC_CLK_TCK)`, not assumed 100), over the time between the readings,
//!   in percent of one core. The process's line counts every thread it has had: the
//!   kernel adds a thread's time to its process when it exits, so a thread that ends
//!   during the window still counts (summing `/proc/PID/task/*/stat` would lose it).
//! - **Could get** ([`Limit`]): the fewest of the threads that ran during the window
//!   (each runs on one core at a time: a single-threaded tincd or fastd gets one core at
//!   most), the host's online CPUs, the CPUs its threads may run on, and its cgroup's CPU
//!   quota. Threads are read per task (`/proc/PID/task/TID/stat`, at most
//!   [`MAX_TASKS`]): one that ran is one whose time grew, or that was born during the
//!   window with time of its own; one that exited is not counted (its time is).
//! - The host's busy share (`/proc/stat`) tells a daemon at its own limit from a host
//!   saturated by something else, where the daemon gets less than its limit.
//!
//! A daemon that is not root's (see [`crate::config::trusted::Uids`]) is measured all the same and
//! its uid reported: these numbers are the kernel's accounting of the process, which the
//! process cannot write. What it can choose is its name (`comm`, which picks the remedy a
//! finding names, and which the stat parser skips by the last `)`), its own affinity and a
//! delegated cgroup's quota, and those limit it as reported. Nothing is executed; every
//! file is read with a size cap.

mod limit;
mod procfs;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

use serde::Serialize;

pub use limit::{online_cpus, Limit, LimitedBy};
pub use procfs::HostSample;

/// Threads read per sample: a daemon with more is limited by the host's CPUs anyway.
pub const MAX_TASKS: usize = 1024;

/// Why a daemon's CPU was not measured.
#[derive(Debug, thiserror::Error)]
pub enum CpuError {
    /// A /proc file could not be read (the process exited).
    #[error("{path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The process at the end is not the one at the start.
    #[error("the daemon (pid {0}) exited or was replaced during the observation")]
    Replaced(u32),
    /// No clock tick rate.
    #[error("the kernel's clock tick rate (sysconf _SC_CLK_TCK) is unknown")]
    ClockTicks,
    /// The two readings were taken at the same moment.
    #[error("no time passed between the two readings")]
    NoTime,
}

/// The kernel's clock ticks per second (`USER_HZ`), the unit of `/proc/PID/stat` times.
pub fn clock_ticks() -> Result<u64, CpuError> {
    nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .and_then(|t| u64::try_from(t).ok())
        .filter(|t| *t > 0)
        .ok_or(CpuError::ClockTicks)
}

/// One reading of a daemon's CPU time, its threads' and what it could get.
#[derive(Debug, Clone)]
pub struct DaemonSample {
    /// Process id.
    pub pid: u32,
    start_time: u64,
    /// `utime + stime` of the process, clock ticks.
    ticks: u64,
    /// Live threads (`num_threads`).
    threads: u64,
    /// Each live thread's `utime + stime` (at most [`MAX_TASKS`] of them).
    tasks: BTreeMap<u32, u64>,
    limit: Limit,
    at: Instant,
}

fn read_error(path: &Path) -> impl FnOnce(std::io::Error) -> CpuError + '_ {
    move |source| CpuError::Read {
        path: path.display().to_string(),
        source,
    }
}

impl DaemonSample {
    /// Reads process `pid`.
    pub fn read(pid: u32) -> Result<DaemonSample, CpuError> {
        let base = Path::new("/proc").join(pid.to_string());
        let stat_path = base.join("stat");
        let whole = procfs::stat(&stat_path).map_err(read_error(&stat_path))?;
        let at = Instant::now();
        let mut tasks = BTreeMap::new();
        let task_dir = base.join("task");
        let entries = std::fs::read_dir(&task_dir).map_err(read_error(&task_dir))?;
        for entry in entries.filter_map(Result::ok).take(MAX_TASKS) {
            let Some(tid) = entry.file_name().to_str().and_then(|n| n.parse().ok()) else {
                continue;
            };
            // A thread that exits between the listing and the read is left out.
            if let Ok(s) = procfs::stat(&entry.path().join("stat")) {
                tasks.insert(tid, s.ticks);
            }
        }
        let limit = Limit::read(pid, tasks.keys().copied());
        Ok(DaemonSample {
            pid,
            start_time: whole.start_time,
            ticks: whole.ticks,
            threads: whole.threads,
            tasks,
            limit,
            at,
        })
    }

    /// What could not be read of its limits.
    pub fn unread(&self) -> &[String] {
        &self.limit.unread
    }
}

/// A daemon's CPU over a window.
#[derive(Debug, Clone, PartialEq)]
pub struct DaemonCpu {
    /// CPU time used over the window, percent of one core (one decimal).
    pub percent: f64,
    /// What it could get, percent of one core (one decimal).
    pub limit_percent: f64,
    /// What sets that limit.
    pub limited_by: LimitedBy,
    /// Live threads at the end.
    pub threads: u64,
    /// Threads that ran during the window.
    pub busy_threads: u64,
}

fn one_decimal(v: f64) -> f64 {
    (v * 10.0).round() / 10.0
}

/// The daemon's CPU between `start` and `end`, against the limits read at the end.
pub fn measure(start: &DaemonSample, end: &DaemonSample) -> Result<DaemonCpu, CpuError> {
    if start.pid != end.pid || start.start_time != end.start_time {
        return Err(CpuError::Replaced(end.pid));
    }
    let hz = clock_ticks()?;
    let secs = end.at.saturating_duration_since(start.at).as_secs_f64();
    if secs <= 0.0 {
        return Err(CpuError::NoTime);
    }
    let used = end.ticks.saturating_sub(start.ticks) as f64 / hz as f64;
    let busy_threads = end
        .tasks
        .iter()
        .filter(|(tid, ticks)| **ticks > start.tasks.get(tid).copied().unwrap_or(0))
        .count() as u64;
    let (cores, limited_by) = end.limit.cores(busy_threads);
    Ok(DaemonCpu {
        percent: one_decimal(used / secs * 100.0),
        limit_percent: one_decimal(cores * 100.0),
        limited_by,
        threads: end.threads,
        busy_threads,
    })
}

/// What the tunnel carried during the observation and what its daemon used (flattened
/// into `facts::TunnelFacts`): -1 (or "") where not read.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TunnelLoad {
    /// Process id of the daemon serving the TUN/TAP device (tailscaled for Tailscale).
    pub daemon_pid: i64,
    /// Its real uid (who started it).
    pub daemon_uid: i64,
    /// Its live threads at the end of the observation.
    pub daemon_threads: i64,
    /// Its threads that ran during the observation.
    pub daemon_busy_threads: i64,
    /// CPU time it used, percent of one core.
    pub daemon_cpu_percent: f64,
    /// The most it can use, percent of one core.
    pub daemon_cpu_limit_percent: f64,
    /// What sets that: "threads", "cpus", "affinity", "quota".
    pub daemon_cpu_limited_by: String,
    /// What it used, percent of its limit.
    pub daemon_cpu_of_limit_percent: f64,
    /// Bits through the interface, both directions, Mbit/s (kernel link counters).
    pub throughput_mbps: f64,
    /// Packets through the interface, both directions, per second.
    pub packets_per_s: f64,
}

impl Default for TunnelLoad {
    fn default() -> Self {
        TunnelLoad {
            daemon_pid: -1,
            daemon_uid: -1,
            daemon_threads: -1,
            daemon_busy_threads: -1,
            daemon_cpu_percent: -1.0,
            daemon_cpu_limit_percent: -1.0,
            daemon_cpu_limited_by: String::new(),
            daemon_cpu_of_limit_percent: -1.0,
            throughput_mbps: -1.0,
            packets_per_s: -1.0,
        }
    }
}

impl TunnelLoad {
    /// Fills in the daemon's CPU.
    pub fn set_cpu(&mut self, cpu: &DaemonCpu) {
        let as_i64 = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        self.daemon_threads = as_i64(cpu.threads);
        self.daemon_busy_threads = as_i64(cpu.busy_threads);
        self.daemon_cpu_percent = cpu.percent;
        self.daemon_cpu_limit_percent = cpu.limit_percent;
        self.daemon_cpu_limited_by = cpu.limited_by.as_str().to_owned();
        self.daemon_cpu_of_limit_percent = if cpu.limit_percent > 0.0 {
            one_decimal(cpu.percent * 100.0 / cpu.limit_percent)
        } else {
            -1.0
        };
    }
}

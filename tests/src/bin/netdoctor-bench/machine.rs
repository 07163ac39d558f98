//! The machine the benchmark runs on: kernel, CPU, cores, date, load; and the CPU time it
//! spends busy.

use netdoctor_lab::cmd;

#[derive(Debug, Clone)]
pub(crate) struct Machine {
    pub(crate) kernel: String,
    pub(crate) cpu: String,
    pub(crate) cores: usize,
    pub(crate) date: String,
    pub(crate) loadavg_start: String,
    pub(crate) loadavg_end: String,
    pub(crate) bpf_stats_sysctl: String,
}

pub(crate) fn read_trim(path: &str) -> String {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_owned())
        .unwrap_or_else(|_| "?".into())
}

pub(crate) fn machine() -> Machine {
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

pub(crate) fn loadavg() -> String {
    read_trim("/proc/loadavg")
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// Clock ticks per second of `/proc/PID/stat` (`getconf CLK_TCK`; 100 if that fails).
pub(crate) fn clk_tck() -> f64 {
    cmd::host_run(&["getconf", "CLK_TCK"])
        .ok()
        .and_then(|s| s.trim().parse::<f64>().ok())
        .filter(|t| *t > 0.0)
        .unwrap_or(100.0)
}

/// CPU time all CPUs spent busy since boot, in ns, from `/proc/stat`: user, nice, system,
/// irq and softirq. Idle, iowait and steal (time the hypervisor gave to someone else) are
/// left out.
pub(crate) fn cpu_busy_ns(clk_tck: f64) -> Option<u64> {
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

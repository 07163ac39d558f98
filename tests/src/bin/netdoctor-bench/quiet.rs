//! Whether the machine was quiet while the benchmark ran: a busy machine's figures are
//! reported as busy, never counted as meeting a target.
//!
//! Two signs, both from `/proc/stat`'s `cpu` line:
//! * other processes' CPU: before every round the benchmark idles for [`PROBE`] (after
//!   [`SETTLE`]) with nothing of its own running (netdoctor stopped, iperf3 idle); whatever
//!   the machine does then is someone else's work (builds, other tests), which would also
//!   run during the round;
//! * steal time during the whole packet section: the hypervisor ran someone else on these
//!   CPUs.

use std::time::Duration;

/// The idle window before each round.
pub(crate) const PROBE: Duration = Duration::from_secs(1);
/// Waited before it: the kernel's deferred work after the last run (freeing the maps and
/// programs of the netdoctor that just exited) is the bench's own.
pub(crate) const SETTLE: Duration = Duration::from_millis(500);
/// Busy above this share of all CPUs during a probe (an idle machine shows 0-2 %).
pub(crate) const MAX_OTHERS_PERCENT: f64 = 5.0;
/// Busy above this share of all CPUs stolen during the section.
pub(crate) const MAX_STEAL_PERCENT: f64 = 1.0;

/// `/proc/stat`'s `cpu` line: busy (user, nice, system, irq, softirq), steal and all
/// ticks.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Ticks {
    busy: u64,
    steal: u64,
    total: u64,
}

impl Ticks {
    pub(crate) fn now() -> Option<Ticks> {
        let stat = std::fs::read_to_string("/proc/stat").ok()?;
        Ticks::parse(stat.lines().find(|l| l.starts_with("cpu "))?)
    }

    fn parse(line: &str) -> Option<Ticks> {
        let v: Vec<u64> = line
            .split_whitespace()
            .skip(1)
            .filter_map(|x| x.parse().ok())
            .collect();
        // user nice system idle iowait irq softirq steal (guest time is inside user).
        let get = |i: usize| v.get(i).copied();
        Some(Ticks {
            busy: get(0)? + get(1)? + get(2)? + get(5)? + get(6)?,
            steal: get(7).unwrap_or(0),
            total: v.iter().take(8).sum(),
        })
    }

    /// Busy and steal shares of all CPUs between `self` and `later`, in %.
    fn shares(self, later: Ticks) -> (f64, f64) {
        let total = later.total.saturating_sub(self.total).max(1) as f64;
        (
            later.busy.saturating_sub(self.busy) as f64 / total * 100.0,
            later.steal.saturating_sub(self.steal) as f64 / total * 100.0,
        )
    }
}

/// What the probes and the section saw.
#[derive(Debug, Clone, Default)]
pub(crate) struct Quiet {
    /// Per probe: the share of all CPUs busy with others' work (%).
    pub(crate) others_percent: Vec<f64>,
    /// The share of all CPUs stolen over the section (%).
    pub(crate) steal_percent: Option<f64>,
    start: Option<Ticks>,
}

impl Quiet {
    pub(crate) fn start() -> Quiet {
        Quiet {
            start: Ticks::now(),
            ..Quiet::default()
        }
    }

    /// Idles for [`SETTLE`] and [`PROBE`] and records what the machine did in the probe.
    pub(crate) fn probe(&mut self) {
        std::thread::sleep(SETTLE);
        let before = Ticks::now();
        std::thread::sleep(PROBE);
        if let (Some(a), Some(b)) = (before, Ticks::now()) {
            self.others_percent.push(a.shares(b).0);
        }
    }

    pub(crate) fn finish(&mut self) {
        if let (Some(a), Some(b)) = (self.start, Ticks::now()) {
            self.steal_percent = Some(a.shares(b).1);
        }
    }

    fn max_others(&self) -> Option<f64> {
        self.others_percent.iter().copied().reduce(f64::max)
    }

    /// Why the machine was busy, or nothing when it was quiet.
    pub(crate) fn busy_reasons(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(m) = self.max_others().filter(|m| *m > MAX_OTHERS_PERCENT) {
            let n = self
                .others_percent
                .iter()
                .filter(|p| **p > MAX_OTHERS_PERCENT)
                .count();
            out.push(format!(
                "other processes used up to {m:.0} % of the CPUs while the benchmark idled \
                 ({n} of {} probes above {MAX_OTHERS_PERCENT:.0} %)",
                self.others_percent.len()
            ));
        }
        if let Some(s) = self.steal_percent.filter(|s| *s > MAX_STEAL_PERCENT) {
            out.push(format!(
                "the hypervisor stole {s:.1} % of the CPUs (above {MAX_STEAL_PERCENT:.0} %)"
            ));
        }
        out
    }

    pub(crate) fn is_busy(&self) -> bool {
        !self.busy_reasons().is_empty()
    }

    /// One line: quiet, or busy with the reasons.
    pub(crate) fn summary(&self) -> String {
        let reasons = self.busy_reasons();
        let others = self
            .max_others()
            .map_or("?".into(), |m| format!("{m:.1} %"));
        let steal = self
            .steal_percent
            .map_or("?".into(), |s| format!("{s:.1} %"));
        if reasons.is_empty() {
            format!("quiet (others' CPU at most {others} in the idle probes, steal {steal})")
        } else {
            format!(
                "BUSY: {}; the figures are not counted: rerun on a quiet machine",
                reasons.join("; ")
            )
        }
    }

    pub(crate) fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "busy": self.is_busy(),
            "reasons": self.busy_reasons(),
            "others_cpu_percent_by_probe": self.others_percent,
            "steal_percent": self.steal_percent,
            "probe_seconds": PROBE.as_secs_f64(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_stat_and_flags_others_and_steal() {
        let a = Ticks::parse("cpu  100 0 50 1000 0 0 10 0 0 0").expect("a cpu line");
        let b = Ticks::parse("cpu  110 0 55 1160 0 0 15 20 0 0").expect("a cpu line");
        let (busy, steal) = a.shares(b);
        assert!((busy - 10.0).abs() < 1e-9, "{busy}");
        assert!((steal - 10.0).abs() < 1e-9, "{steal}");
        let quiet = Quiet {
            others_percent: vec![0.5, 1.0],
            steal_percent: Some(0.0),
            start: None,
        };
        assert!(!quiet.is_busy(), "{}", quiet.summary());
        let busy = Quiet {
            others_percent: vec![0.5, 40.0],
            steal_percent: Some(3.0),
            start: None,
        };
        assert_eq!(busy.busy_reasons().len(), 2, "{}", busy.summary());
        assert!(busy.summary().contains("rerun"));
    }
}

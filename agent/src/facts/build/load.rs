//! What the tunnel carried over the window (the kernel's link counters of the interface,
//! both directions) and what its daemon used of the CPU ([`crate::config::cpu`]).

use super::Observation;
use crate::config::bond::LinkCounter;
use crate::config::cpu::{self, TunnelLoad};

fn one_decimal(v: f64) -> f64 {
    (v * 10.0).round() / 10.0
}

impl Observation<'_> {
    /// The tunnel's throughput and its daemon's CPU.
    pub(super) fn load(&self) -> TunnelLoad {
        let mut load = TunnelLoad::default();
        let of = |set: &[LinkCounter]| set.iter().find(|c| c.index == self.me.index).copied();
        let secs = self.elapsed.as_secs_f64();
        if let (Some(a), Some(b), true) = (of(&self.start.links), of(&self.end.links), secs > 0.0) {
            // A counter that went backwards (the link was recreated) counts from zero.
            let d = |now: u64, then: u64| now.checked_sub(then).unwrap_or(now) as f64;
            let bytes = d(b.rx_bytes, a.rx_bytes) + d(b.tx_bytes, a.tx_bytes);
            let packets = d(b.rx_packets, a.rx_packets) + d(b.tx_packets, a.tx_packets);
            load.throughput_mbps = one_decimal(bytes * 8.0 / secs / 1e6);
            load.packets_per_s = one_decimal(packets / secs);
        }
        if let Some(daemon) = &self.tun.daemon {
            load.daemon_pid = i64::from(daemon.pid);
            load.daemon_uid = i64::from(daemon.uids.real);
            if let (Some(s), Some(e)) = (self.start.daemon_cpu(), self.end.daemon_cpu()) {
                if let Ok(c) = cpu::measure(s, e) {
                    load.set_cpu(&c);
                }
            }
        }
        load
    }

    /// The host's busy share over the window, percent; -1 if not read.
    pub(super) fn host_busy_percent(&self) -> f64 {
        match (&self.start.host_cpu, &self.end.host_cpu) {
            (Some(s), Some(e)) => s.busy_percent(e).unwrap_or(-1.0),
            _ => -1.0,
        }
    }

    /// Why the daemon's CPU is missing from the facts, or what its limit leaves out, for
    /// the report's notes. Nothing when there is no daemon, or no reading at the start
    /// (the agent's first window of an interface).
    pub fn cpu_notes(&self) -> Vec<String> {
        let Some(daemon) = &self.tun.daemon else {
            return Vec::new();
        };
        let who = format!("{} (pid {})", daemon.command, daemon.pid);
        let missing = |why: String| format!("the CPU use of {who} is unknown: {why}");
        let (Some(start), Some(end)) = (&self.start.daemon_cpu, &self.end.daemon_cpu) else {
            return Vec::new();
        };
        match (start, end) {
            (Err(e), _) | (_, Err(e)) => vec![missing(e.to_string())],
            (Ok(s), Ok(e)) => match cpu::measure(s, e) {
                Err(why) => vec![missing(why.to_string())],
                Ok(_) => e
                    .unread()
                    .iter()
                    .map(|u| format!("the CPU limit of {who} leaves out {u}"))
                    .collect(),
            },
        }
    }
}

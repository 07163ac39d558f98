//! `kernel.bpf_stats_enabled` set by a test and restored: what the agent reads to decide
//! whether to export its programs' run figures. The sysctl is host-wide, so every test of a
//! process that sets it takes turns through one lock.

use std::sync::{Mutex, MutexGuard, PoisonError};

use anyhow::{Context, Result};

/// The sysctl.
pub const STATS_SYSCTL: &str = "/proc/sys/kernel/bpf_stats_enabled";

static TURN: Mutex<()> = Mutex::new(());

/// The sysctl at a value while this lives; then what it was before.
#[derive(Debug)]
pub struct StatsSysctl {
    was: String,
    _turn: MutexGuard<'static, ()>,
}

impl StatsSysctl {
    /// Waits for the other tests of this process that set the sysctl, then writes `on`.
    pub fn set(on: bool) -> Result<StatsSysctl> {
        let turn = TURN.lock().unwrap_or_else(PoisonError::into_inner);
        let was = std::fs::read_to_string(STATS_SYSCTL).context(STATS_SYSCTL)?;
        let value = if on { "1" } else { "0" };
        std::fs::write(STATS_SYSCTL, value)
            .with_context(|| format!("writing {value} to {STATS_SYSCTL}"))?;
        Ok(StatsSysctl {
            was: was.trim().to_owned(),
            _turn: turn,
        })
    }
}

impl Drop for StatsSysctl {
    fn drop(&mut self) {
        if let Err(e) = std::fs::write(STATS_SYSCTL, &self.was) {
            eprintln!("restoring {STATS_SYSCTL} to {}: {e}", self.was);
        }
    }
}

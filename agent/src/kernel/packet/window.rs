//! A window: what the data plane counted between two readings ([`Snapshot::since`]), and
//! the agent's windows, which the data plane counts itself ([`Dataplane::window_snapshot`]).
//!
//! The table holds every flow until the LRU evicts it, at most `--max-flows` (a million on
//! a busy gateway), and most of them idle in any one window (issue 34).
//! - Two readings (diagnose): a window compares only the flows seen since the earlier
//!   reading began (their last packet's time) with that reading, so its work follows the
//!   flows active in it: a reading of a million flows of which a thousand moved builds a map
//!   of a thousand keys. Both readings are held while it is taken.
//! - The agent numbers its windows and the data plane counts each flow's packets per window
//!   (`ebpf/include/flow_window.bpf.h`): closing one streams the table and keeps only the
//!   flows with packets in it, already counted over it, so the agent holds nothing per flow
//!   between windows and its memory follows the active flows, not the table.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use super::dataplane::{no_bss, Dataplane};
use super::flow_table::FlowTableUse;
use super::flows::{Flow, FlowKey};
use super::snapshot::Snapshot;
use super::wg_path::WgSession;
use crate::kernel::error::Result;
use crate::kernel::views::Clocks;

/// Longer than a tick of the kernel's clock (10 ms at HZ 100, the slowest): a cache slot
/// checks the window on the first packet of a tick, so only packets of the tick in which a
/// window closed can still count in it (as can a program that read the number just before):
/// after `GRACE` the closed window's counts are final, and a read misses none of them.
const GRACE: Duration = Duration::from_millis(20);

impl Dataplane<'_> {
    /// Counters now, and what every flow carried since the previous call: the first call
    /// begins numbering windows (the data plane counts each flow's packets per window from
    /// then on) and returns no flows.
    pub fn window_snapshot(&mut self) -> Result<Snapshot> {
        let closing = self.window_number()?;
        self.set_window_number(closing.wrapping_add(1).max(1))?;
        let flows = if closing == 0 {
            (Vec::new(), FlowTableUse::default(), Clocks::now())
        } else {
            std::thread::sleep(GRACE);
            self.read_window(closing)?
        };
        self.snapshot_with(flows, true)
    }

    /// The agent's current window (`nd_window`; 0: not numbered).
    fn window_number(&self) -> Result<u32> {
        let bss = self.skel.maps.bss_data.as_deref().ok_or_else(no_bss)?;
        // SAFETY: a valid, aligned `u32` of the mapped .bss, which only this process writes.
        Ok(unsafe { std::ptr::read_volatile(&bss.nd_window) })
    }

    fn set_window_number(&mut self, n: u32) -> Result<()> {
        let bss = self.skel.maps.bss_data.as_deref_mut().ok_or_else(no_bss)?;
        // SAFETY: a valid, aligned `u32` of the mapped .bss; the programs only read it.
        unsafe { std::ptr::write_volatile(&mut bss.nd_window, n) };
        Ok(())
    }
}

/// How long before the earlier reading began a flow's last packet may appear to have come
/// and the flow still carry packets in the window: the programs stamp packets with the
/// coarse clock (a tick behind), a flow-cache slot reads it only when jiffies moved (one
/// more), and timestamps are whole milliseconds. A second is ample and costs nothing: the
/// flows it adds have no packets in the window and are dropped.
const ACTIVE_SLACK_NS: u64 = 1_000_000_000;

impl Snapshot {
    /// What was counted between `earlier` and this snapshot: counter deltas, and the flows
    /// that carried packets in between (with their deltas).
    pub fn since(&self, earlier: &Snapshot) -> Snapshot {
        let sessions_before: HashMap<(u32, u32), &WgSession> = earlier
            .wg_sessions
            .iter()
            .map(|s| ((s.ifindex, s.index), s))
            .collect();
        Snapshot {
            counters: self
                .counters
                .iter()
                .map(|(i, c)| {
                    let d = earlier
                        .counters
                        .get(i)
                        .map_or_else(|| c.clone(), |e| c.since(e));
                    (*i, d)
                })
                .collect(),
            flows: if self.flows_window {
                self.flows.clone()
            } else {
                Arc::new(self.window_flows(earlier))
            },
            flows_clocks: self.flows_clocks,
            flows_window: self.flows_window,
            flow_table: self.flow_table.since(&earlier.flow_table),
            wg_sessions: self
                .wg_sessions
                .iter()
                .map(|s| {
                    sessions_before
                        .get(&(s.ifindex, s.index))
                        .map_or_else(|| s.clone(), |e| s.since(e))
                })
                .filter(|s| s.received > 0 || s.expected > 0)
                .collect(),
            wg_handshakes: self.wg_handshakes.clone(),
            mono_ns: self.mono_ns,
            since_mono_ns: earlier.mono_ns,
        }
    }

    /// The flows with packets between `earlier` and this reading, counted over that time.
    fn window_flows(&self, earlier: &Snapshot) -> Vec<Flow> {
        let active: Vec<&Flow> = match (self.flows_clocks, earlier.flows_clocks) {
            // Both read from a data plane: only flows seen since the earlier reading began
            // can have packets in between. Their last packet's time is in this reading's
            // conversion, so the earlier reading's start is converted the same way (a step
            // of the wall clock in between shifts neither against the other).
            (Some(now), Some(then)) => {
                let cutoff = now.unix_ms(then.mono_ns().saturating_sub(ACTIVE_SLACK_NS));
                self.flows
                    .iter()
                    .filter(|f| f.last_seen_ms >= cutoff)
                    .collect()
            }
            _ => self.flows.iter().collect(),
        };
        let before = matching(&active, &earlier.flows);
        active
            .into_iter()
            .zip(before)
            .map(|(f, e)| e.map_or_else(|| f.clone(), |e| f.since(e)))
            .filter(|f| f.packets > 0)
            .collect()
    }
}

/// For each of `flows`, the flow with its key among `earlier` (a reading holds each key
/// once). The smaller side is hashed and the larger scanned: a window of few active flows
/// over a large table hashes only those few.
fn matching<'a>(flows: &[&Flow], earlier: &'a [Flow]) -> Vec<Option<&'a Flow>> {
    if flows.len() <= earlier.len() {
        let index: HashMap<FlowKey, usize> = flows
            .iter()
            .enumerate()
            .map(|(i, f)| (f.key(), i))
            .collect();
        let mut out = vec![None; flows.len()];
        for e in earlier {
            if let Some(&i) = index.get(&e.key()) {
                out[i] = Some(e);
            }
        }
        out
    } else {
        let index: HashMap<FlowKey, &Flow> = earlier.iter().map(|e| (e.key(), e)).collect();
        flows.iter().map(|f| index.get(&f.key()).copied()).collect()
    }
}

#[cfg(test)]
#[path = "window_tests.rs"]
mod tests;

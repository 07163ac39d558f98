//! A window: what the data plane counted between two readings ([`Snapshot::since`]).
//!
//! The table holds every flow until the LRU evicts it, at most `--max-flows` (a million on
//! a busy gateway), and most of them idle in any one window. A window compares only the
//! flows seen since the earlier reading began (their last packet's time) with that reading,
//! so its work and memory follow the flows active in it, not the table's size (issue 34):
//! a reading of a million flows of which a thousand moved builds a map of a thousand keys.

use std::collections::HashMap;
use std::sync::Arc;

use super::flows::{Flow, FlowKey};
use super::snapshot::Snapshot;
use super::wg_path::WgSession;

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
            flows: Arc::new(self.window_flows(earlier)),
            flows_clocks: self.flows_clocks,
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

//! A model of what the data plane counts of the WireGuard transport-data messages an underlay
//! receives (`ebpf/include/wg_path.h`), written from its documented rules, not its code:
//!
//! - per session (receiver index) and CPU: the counters seen, the highest and the lowest;
//! - a message whose counter the same CPU saw while it was within 64 of that CPU's highest
//!   counter is a duplicate, not counted;
//! - a packet of `n` segments (GSO) carries `n` consecutive counters from its first; beyond
//!   the CPU's highest counter they all count as seen; at or below it they are counted and
//!   none is checked or remembered;
//! - a session's messages are the CPUs' counted messages summed; its highest and lowest
//!   counters the largest and the smallest over CPUs.

use std::collections::{BTreeMap, BTreeSet};

/// One CPU's view of one session.
#[derive(Debug, Clone, Default)]
struct Cpu {
    /// Counters seen that are still within the 64 below `high`.
    seen: BTreeSet<u64>,
    high: u64,
    low: u64,
    packets: u64,
    dups: u64,
}

/// What the model says of one session, over every CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Session {
    /// Highest counter seen.
    pub high: u64,
    /// Lowest counter seen.
    pub low: u64,
    /// Messages counted.
    pub received: u64,
    /// Duplicates not counted.
    pub duplicates: u64,
}

/// Sessions by receiver index, each by CPU.
#[derive(Debug, Clone, Default)]
pub struct WgModel {
    sessions: BTreeMap<u32, BTreeMap<usize, Cpu>>,
}

impl WgModel {
    /// A packet of `segs` messages (counters `counter..counter + segs`) of session `index`
    /// received on `cpu`.
    pub fn receive(&mut self, index: u32, counter: u64, segs: u64, cpu: usize) {
        let segs = segs.max(1);
        let last = counter + segs - 1;
        let per_cpu = self.sessions.entry(index).or_default();
        let c = match per_cpu.get_mut(&cpu) {
            Some(c) => c,
            None => {
                per_cpu.insert(
                    cpu,
                    Cpu {
                        seen: (counter..=last).collect(),
                        high: last,
                        low: counter,
                        packets: segs,
                        dups: 0,
                    },
                );
                return;
            }
        };
        if last > c.high {
            c.seen.extend(counter..=last);
            c.high = last;
        } else {
            if segs == 1 && c.high - counter < 64 && !c.seen.insert(counter) {
                c.dups += 1;
                return;
            }
            c.low = c.low.min(counter);
        }
        let floor = c.high.saturating_sub(63);
        c.seen.retain(|s| *s >= floor);
        c.packets += segs;
    }

    /// Every session the model has seen, by receiver index.
    pub fn sessions(&self) -> BTreeMap<u32, Session> {
        self.sessions
            .iter()
            .map(|(index, cpus)| {
                let s = Session {
                    high: cpus.values().map(|c| c.high).max().unwrap_or(0),
                    low: cpus.values().map(|c| c.low).min().unwrap_or(0),
                    received: cpus.values().map(|c| c.packets).sum(),
                    duplicates: cpus.values().map(|c| c.dups).sum(),
                };
                (*index, s)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn late_messages_count_and_duplicates_do_not() {
        let mut m = WgModel::default();
        for c in [0, 1, 3, 2, 2, 5, 100, 4] {
            m.receive(9, c, 1, 0);
        }
        // 4 is 96 below 100: too old to be checked, counted.
        m.receive(9, 4, 1, 0);
        let s = m.sessions()[&9];
        assert_eq!((s.low, s.high, s.received, s.duplicates), (0, 100, 8, 1));
        // Another CPU keeps its own view: the same counter there is not a duplicate.
        m.receive(9, 5, 1, 1);
        m.receive(9, 101, 3, 1);
        let s = m.sessions()[&9];
        assert_eq!((s.high, s.received, s.duplicates), (103, 12, 1));
    }
}

//! The agent's windows, counted by the data plane (`ebpf/include/flow_window.bpf.h`):
//! closing one reads only the flows active in it, not the table (issue 34).
//!
//! - The ring `flow_active` names every flow whose window began in its table entry; the
//!   cache slots holding the window name the rest. Closing window n looks each of them up
//!   and takes its window's counts: a thousand flows a system call where the kernel runs
//!   the batched lookup (`flow_lookup`, Linux 5.17), one a call elsewhere. An idle table of
//!   a million flows costs nothing to close.
//! - When the ring had no room for a record (`nd_active_lost` moved), the window is read by
//!   streaming the whole table instead, which finds every flow with counts in it.
//! - The table's use (entries, evictions) needs its entries counted. Where the kernel keeps
//!   the count (Linux 6.6 and later, `table_count`), every window reads it. Elsewhere only a
//!   walk counts. But the LRU evicts only when a CPU creates more entries than its share of
//!   the table (each CPU has its own list, `BPF_F_NO_COMMON_LRU`): while no CPU's insert
//!   count exceeds its share the table holds exactly the entries created, and once one does,
//!   the entries are counted again by a walk when entries were created since the last
//!   count, at most every [`COUNT_EVERY`] windows (evictions are reported that much later).

use std::collections::HashSet;

use libbpf_rs::{MapCore, MapFlags, RingBufferBuilder};

use super::dataplane::{no_bss, Dataplane};
use super::flow_cache;
use super::flow_table::{self, FlowTableUse};
use super::table_count;
use super::window_ring::{key_bytes, nd_flow_active, KeyBytes, WindowReads, COUNT_EVERY};

use super::flows::{value_in_window, Flow};
use crate::kernel::error::{Error, Result};
use crate::kernel::views::{decode, nd_flow_key, nd_flow_stats, Clocks};

impl Dataplane<'_> {
    /// The flows with packets in window `n` (closed, its counts final), their table's use,
    /// and the clocks their times were converted with.
    pub(super) fn read_window(&mut self, n: u32) -> Result<(Vec<Flow>, FlowTableUse, Clocks)> {
        // In this order: a slot holding window n may be retired at any time, its counts
        // moving to the table and its flow named on the ring. Its key is taken from the
        // slot before the ring is read, so it is read either way; a record of window n the
        // ring had no room for was lost before the loss count is read, which is before the
        // ring: the loss is seen now.
        let mut named: HashSet<KeyBytes> = self
            .flow_cache
            .keys_in_window(n)
            .iter()
            .map(key_bytes)
            .collect();
        let lost = self.active_lost()?;
        named.extend(self.drain_active(n)?);
        let inserts = flow_table::inserts_per_cpu(&self.skel.maps.flow_inserts)?;
        let capacity = self.flow_table_capacity() as u64;
        let total: u64 = inserts.iter().sum();
        // Each CPU's LRU list holds an equal share of the entries.
        let share = capacity / inserts.len().max(1) as u64;
        let may_evict = inserts.iter().any(|i| *i > share);
        // After the inserts (see flow_table's notes): never an eviction invented.
        let kernel_count = self.kernel_count();
        let state = &mut self.window_state;
        let overflowed = lost != state.lost_seen;
        state.lost_seen = lost;
        state.since_count += 1;
        let count_due = match state.counted {
            None => true,
            Some((_, at)) => at != total && state.since_count >= COUNT_EVERY,
        };
        if overflowed || (kernel_count.is_none() && may_evict && count_due) {
            if overflowed {
                tracing::debug!(
                    window = n,
                    "the active-flow ring overflowed: the table is read"
                );
            }
            let read = self.read_flows_in(Some(n))?;
            let state = &mut self.window_state;
            state.counted = Some((read.1, total));
            state.since_count = 0;
            state.reads.whole += 1;
            return Ok(read);
        }
        let table = match (kernel_count, may_evict, state.counted) {
            (Some(entries), _, _) => {
                flow_table::table_use(&self.evictions_seen, capacity, total, entries)
            }
            (None, true, Some((counted, _))) => counted,
            _ => FlowTableUse {
                capacity,
                entries: total.min(capacity),
                evictions: 0,
            },
        };
        let (flows, clocks) = self.read_named(n, named)?;
        self.window_state.reads.named += 1;
        Ok((flows, table, clocks))
    }

    /// The table's entries as the kernel counts them, where it does; a failed read turns
    /// the count off (walks count from then on).
    fn kernel_count(&mut self) -> Option<u64> {
        match table_count::entries(self.table_count.as_ref()?) {
            Ok(entries) => Some(entries),
            Err(e) => {
                tracing::warn!("{e}: the flow table's entries are counted by walks from now on");
                self.table_count = None;
                None
            }
        }
    }

    /// How the windows closed so far were read.
    pub fn window_reads(&self) -> WindowReads {
        self.window_state.reads
    }

    /// The keys the ring names for window `n`; records of the next window are kept for it.
    fn drain_active(&mut self, n: u32) -> Result<HashSet<KeyBytes>> {
        let mut named: HashSet<KeyBytes> = self.window_state.pending.drain(..).collect();
        let mut next = Vec::new();
        {
            let mut builder = RingBufferBuilder::new();
            builder
                .add(&self.skel.maps.flow_active, |bytes: &[u8]| {
                    let record = bytes.get(..std::mem::size_of::<nd_flow_active>());
                    if let Some(rec) = record.and_then(decode::<nd_flow_active>) {
                        if rec.window == n {
                            named.insert(key_bytes(&rec.key));
                        } else if rec.window == n.wrapping_add(1) {
                            next.push(key_bytes(&rec.key));
                        }
                    }
                    0
                })
                .map_err(ring_error)?;
            builder
                .build()
                .map_err(ring_error)?
                .consume()
                .map_err(ring_error)?;
        }
        self.window_state.pending = next;
        Ok(named)
    }

    /// `nd_active_lost`: records the ring had no room for, since load.
    fn active_lost(&self) -> Result<u64> {
        let bss = self.skel.maps.bss_data.as_deref().ok_or_else(no_bss)?;
        // SAFETY: a valid, aligned `u64` of the mapped .bss, which the programs update.
        Ok(unsafe { std::ptr::read_volatile(&bss.nd_active_lost) })
    }

    /// Window `n` of the flows `named` (by the ring, or by the slots that held it), looked
    /// up in batches where the kernel can; a batch that fails turns them off, and the window
    /// is read again one flow a call.
    fn read_named(&mut self, n: u32, named: HashSet<KeyBytes>) -> Result<(Vec<Flow>, Clocks)> {
        if self.lookup.is_some() {
            match self.read_named_with(n, &named, true) {
                Ok(read) => return Ok(read),
                Err(e) => {
                    tracing::warn!("{e}: a window's flows are looked up one by one from now on");
                    self.lookup = None;
                }
            }
        }
        self.read_named_with(n, &named, false)
    }

    fn read_named_with(
        &self,
        n: u32,
        named: &HashSet<KeyBytes>,
        batched: bool,
    ) -> Result<(Vec<Flow>, Clocks)> {
        let clocks = Clocks::now();
        let map = &self.skel.maps.flows;
        let (flows, _) = flow_cache::merged_flows(
            &self.flow_cache,
            0,
            Some(n),
            |entry| {
                if let Some(batch) = self.lookup.as_ref().filter(|_| batched) {
                    let named: Vec<&KeyBytes> = named.iter().collect();
                    let prog = &self.skel.progs.nd_lookup_flows;
                    return batch.lookup(prog, &named, |key, v| entry(key, &value_in_window(v, n)));
                }
                for bytes in named {
                    let value = map.lookup(bytes, MapFlags::ANY).map_err(|e| Error::Map {
                        map: "flows",
                        source: e,
                    })?;
                    // Evicted since it was named: its slots, if any, still count.
                    let key = decode::<nd_flow_key>(bytes);
                    let v = value.as_deref().and_then(decode::<nd_flow_stats>);
                    if let (Some(key), Some(v)) = (key, v) {
                        entry(&key, &value_in_window(&v, n));
                    }
                }
                Ok(())
            },
            |k, v| (v.packets > 0).then(|| Flow::from_raw_at(k, v, &clocks)),
        )?;
        Ok((flows, clocks))
    }
}

fn ring_error(e: libbpf_rs::Error) -> Error {
    Error::Map {
        map: "flow_active",
        source: e,
    }
}

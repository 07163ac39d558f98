//! The flow table's size and use: how many flows it holds (`--max-flows`, set before load),
//! what that costs in kernel memory, and how many flows the LRU evicted.
//!
//! Evictions are counted exactly and cheaply: the programs count every entry they create
//! (`flow_inserts`, per CPU, in ebpf/include/flow_table.bpf.h), nothing but the LRU removes one
//! (the agent never deletes), so the entries created minus the entries the table holds are
//! the entries evicted. The insert count is read before the table: flows created while the
//! table is read can only make a reading smaller, never invent an eviction, and the next
//! reading catches up (the count is cumulative).

use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;

use libbpf_rs::{MapCore, MapFlags};

use crate::kernel::error::{Error, Result};

/// Kernel memory of one flow-table entry, bytes: the LRU hash element (its header with the
/// LRU node, 48 bytes; the 44-byte key rounded to 48; the 152-byte value: 72 of totals and
/// two 40-byte windows, `ebpf/include/flow_window.bpf.h`) is 248 bytes, plus one 16-byte
/// hash bucket per entry when the size is a power of two (the kernel rounds the buckets up to
/// one). The kernel's own accounting (`memlock` in the map's fdinfo) says the same on 6.18.
pub const BYTES_PER_FLOW: u64 = 264;

/// Kernel memory the flow table may take by default.
pub const FLOW_MEMORY_BUDGET: u64 = 24 << 20;

/// The default table size: the largest power of two whose entries fit
/// [`FLOW_MEMORY_BUDGET`] (65,536 flows, 16.5 MiB). Powers of two waste no hash buckets.
pub const DEFAULT_MAX_FLOWS: u32 = largest_power_of_two_within(FLOW_MEMORY_BUDGET / BYTES_PER_FLOW);

/// Smallest table accepted: below it a handful of busy hosts would evict constantly.
pub const MIN_MAX_FLOWS: u32 = 1024;
/// Largest table accepted: 16 M flows, ~3 GiB of kernel memory.
pub const MAX_MAX_FLOWS: u32 = 1 << 24;

const fn largest_power_of_two_within(n: u64) -> u32 {
    let mut p: u64 = 1;
    while p * 2 <= n {
        p *= 2;
    }
    p as u32
}

/// Kernel memory a table of `entries` flows takes, bytes (see [`BYTES_PER_FLOW`]).
pub fn table_bytes(entries: u32) -> u64 {
    // Elements, plus one 16-byte bucket per power-of-two-rounded entry.
    u64::from(entries) * (BYTES_PER_FLOW - 16) + u64::from(entries.next_power_of_two()) * 16
}

/// Checks a `--max-flows` value.
pub fn check_max_flows(entries: u32) -> std::result::Result<u32, String> {
    if (MIN_MAX_FLOWS..=MAX_MAX_FLOWS).contains(&entries) {
        Ok(entries)
    } else {
        Err(format!(
            "--max-flows {entries}: the flow table holds {MIN_MAX_FLOWS} to {MAX_MAX_FLOWS} \
             flows ({} bytes of kernel memory each)",
            BYTES_PER_FLOW
        ))
    }
}

/// The flow table at one reading.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct FlowTableUse {
    /// Flows it can hold.
    pub capacity: u64,
    /// Entries it held.
    pub entries: u64,
    /// Entries the LRU evicted since load (cumulative): each lost the figures its flow had
    /// counted until then.
    pub evictions: u64,
}

impl FlowTableUse {
    /// Evictions between `earlier` and this reading; capacity and entries as now.
    pub fn since(&self, earlier: &FlowTableUse) -> FlowTableUse {
        FlowTableUse {
            evictions: self.evictions.saturating_sub(earlier.evictions),
            ..*self
        }
    }
}

/// Entries the programs created in the table since load (`flow_inserts`), every CPU's
/// count summed.
pub(super) fn inserts(map: &impl MapCore) -> Result<u64> {
    Ok(inserts_per_cpu(map)?.iter().sum())
}

/// Entries each possible CPU created in the table since load (`flow_inserts`).
pub(super) fn inserts_per_cpu(map: &impl MapCore) -> Result<Vec<u64>> {
    let per_cpu = map
        .lookup_percpu(&0u32.to_ne_bytes(), MapFlags::ANY)
        .map_err(|e| Error::Map {
            map: "flow_inserts",
            source: e,
        })?
        .unwrap_or_default();
    Ok(per_cpu
        .iter()
        .filter_map(|b| b.get(..8)?.try_into().ok())
        .map(u64::from_ne_bytes)
        .collect())
}

/// The table's use, given its capacity, the insert count read before the table and the
/// entries the table held. Readings never go backwards (see the module's notes): `seen`
/// keeps the largest eviction count read so far.
pub(super) fn table_use(
    seen: &AtomicU64,
    capacity: u64,
    inserts: u64,
    entries: u64,
) -> FlowTableUse {
    let evictions = inserts.saturating_sub(entries);
    let before = seen.fetch_max(evictions, Ordering::Relaxed);
    FlowTableUse {
        capacity,
        entries,
        evictions: evictions.max(before),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_size_fits_the_budget() {
        assert_eq!(DEFAULT_MAX_FLOWS, 65_536);
        assert!(table_bytes(DEFAULT_MAX_FLOWS) <= FLOW_MEMORY_BUDGET);
        assert!(table_bytes(DEFAULT_MAX_FLOWS * 2) > FLOW_MEMORY_BUDGET);
        assert!(check_max_flows(DEFAULT_MAX_FLOWS).is_ok());
    }

    #[test]
    fn sizes_out_of_range_are_refused() {
        assert!(check_max_flows(1_048_576).is_ok());
        for bad in [0, 1023, (1 << 24) + 1] {
            let e = check_max_flows(bad).expect_err("out of range");
            assert!(e.contains("--max-flows"), "{e}");
        }
    }

    #[test]
    fn evictions_in_a_window_never_go_negative() {
        let a = FlowTableUse {
            capacity: 1024,
            entries: 1024,
            evictions: 10,
        };
        let b = FlowTableUse { evictions: 25, ..a };
        assert_eq!(b.since(&a).evictions, 15);
        assert_eq!(a.since(&b).evictions, 0);
    }
}

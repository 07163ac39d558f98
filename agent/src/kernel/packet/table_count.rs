//! The flow table's entries as the kernel counts them (`ebpf/include/flow_count.bpf.h`):
//! hash maps keep a per-CPU element count since Linux 6.6, which the kfunc
//! `bpf_map_sum_elem_count` sums. The agent reads it through a `bpf_map` iterator when it
//! closes a window: microseconds, where a walk of a million-entry table takes a second.
//! Decided by the kernel's BTF (the kfunc and the iterator), never by its version; without
//! them the agent counts by a walk (`agent_windows`).

use std::io::Read;

use libbpf_rs::{Iter, Link, MapCore, OpenProgramMut, ProgramMut};

use crate::kernel::btf;
use crate::kernel::error::{Error, Result};

/// Whether this kernel keeps the count and lets an iterator read it.
pub(super) fn kernel_counts() -> bool {
    btf::vmlinux().is_some_and(|b| {
        btf::has_kfunc(&b, "bpf_map_sum_elem_count") && btf::has_iterator(&b, "bpf_map")
    })
}

/// Loads the iterator only where it will count (`wanted`: the agent's windows).
pub(super) fn choose(prog: &mut OpenProgramMut<'_>, wanted: bool) -> bool {
    let on = wanted && kernel_counts();
    prog.set_autoload(on);
    if wanted && !on {
        tracing::info!(
            "this kernel keeps no count of a hash map's entries (Linux 6.6): the agent \
             counts the flow table's by walks, when its LRU may have evicted"
        );
    }
    on
}

/// Points the loaded iterator at `table` (`id` is written to the mapped .bss) and attaches
/// it. `None`, with a log line, when it cannot: the agent then counts by a walk.
pub(super) fn attach(prog: &ProgramMut<'_>, table: &impl MapCore, id: &mut u32) -> Option<Link> {
    match table.info() {
        Ok(info) => *id = info.info.id,
        Err(e) => {
            tracing::info!(
                "the flow table's id is unknown ({e}): its entries are counted by a walk"
            );
            return None;
        }
    }
    match prog.attach() {
        Ok(link) => Some(link),
        Err(e) => {
            tracing::info!(
                "no bpf_map iterator ({e}): the flow table's entries are counted by a walk"
            );
            None
        }
    }
}

/// The table's entries now: one iteration over the host's maps, which reports only ours.
pub(super) fn entries(link: &Link) -> Result<u64> {
    let map_error = |e: libbpf_rs::Error| Error::Map {
        map: "iter/bpf_map",
        source: e,
    };
    let iter = Iter::new(link).map_err(map_error)?;
    // Bounded: one 8-byte record is expected; more is read only to say so.
    let mut buf = Vec::with_capacity(16);
    iter.take(16)
        .read_to_end(&mut buf)
        .map_err(|e| map_error(libbpf_rs::Error::from(e)))?;
    let record: [u8; 8] = buf.as_slice().try_into().map_err(|_| {
        map_error(libbpf_rs::Error::from(std::io::Error::other(format!(
            "the count iterator wrote {} bytes, not 8 (is the table gone?)",
            buf.len()
        ))))
    })?;
    Ok(u64::try_from(i64::from_ne_bytes(record)).unwrap_or(0))
}

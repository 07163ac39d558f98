//! The agent's batched lookup of the flow table (`ebpf/include/flow_lookup.bpf.h`): up to
//! [`BATCH`] keys written into the mapped array `flow_lookup`, one `BPF_PROG_TEST_RUN` of
//! `nd_lookup_flows` looking them all up in the kernel, and the values read back from the
//! mapping. A system call per thousand flows instead of one per flow.
//!
//! Needs a syscall program looping with `bpf_loop` (Linux 5.17), probed: elsewhere, and
//! outside the agent's windows, the array holds one record and flows are looked up one by
//! one.

use std::sync::atomic::Ordering;

use libbpf_rs::{OpenMapMut, OpenProgramMut, ProgramInput, ProgramMut};

use super::mapped::Mapped;
use crate::kernel::bpf::packet::types::nd_flow_lookup;
use crate::kernel::error::{Error, Result};
use crate::kernel::views::{decode, nd_flow_key, nd_flow_stats};

/// Mirrors `ND_LOOKUP_BATCH` in ebpf/include/packet.h (checked by the `limits` test).
pub const BATCH: usize = 1024;

/// Byte offsets in `struct nd_flow_lookup` of `found` and the value.
const FOUND_AT: usize = std::mem::offset_of!(nd_flow_lookup, found);
const VALUE_AT: usize = std::mem::offset_of!(nd_flow_lookup, value);
const VALUE_BYTES: usize = std::mem::size_of::<nd_flow_stats>();

/// Loads the lookup program only where it will run (`wanted`: the agent's windows) and the
/// kernel has what it needs; sizes the array to match.
pub(super) fn choose(
    prog: &mut OpenProgramMut<'_>,
    array: &mut OpenMapMut<'_>,
    wanted: bool,
) -> Result<bool> {
    let on = wanted && crate::kernel::features::syscall_loop();
    prog.set_autoload(on);
    let entries = if on { BATCH as u32 } else { 1 };
    array.set_max_entries(entries).map_err(Error::from_load)?;
    if wanted && !on {
        tracing::info!(
            "this kernel runs no syscall program with bpf_loop (Linux 5.17): the agent \
             looks the flows of a window up one system call each"
        );
    }
    Ok(on)
}

/// The array `flow_lookup`, mapped for writing keys and reading values.
pub(super) struct Batch {
    view: Mapped,
}

impl Batch {
    /// Maps the loaded array `flow_lookup` for writing.
    pub(super) fn map(array: &impl libbpf_rs::MapCore) -> Result<Batch> {
        let view = Mapped::map(array, true).map_err(|e| Error::Map {
            map: "flow_lookup",
            source: libbpf_rs::Error::from(e),
        })?;
        Ok(Batch { view })
    }

    /// Looks `keys` up with `prog`, as many a run as the array holds, calling `found` with
    /// each key the table holds and its value.
    pub(super) fn lookup<K: AsRef<[u8]>>(
        &self,
        prog: &ProgramMut<'_>,
        keys: &[K],
        mut found: impl FnMut(&nd_flow_key, &nd_flow_stats),
    ) -> Result<()> {
        let mut value = [0u8; VALUE_BYTES];
        for run in keys.chunks(self.view.entries().max(1)) {
            for (i, key) in run.iter().enumerate() {
                self.view.store_bytes(i, 0, key.as_ref());
            }
            let mut args = (run.len() as u32).to_ne_bytes();
            let input = ProgramInput {
                context_in: Some(&mut args),
                ..Default::default()
            };
            prog.test_run(input).map_err(|e| Error::Map {
                map: "flow_lookup",
                source: e,
            })?;
            for (i, key) in run.iter().enumerate() {
                if self.view.load_u32(i, FOUND_AT, Ordering::Relaxed) == 0 {
                    continue; // evicted since it was named
                }
                self.view.copy_bytes(i, VALUE_AT, &mut value);
                if let (Some(k), Some(v)) = (
                    decode::<nd_flow_key>(key.as_ref()),
                    decode::<nd_flow_stats>(&value),
                ) {
                    found(&k, &v);
                }
            }
        }
        Ok(())
    }
}

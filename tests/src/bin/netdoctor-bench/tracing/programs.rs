//! netdoctor's tracing programs: which ones each command loads, held open by id so their
//! statistics outlive the process, and a counter in their `.bss`.

use std::collections::HashSet;
use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};

use anyhow::{ensure, Context, Result};
use libbpf_rs::libbpf_sys;
use netdoctor_lab::bpf::maps::program_map_ids;
use netdoctor_lab::BgProcess;

use crate::programs::{all_programs, process_prog_ids, Counter};

/// The kernel keeps 15 characters of a program's name (BPF_OBJ_NAME_LEN − 1).
pub(crate) const BPF_NAME_MAX: usize = 15;

/// A netdoctor tracing program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TraceProg {
    /// Function name in `ebpf/*.bpf.c`.
    pub(crate) name: &'static str,
    /// ELF section (hook).
    pub(crate) section: &'static str,
    /// The netdoctor command that loads it.
    pub(crate) command: &'static str,
}

impl TraceProg {
    /// The name as the kernel reports it.
    pub(crate) fn kernel_name(self) -> &'static str {
        &self.name[..self.name.len().min(BPF_NAME_MAX)]
    }
}

pub(crate) const ND_TCP_RETRANSMIT: TraceProg = TraceProg {
    name: "nd_tcp_retransmit",
    section: "tp_btf/tcp_retransmit_skb",
    command: "flows",
};
pub(crate) const ND_SOCK_STATE: TraceProg = TraceProg {
    name: "nd_sock_state",
    section: "tp_btf/inet_sock_set_state",
    command: "flows",
};
pub(crate) const ND_ITER_TCP: TraceProg = TraceProg {
    name: "nd_iter_tcp",
    section: "iter/tcp",
    command: "flows",
};
pub(crate) const ND_KFREE_SKB: TraceProg = TraceProg {
    name: "nd_kfree_skb",
    section: "tp_btf/kfree_skb",
    command: "drops",
};

/// A netdoctor program held open by id: its statistics stay readable after netdoctor
/// exits (the end-of-window snapshot of `netdoctor flows` runs just before it exits).
#[derive(Debug)]
pub(crate) struct HeldProg {
    pub(crate) prog: TraceProg,
    pub(crate) id: u32,
    pub(crate) fd: OwnedFd,
}

impl HeldProg {
    pub(crate) fn open(prog: TraceProg, id: u32) -> Result<HeldProg> {
        // SAFETY: plain syscall wrapper without pointer arguments.
        let fd = unsafe { libbpf_sys::bpf_prog_get_fd_by_id(id) };
        if fd < 0 {
            return Err(io::Error::from_raw_os_error(-fd))
                .with_context(|| format!("opening program {id} ({})", prog.name));
        }
        // SAFETY: bpf_prog_get_fd_by_id returned a new descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(HeldProg { prog, id, fd })
    }

    pub(crate) fn stats(&self) -> Result<Counter> {
        Counter::read(self.fd.as_fd())
            .with_context(|| format!("statistics of {} (id {})", self.prog.name, self.id))
    }
}

/// Opens `wanted`, each the one program of that name that the netdoctor process holds and
/// that appeared after it started (other netdoctor processes may run the same programs).
pub(crate) fn hold_programs(
    nd: &BgProcess,
    known: &HashSet<u32>,
    wanted: &[TraceProg],
) -> Result<Vec<HeldProg>> {
    let held_by = process_prog_ids(nd.pid())?;
    let all = all_programs();
    wanted
        .iter()
        .map(|&prog| {
            let ids: Vec<u32> = held_by
                .iter()
                .copied()
                .filter(|id| !known.contains(id))
                .filter(|id| all.get(id).is_some_and(|p| p.name == prog.kernel_name()))
                .collect();
            ensure!(
                ids.len() == 1,
                "expected one new {} program held by netdoctor (pid {}), found {ids:?}; \
                 netdoctor stderr: {}",
                prog.name,
                nd.pid(),
                nd.stderr().unwrap_or_default().trim()
            );
            HeldProg::open(prog, ids[0])
        })
        .collect()
}

/// A `u64` global in the `.bss` of a held program's object (e.g. `sock_events_lost`).
pub(crate) struct BssCounter {
    pub(crate) map: libbpf_rs::MapHandle,
    pub(crate) offset: usize,
}

impl std::fmt::Debug for BssCounter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BssCounter")
            .field("offset", &self.offset)
            .finish()
    }
}

impl BssCounter {
    pub(crate) fn open(prog: &HeldProg, var: &str) -> Result<BssCounter> {
        use libbpf_rs::btf::types::{DataSec, Var};
        use libbpf_rs::MapCore;

        let ids = program_map_ids(prog.fd.as_raw_fd()).context("listing the program's maps")?;
        let map = ids
            .iter()
            .filter_map(|&id| libbpf_rs::MapHandle::from_map_id(id).ok())
            .find(|m| m.name().to_string_lossy().ends_with(".bss"))
            .with_context(|| format!("{} uses no .bss map", prog.prog.name))?;
        let btf = libbpf_rs::btf::Btf::from_prog_id(prog.id).context("the program's BTF")?;
        let sec: DataSec<'_> = btf
            .type_by_name(".bss")
            .context("no .bss section in the program's BTF")?;
        let offset = (0..sec.len())
            .filter_map(|i| sec.get(i))
            .find(|v| {
                btf.type_by_id::<Var<'_>>(v.ty)
                    .and_then(|t| t.name())
                    .is_some_and(|name| name == var)
            })
            .map(|v| v.offset as usize)
            .with_context(|| format!("no {var} in .bss"))?;
        ensure!(
            offset + 8 <= map.value_size() as usize,
            "{var} at offset {offset} lies outside the .bss map"
        );
        Ok(BssCounter { map, offset })
    }

    pub(crate) fn read(&self) -> Result<u64> {
        use libbpf_rs::MapCore;

        let value = self
            .map
            .lookup(&0u32.to_ne_bytes(), libbpf_rs::MapFlags::ANY)
            .context("reading .bss")?
            .context(".bss has no value")?;
        let bytes: [u8; 8] = value
            .get(self.offset..self.offset + 8)
            .and_then(|b| b.try_into().ok())
            .context(".bss value too short")?;
        Ok(u64::from_ne_bytes(bytes))
    }
}

//! Which BPF programs are where: the ids attached to the watched interface's hooks, every
//! loaded program's cumulative statistics, the ids a process holds, and one program's
//! run count and run time between two reads.

use std::collections::{HashMap, HashSet};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::path::PathBuf;

use anyhow::{Context, Result};
use libbpf_rs::libbpf_sys;
use netdoctor_lab::bpf::prog_info;
use netdoctor_lab::Netns;

/// Ids of the programs on a tcx hook of `ifindex`, in chain order.
pub(crate) fn tcx_prog_ids(ifindex: u32, attach_type: u32) -> io::Result<Vec<u32>> {
    let mut ids = [0u32; 64];
    let mut opts = libbpf_sys::bpf_prog_query_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_prog_query_opts>() as _,
        prog_ids: ids.as_mut_ptr(),
        ..Default::default()
    };
    opts.__bindgen_anon_1.prog_cnt = ids.len() as u32;
    let target = i32::try_from(ifindex).map_err(|_| io::Error::other("ifindex out of range"))?;
    // SAFETY: `opts.prog_ids` points at `ids`, which holds `prog_cnt` entries and outlives
    // the call; `opts` is otherwise zero-initialised with a matching `sz`.
    let rc = unsafe { libbpf_sys::bpf_prog_query_opts(target, attach_type, &mut opts) };
    if rc < 0 {
        return Err(io::Error::from_raw_os_error(-rc));
    }
    // SAFETY: both union members are the same `u32`; the kernel wrote the count.
    let n = unsafe { opts.__bindgen_anon_1.prog_cnt } as usize;
    Ok(ids[..n.min(ids.len())].to_vec())
}

/// The XDP program attached to `ifindex` in any mode (0 for none).
pub(crate) fn xdp_prog_id(ifindex: u32) -> io::Result<u32> {
    let mut opts = libbpf_sys::bpf_xdp_query_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_xdp_query_opts>() as _,
        ..Default::default()
    };
    let target = i32::try_from(ifindex).map_err(|_| io::Error::other("ifindex out of range"))?;
    // SAFETY: `opts` is a valid, initialised options struct that outlives the call.
    let rc = unsafe { libbpf_sys::bpf_xdp_query(target, 0, &mut opts) };
    if rc < 0 {
        return Err(io::Error::from_raw_os_error(-rc));
    }
    Ok([opts.prog_id, opts.drv_prog_id, opts.skb_prog_id]
        .into_iter()
        .find(|&id| id != 0)
        .unwrap_or(0))
}

/// Program ids attached to one interface.
#[derive(Debug, Clone, Default)]
pub(crate) struct HookIds {
    pub(crate) xdp: u32,
    pub(crate) tc_in: Vec<u32>,
    pub(crate) tc_out: Vec<u32>,
}

impl HookIds {
    pub(crate) fn contains(&self, id: u32) -> bool {
        self.xdp == id || self.tc_in.contains(&id) || self.tc_out.contains(&id)
    }
}

pub(crate) fn query_hooks(ns: &Netns, ifindex: u32) -> Result<HookIds> {
    ns.run_in(move || -> io::Result<HookIds> {
        Ok(HookIds {
            xdp: xdp_prog_id(ifindex)?,
            tc_in: tcx_prog_ids(ifindex, libbpf_sys::BPF_TCX_INGRESS)?,
            tc_out: tcx_prog_ids(ifindex, libbpf_sys::BPF_TCX_EGRESS)?,
        })
    })?
    .context("querying the programs attached to the watched interface")
}

/// One program's cumulative statistics.
#[derive(Debug, Clone)]
pub(crate) struct ProgStat {
    pub(crate) name: String,
    pub(crate) run_cnt: u64,
    pub(crate) run_time_ns: u64,
}

/// Names and statistics of every loaded program.
pub(crate) fn all_programs() -> HashMap<u32, ProgStat> {
    libbpf_rs::query::ProgInfoIter::default()
        .map(|p| {
            (
                p.id,
                ProgStat {
                    name: p.name.to_string_lossy().into_owned(),
                    run_cnt: p.run_cnt,
                    run_time_ns: p.run_time_ns,
                },
            )
        })
        .collect()
}

/// Cumulative (or, after [`Counter::since`], windowed) statistics of one program.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Counter {
    pub(crate) runs: u64,
    pub(crate) run_time_ns: u64,
    /// Runs the kernel skipped because the program was already running on that CPU.
    pub(crate) recursion_misses: u64,
}

impl Counter {
    pub(crate) fn read(fd: BorrowedFd<'_>) -> io::Result<Counter> {
        let info = prog_info(fd.as_raw_fd(), &mut [])?;
        Ok(Counter {
            runs: info.run_cnt,
            run_time_ns: info.run_time_ns,
            recursion_misses: info.recursion_misses,
        })
    }

    pub(crate) fn since(self, before: Counter) -> Counter {
        Counter {
            runs: self.runs.saturating_sub(before.runs),
            run_time_ns: self.run_time_ns.saturating_sub(before.run_time_ns),
            recursion_misses: self
                .recursion_misses
                .saturating_sub(before.recursion_misses),
        }
    }

    pub(crate) fn plus(self, other: Counter) -> Counter {
        Counter {
            runs: self.runs + other.runs,
            run_time_ns: self.run_time_ns + other.run_time_ns,
            recursion_misses: self.recursion_misses + other.recursion_misses,
        }
    }

    pub(crate) fn ns_per_run(self) -> Option<f64> {
        (self.runs > 0).then(|| self.run_time_ns as f64 / self.runs as f64)
    }
}

/// Ids of the BPF programs process `pid` holds (program and link descriptors).
pub(crate) fn process_prog_ids(pid: u32) -> Result<HashSet<u32>> {
    let dir = PathBuf::from(format!("/proc/{pid}/fdinfo"));
    let mut ids = HashSet::new();
    for entry in std::fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))? {
        // A descriptor may close while we look: skip it.
        let Ok(text) = entry.and_then(|e| std::fs::read_to_string(e.path())) else {
            continue;
        };
        ids.extend(
            text.lines()
                .filter_map(|l| l.strip_prefix("prog_id:"))
                .filter_map(|v| v.trim().parse::<u32>().ok()),
        );
    }
    Ok(ids)
}

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
use netdoctor_lab::bpf::query::{tcx_prog_ids, xdp_prog_id};
use netdoctor_lab::Netns;

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

//! What netdoctor's own BPF programs cost: each loaded program's run count and run time
//! from the kernel's BPF statistics (`bpf_prog_info.run_cnt` / `run_time_ns`), and whether
//! the operator has the statistics on (`kernel.bpf_stats_enabled`); and the runs the
//! kernel skipped (`recursion_misses`).
//!
//! The kernel counts runs only while the statistics are on (they cost two clock reads per
//! run). netdoctor never switches them on: it reads the sysctl, and its figures mean
//! something only while it reads 1. `BPF_ENABLE_STATS` (what `bpftop` and the bench hold)
//! also turns the counting on, but the sysctl does not show it: it reads what was written
//! to it.

use std::io::Read;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};

use libbpf_rs::Object;

/// The sysctl that switches the kernel's BPF statistics on and off.
pub const STATS_SYSCTL: &str = "/proc/sys/kernel/bpf_stats_enabled";

/// One program's run statistics since it was loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgramRuns {
    /// The program's name, as the kernel reports it (`bpftool prog`).
    pub name: String,
    /// Runs counted while the statistics were on.
    pub runs: u64,
    /// Time spent in those runs, ns.
    pub run_ns: u64,
    /// Runs the kernel skipped because the program was already running on that CPU (an
    /// interrupt arrived while it ran and hit its hook again): the events they would have
    /// counted are missing. Counted whether or not the statistics are on (Linux 5.12; 0
    /// before).
    pub missed: u64,
}

/// Whether `kernel.bpf_stats_enabled` reads 1 (`None`: unreadable, e.g. no procfs). The
/// file is the kernel's own; at most 16 bytes are read.
pub fn stats_enabled() -> Option<bool> {
    let mut text = String::new();
    std::fs::File::open(STATS_SYSCTL)
        .ok()?
        .take(16)
        .read_to_string(&mut text)
        .ok()?;
    match text.trim() {
        "0" => Some(false),
        "1" => Some(true),
        _ => None,
    }
}

/// A program's (run count, run time in ns, skipped runs) from the kernel.
pub(crate) fn run_stats(fd: BorrowedFd<'_>) -> Option<(u64, u64, u64)> {
    let mut info = libbpf_sys::bpf_prog_info::default();
    let mut len = std::mem::size_of::<libbpf_sys::bpf_prog_info>() as u32;
    // SAFETY: `info` is a writable bpf_prog_info of `len` bytes and the kernel writes at
    // most `len` bytes into it; `fd` is a live program descriptor for the call's duration.
    let ret = unsafe { libbpf_sys::bpf_prog_get_info_by_fd(fd.as_raw_fd(), &mut info, &mut len) };
    (ret == 0).then_some((info.run_cnt, info.run_time_ns, info.recursion_misses))
}

/// The run statistics of every program `object` loaded (programs left out of the load,
/// such as XDP when tc counts ingress, have none).
pub(crate) fn of_object(object: &Object) -> Vec<ProgramRuns> {
    object
        .progs()
        .filter(|p| p.autoload())
        .filter_map(|p| {
            let (runs, run_ns, missed) = run_stats(p.as_fd())?;
            Some(ProgramRuns {
                name: p.name().to_string_lossy().into_owned(),
                runs,
                run_ns,
                missed,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sysctl_reads_as_on_or_off() {
        // The kernel's own file: 0 or 1 wherever BPF is built in.
        if std::path::Path::new(STATS_SYSCTL).exists() {
            assert!(stats_enabled().is_some(), "{STATS_SYSCTL} unreadable");
        }
    }
}

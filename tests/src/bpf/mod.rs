//! BPF plumbing shared by the data plane's tests (`dataplane_test_run`) and measurements
//! (`netdoctor-bench`, `dataplane_microbench`): test runs ([`test_run`]), a program's maps
//! ([`maps`]), the programs on an interface's hooks ([`query`]), the empty programs the
//! measurements take as their floor, run-time statistics, program info, and links made
//! directly on program descriptors, for programs that are not netdoctor's own loader's
//! (the floor, compiled variants of packet.bpf.c); and `kernel.bpf_stats_enabled` set for a
//! test ([`sysctl`]).
//!
//! Everything works on descriptors, ids and ifindexes, so none of it depends on netdoctor's
//! crate.

use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

use anyhow::{Context, Result};
use libbpf_rs::libbpf_sys;
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::OpenObject;

pub mod maps;
pub mod query;
pub mod sysctl;
pub mod test_run;

/// Generated skeleton of `tests/bpf/floor.bpf.c` (built by `tests/build.rs`): empty
/// programs with netdoctor's sections and return codes, whose ns per run is the cost of
/// the statistics themselves.
#[allow(
    clippy::all,
    clippy::pedantic,
    clippy::undocumented_unsafe_blocks,
    clippy::unwrap_used,
    missing_docs,
    missing_debug_implementations,
    non_camel_case_types,
    unsafe_op_in_unsafe_fn
)]
pub mod floor {
    include!(concat!(env!("OUT_DIR"), "/floor.skel.rs"));
}

/// Opens and loads the empty programs of [`floor`].
pub fn load_floor(storage: &mut MaybeUninit<OpenObject>) -> Result<floor::FloorSkel<'_>> {
    let open = floor::FloorSkelBuilder::default()
        .open(storage)
        .context("opening the floor programs")?;
    open.load().context("loading the floor programs")
}

/// BPF run-time statistics (`run_time_ns`, `run_cnt`), on while this guard lives
/// (`BPF_ENABLE_STATS`; `kernel.bpf_stats_enabled` is left alone).
#[derive(Debug)]
pub struct StatsGuard {
    _fd: OwnedFd,
}

impl StatsGuard {
    /// Turns the statistics on.
    pub fn enable() -> Result<StatsGuard> {
        // SAFETY: plain syscall wrapper without pointer arguments.
        let fd = unsafe { libbpf_sys::bpf_enable_stats(libbpf_sys::BPF_STATS_RUN_TIME) };
        if fd < 0 {
            return Err(io::Error::from_raw_os_error(-fd)).context("BPF_ENABLE_STATS");
        }
        // SAFETY: bpf_enable_stats returned a new descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(StatsGuard { _fd: fd })
    }
}

/// Creates a BPF link (XDP or tcx) of program `prog_fd` on `ifindex` of the calling
/// thread's network namespace; dropping the descriptor detaches it.
pub fn link_create(
    prog_fd: RawFd,
    ifindex: u32,
    attach_type: u32,
    flags: u32,
) -> io::Result<OwnedFd> {
    let opts = libbpf_sys::bpf_link_create_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_link_create_opts>() as _,
        flags,
        ..Default::default()
    };
    let target = i32::try_from(ifindex).map_err(|_| io::Error::other("ifindex out of range"))?;
    // SAFETY: `prog_fd` is a loaded program kept open by the caller for the duration of the
    // call, and `opts` is a fully initialised options struct whose `sz` matches our libbpf.
    let fd = unsafe { libbpf_sys::bpf_link_create(prog_fd, target, attach_type, &opts) };
    if fd < 0 {
        return Err(io::Error::from_raw_os_error(-fd));
    }
    // SAFETY: bpf_link_create returned a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `bpf_prog_info` of program `fd` (run-time statistics, sizes); fills `map_ids` (up to its
/// length) with the ids of the program's maps.
pub fn prog_info(fd: RawFd, map_ids: &mut [u32]) -> io::Result<libbpf_sys::bpf_prog_info> {
    let mut info = libbpf_sys::bpf_prog_info::default();
    if !map_ids.is_empty() {
        info.nr_map_ids = u32::try_from(map_ids.len()).unwrap_or(u32::MAX);
        info.map_ids = map_ids.as_mut_ptr() as u64;
    }
    let mut len = std::mem::size_of::<libbpf_sys::bpf_prog_info>() as u32;
    // SAFETY: `fd` is a program kept open by the caller for the duration of the call;
    // `info` is a zero-initialised bpf_prog_info of `len` bytes whose only pointer,
    // `map_ids`, is null or points at `map_ids`, which holds `nr_map_ids` entries and
    // outlives the call.
    let rc = unsafe {
        libbpf_sys::bpf_obj_get_info_by_fd(
            fd,
            (&mut info as *mut libbpf_sys::bpf_prog_info).cast(),
            &mut len,
        )
    };
    if rc < 0 {
        return Err(io::Error::from_raw_os_error(-rc));
    }
    Ok(info)
}

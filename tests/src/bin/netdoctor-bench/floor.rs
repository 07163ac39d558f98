//! The floor: empty programs (`tests/bpf/floor.bpf.c`) loaded once and attached beside or
//! instead of netdoctor's, whose ns per run is what the statistics themselves cost.
//!
//! On tcx the floor is prepended, so it runs *first* on each hook, ahead of netdoctor: the
//! first program of a chain pays the cold cache misses the whole chain shares, so an empty
//! program behind netdoctor runs cheaper than an empty program alone, and Δ = netdoctor −
//! floor would count those misses as netdoctor's (measured here with a program reduced to
//! one lookup and one increment: Δ 13-15 ns with the floor behind it, -1..3 ns with it
//! first).

use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};

use anyhow::{Context, Result};
use libbpf_rs::{libbpf_sys, OpenObject};
use netdoctor_lab::bpf::floor::FloorSkel;
use netdoctor_lab::bpf::{link_create, load_floor};
use netdoctor_lab::Netns;

use crate::packet::run::Hook;
use crate::programs::Counter;

/// The empty programs, loaded once; attached per run.
pub(crate) struct Floor<'obj> {
    pub(crate) skel: FloorSkel<'obj>,
    pub(crate) xdp_id: u32,
    pub(crate) tc_in_id: u32,
    pub(crate) tc_out_id: u32,
}

impl std::fmt::Debug for Floor<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Floor")
            .field("xdp_id", &self.xdp_id)
            .field("tc_in_id", &self.tc_in_id)
            .field("tc_out_id", &self.tc_out_id)
            .finish()
    }
}

impl<'obj> Floor<'obj> {
    pub(crate) fn load(storage: &'obj mut MaybeUninit<OpenObject>) -> Result<Floor<'obj>> {
        let skel = load_floor(storage)?;
        let id = |fd| libbpf_rs::Program::id_from_fd(fd).context("floor program id");
        Ok(Floor {
            xdp_id: id(skel.progs.floor_xdp.as_fd())?,
            tc_in_id: id(skel.progs.floor_tc_in.as_fd())?,
            tc_out_id: id(skel.progs.floor_tc_out.as_fd())?,
            skel,
        })
    }

    pub(crate) fn id(&self, hook: Hook) -> u32 {
        match hook {
            Hook::Xdp => self.xdp_id,
            Hook::TcIn => self.tc_in_id,
            Hook::TcOut => self.tc_out_id,
        }
    }

    /// Cumulative statistics of the empty program for `hook`.
    pub(crate) fn counter(&self, hook: Hook) -> io::Result<Counter> {
        Counter::read(match hook {
            Hook::Xdp => self.skel.progs.floor_xdp.as_fd(),
            Hook::TcIn => self.skel.progs.floor_tc_in.as_fd(),
            Hook::TcOut => self.skel.progs.floor_tc_out.as_fd(),
        })
    }

    /// Attaches the empty programs on `hooks` of the watched interface; they stay attached
    /// while the returned descriptors are open. On tcx they go in front of what is there
    /// (see the module's note); they return TCX_NEXT, so the rest of the chain still runs.
    pub(crate) fn attach(
        &self,
        ns: &Netns,
        ifindex: u32,
        hooks: &[Hook],
        xdp_flags: u32,
    ) -> Result<Vec<OwnedFd>> {
        let plan: Vec<(RawFd, u32, u32, &'static str)> = hooks
            .iter()
            .map(|h| match h {
                Hook::Xdp => (
                    self.skel.progs.floor_xdp.as_fd().as_raw_fd(),
                    libbpf_sys::BPF_XDP,
                    xdp_flags,
                    "xdp",
                ),
                // BPF_F_BEFORE without a relative program prepends to the whole chain.
                Hook::TcIn => (
                    self.skel.progs.floor_tc_in.as_fd().as_raw_fd(),
                    libbpf_sys::BPF_TCX_INGRESS,
                    libbpf_sys::BPF_F_BEFORE,
                    "tcx ingress",
                ),
                Hook::TcOut => (
                    self.skel.progs.floor_tc_out.as_fd().as_raw_fd(),
                    libbpf_sys::BPF_TCX_EGRESS,
                    libbpf_sys::BPF_F_BEFORE,
                    "tcx egress",
                ),
            })
            .collect();
        // The descriptors in `plan` belong to `self.skel`, which outlives this call.
        ns.run_in(move || -> Result<Vec<OwnedFd>> {
            plan.iter()
                .map(|&(fd, attach_type, flags, what)| {
                    link_create(fd, ifindex, attach_type, flags)
                        .with_context(|| format!("attaching the empty {what} program"))
                })
                .collect()
        })?
    }
}

//! Which programs are attached to an interface's hooks, asked of the kernel directly
//! (`bpf_prog_query` for tcx chains, `bpf_xdp_query` for XDP), for an ifindex of the
//! calling thread's network namespace: run them inside a lab namespace with `Netns::run_in`.

use std::io;

use libbpf_rs::libbpf_sys;

/// More programs than a tcx chain of a test ever holds.
const MAX_CHAIN: usize = 64;

fn target(ifindex: u32) -> io::Result<i32> {
    i32::try_from(ifindex).map_err(|_| io::Error::other("ifindex out of range"))
}

/// Ids of the programs on a tcx hook (`BPF_TCX_INGRESS` or `BPF_TCX_EGRESS`) of `ifindex`,
/// in chain order.
pub fn tcx_prog_ids(ifindex: u32, attach_type: u32) -> io::Result<Vec<u32>> {
    let mut ids = [0u32; MAX_CHAIN];
    let mut opts = libbpf_sys::bpf_prog_query_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_prog_query_opts>() as _,
        prog_ids: ids.as_mut_ptr(),
        ..Default::default()
    };
    opts.__bindgen_anon_1.prog_cnt = ids.len() as u32;
    let target = target(ifindex)?;
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
pub fn xdp_prog_id(ifindex: u32) -> io::Result<u32> {
    let mut opts = libbpf_sys::bpf_xdp_query_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_xdp_query_opts>() as _,
        ..Default::default()
    };
    let target = target(ifindex)?;
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

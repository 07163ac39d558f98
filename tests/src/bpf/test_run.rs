//! `BPF_PROG_TEST_RUN` on a loaded program's descriptor: one run, or `repeat` runs on the
//! same input in one call, with the program's return value and the mean time per run as
//! the kernel measured it. Also what the kernel's test-run code refuses before a program
//! runs, the verdicts that let a packet through, and a `struct __sk_buff` context that
//! carries GSO metadata into tc runs.
//!
//! The kernel runs the program on the calling thread's CPU and network namespace, with the
//! namespace's loopback (ifindex 1) as the packet's device unless a context names another.

use std::io;
use std::os::fd::RawFd;

use libbpf_rs::libbpf_sys;

/// What an XDP program returns to let a packet through (XDP_PASS).
pub const XDP_PASS: u32 = 2;
/// What a tc program returns to let a packet through: -1 (TCX_NEXT / TC_ACT_UNSPEC).
pub const TC_NEXT: u32 = u32::MAX;

/// The kind of program a test run feeds, which decides what input the kernel accepts and
/// which verdict lets the packet through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProgType {
    /// XDP: the input is the frame as the driver sees it.
    Xdp,
    /// tc (tcx, cls_bpf): the input becomes an skb.
    Tc,
}

impl ProgType {
    /// The return value that lets a packet through: [`XDP_PASS`] or [`TC_NEXT`].
    pub fn pass_code(self) -> u32 {
        match self {
            ProgType::Xdp => XDP_PASS,
            ProgType::Tc => TC_NEXT,
        }
    }
}

/// What one test-run call gave back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TestRun {
    /// The program's return value (of the last run).
    pub retval: u32,
    /// Mean ns per run, as the kernel timed its repeat loop.
    pub duration_ns: u32,
}

/// Runs program `fd` on `data` (with an optional context) `repeat` times in one call; 0 and
/// 1 both mean once.
///
/// Calls libbpf directly on the descriptor (rather than `ProgramMut::test_run`) so that a
/// refusal comes back as the kernel's errno in an [`io::Error`], whose kind tests check
/// (`InvalidInput` for inputs the kernel refuses, see [`kernel_rejects`]).
pub fn test_run(fd: RawFd, data: &[u8], ctx: Option<&[u8]>, repeat: u32) -> io::Result<TestRun> {
    let too_big = |what: &str| io::Error::new(io::ErrorKind::InvalidInput, what.to_owned());
    let mut opts = libbpf_sys::bpf_test_run_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_test_run_opts>() as _,
        data_in: data.as_ptr().cast(),
        data_size_in: u32::try_from(data.len()).map_err(|_| too_big("test input over 4 GiB"))?,
        repeat: i32::try_from(repeat).map_err(|_| too_big("repeat count over i32::MAX"))?,
        ..Default::default()
    };
    if let Some(ctx) = ctx {
        opts.ctx_in = ctx.as_ptr().cast();
        opts.ctx_size_in = u32::try_from(ctx.len()).map_err(|_| too_big("context over 4 GiB"))?;
    }
    // SAFETY: `opts` is a zero-initialised bpf_test_run_opts with its own size in `sz`; its
    // only pointers are `data_in`/`ctx_in`, which borrow `data`/`ctx` for the whole call, and
    // no output buffers are given, so libbpf and the kernel write into `opts` alone. `fd` is
    // a loaded program the caller keeps open for the call (a closed one gives EBADF).
    let rc = unsafe { libbpf_sys::bpf_prog_test_run_opts(fd, &mut opts) };
    if rc < 0 {
        return Err(io::Error::from_raw_os_error(-rc));
    }
    Ok(TestRun {
        retval: opts.retval,
        duration_ns: opts.duration,
    })
}

/// Mean ns per run of `repeat` runs of program `fd` on `data`, as the kernel timed them.
pub fn ns_per_run(fd: RawFd, data: &[u8], repeat: u32) -> io::Result<f64> {
    Ok(f64::from(test_run(fd, data, None, repeat)?.duration_ns))
}

/// Whether the kernel's test-run code refuses `frame` before the program runs (EINVAL):
/// every hook needs at least an Ethernet header (14 bytes), and skb test runs on this kernel
/// (6.18, measured) also refuse frames whose EtherType is IPv4 or IPv6 but which are too
/// short for the fixed IPv4 (20) or IPv6 (40) header. VLAN-tagged frames are not checked.
pub fn kernel_rejects(prog: ProgType, frame: &[u8]) -> bool {
    if frame.len() < 14 {
        return true;
    }
    if prog == ProgType::Xdp {
        return false;
    }
    match u16::from_be_bytes([frame[12], frame[13]]) {
        0x0800 => frame.len() < 14 + 20,
        0x86DD => frame.len() < 14 + 40,
        _ => false,
    }
}

/// A `struct __sk_buff` context for a tc test run with GSO fields set (UAPI layout, see
/// ebpf/vmlinux/x86/vmlinux.h: gso_segs at offset 164, gso_size at 176, size 192).
pub fn skb_ctx(gso_segs: u32, gso_size: u32) -> Vec<u8> {
    let mut ctx = vec![0u8; 192];
    ctx[164..168].copy_from_slice(&gso_segs.to_ne_bytes());
    ctx[176..180].copy_from_slice(&gso_size.to_ne_bytes());
    ctx
}

/// A `struct __sk_buff` context for a tc test run on device `ifindex` (offset 40) of the
/// calling thread's network namespace: the program sees the packet arrive there.
pub fn skb_ctx_on(ifindex: u32) -> Vec<u8> {
    let mut ctx = skb_ctx(0, 0);
    ctx[40..44].copy_from_slice(&ifindex.to_ne_bytes());
    ctx
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(ethertype: u16, len: usize) -> Vec<u8> {
        let mut f = vec![0u8; len.max(14)];
        f[12..14].copy_from_slice(&ethertype.to_be_bytes());
        f.truncate(len);
        f
    }

    #[test]
    fn only_skb_runs_check_the_ip_header_length() {
        for prog in [ProgType::Xdp, ProgType::Tc] {
            assert!(
                kernel_rejects(prog, &frame(0x0806, 13)),
                "{prog:?}: below 14 bytes"
            );
            assert!(
                !kernel_rejects(prog, &frame(0x0806, 14)),
                "{prog:?}: ARP header only"
            );
        }
        for (ethertype, min) in [(0x0800, 34), (0x86DD, 54)] {
            assert!(kernel_rejects(ProgType::Tc, &frame(ethertype, min - 1)));
            assert!(!kernel_rejects(ProgType::Tc, &frame(ethertype, min)));
            assert!(!kernel_rejects(ProgType::Xdp, &frame(ethertype, min - 1)));
        }
        assert!(
            !kernel_rejects(ProgType::Tc, &frame(0x8100, 18)),
            "VLAN: not checked"
        );
    }

    #[test]
    fn skb_ctx_puts_gso_fields_at_their_uapi_offsets() {
        let ctx = skb_ctx(7, 1448);
        assert_eq!(ctx.len(), 192);
        assert_eq!(ctx[164..168], 7u32.to_ne_bytes());
        assert_eq!(ctx[176..180], 1448u32.to_ne_bytes());
        assert_eq!(
            ctx.iter().filter(|&&b| b != 0).count(),
            3,
            "nothing else set"
        );
    }
}

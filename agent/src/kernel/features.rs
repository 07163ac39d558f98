//! Kernel features the BPF programs adapt to, found by asking the running kernel (a trial
//! load of a two-instruction program), never from its version number: distributions
//! backport features (RHEL 9's 5.14 has tcx, for one).
//!
//! Helpers that only some kernels have are chosen inside the C programs with CO-RE
//! (`ebpf/include/compat.bpf.h`); what a program's load attributes decide is probed here.

use std::os::fd::{FromRawFd, OwnedFd};

/// `r0 = XDP_PASS; exit`: the smallest valid XDP program.
const XDP_PASS_PROGRAM: [libbpf_sys::bpf_insn; 2] = [
    libbpf_sys::bpf_insn {
        code: (libbpf_sys::BPF_ALU64 | libbpf_sys::BPF_MOV | libbpf_sys::BPF_K) as u8,
        _bitfield_align_1: [],
        _bitfield_1: libbpf_sys::__BindgenBitfieldUnit::new([0]),
        off: 0,
        imm: libbpf_sys::XDP_PASS as i32,
    },
    libbpf_sys::bpf_insn {
        code: (libbpf_sys::BPF_JMP | libbpf_sys::BPF_EXIT) as u8,
        _bitfield_align_1: [],
        _bitfield_1: libbpf_sys::__BindgenBitfieldUnit::new([0]),
        off: 0,
        imm: 0,
    },
];

/// Whether the kernel accepts XDP programs flagged `BPF_F_XDP_HAS_FRAGS` (multi-buffer
/// XDP, section `xdp.frags`; Linux 5.18). Older kernels refuse the flag with EINVAL, so the
/// data plane's XDP program is then loaded without it and sees linear frames only.
pub fn xdp_frags() -> bool {
    let mut opts = libbpf_sys::bpf_prog_load_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_prog_load_opts>() as _,
        prog_flags: libbpf_sys::BPF_F_XDP_HAS_FRAGS,
        ..Default::default()
    };
    // SAFETY: the name and license are NUL-terminated literals, the instructions a valid
    // array of their stated length, and `opts` a live bpf_prog_load_opts carrying its own
    // size; all outlive the call.
    let fd = unsafe {
        libbpf_sys::bpf_prog_load(
            libbpf_sys::BPF_PROG_TYPE_XDP,
            c"nd_probe_frags".as_ptr(),
            c"GPL".as_ptr(),
            XDP_PASS_PROGRAM.as_ptr(),
            XDP_PASS_PROGRAM.len() as _,
            &mut opts,
        )
    };
    if fd < 0 {
        return false;
    }
    // SAFETY: a non-negative return is a new program descriptor that nothing else owns;
    // wrapping it closes it when this function returns.
    drop(unsafe { OwnedFd::from_raw_fd(fd) });
    true
}

/// Whether the kernel runs syscall programs (`BPF_PROG_TYPE_SYSCALL`, Linux 5.14) that call
/// `bpf_loop` (5.17): the agent's batched flow lookup (`packet::flow_lookup`) needs both.
/// The program type first: libbpf's helper probe reads "supported" into any refusal whose
/// log does not name the helper, which is how a kernel without the type (5.10) refuses.
pub fn syscall_loop() -> bool {
    let syscall = libbpf_sys::BPF_PROG_TYPE_SYSCALL;
    // SAFETY: no pointer is passed but the documented NULL for options; the call only loads
    // and closes a probe program.
    let program = unsafe { libbpf_sys::libbpf_probe_bpf_prog_type(syscall, std::ptr::null()) };
    // SAFETY: as above.
    program == 1
        && unsafe {
            libbpf_sys::libbpf_probe_bpf_helper(
                syscall,
                libbpf_sys::BPF_FUNC_loop,
                std::ptr::null(),
            )
        } == 1
}

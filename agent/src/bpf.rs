//! Generated libbpf skeletons, one module per `ebpf/*.bpf.c` program.

#![allow(
    clippy::all,
    clippy::pedantic,
    clippy::undocumented_unsafe_blocks,
    clippy::unwrap_used,
    missing_docs,
    missing_debug_implementations,
    non_camel_case_types,
    unsafe_op_in_unsafe_fn
)]

/// `ebpf/packet.bpf.c`: per-interface and per-flow packet accounting (XDP + tc).
pub mod packet {
    include!(concat!(env!("OUT_DIR"), "/packet.skel.rs"));
}

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

/// `ebpf/sockets.bpf.c`: TCP socket snapshots (iter/tcp), retransmissions and close events.
pub mod sockets {
    include!(concat!(env!("OUT_DIR"), "/sockets.skel.rs"));
}

/// `ebpf/drops.bpf.c`: kernel packet drops by device, reason and protocol.
pub mod drops {
    include!(concat!(env!("OUT_DIR"), "/drops.skel.rs"));
}

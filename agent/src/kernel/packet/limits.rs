//! The limits of `ebpf/include/packet.h` that the Rust side copies by hand, checked against
//! the object this build compiled: a C limit changed without its Rust copy (or the reverse)
//! fails here rather than in a kernel, where it would count into the wrong slots.
//!
//! Map sizes come from the skeleton's maps as libbpf opens the object (before the agent
//! sizes the per-CPU maps for the CPUs it finds), array lengths from the skeleton's
//! generated types, published constants from the object's `.rodata`. Opening only parses the
//! object: no kernel, no privileges.

use std::mem::MaybeUninit;

use libbpf_rs::skel::SkelBuilder;

use super::counters::SIZE_BUCKET_BOUNDS;
use super::dataplane::{MAX_IFACES, MAX_TUNNEL_PORTS, SLOT_ARRAY_IFINDEX};
use super::flow_cache::SLOTS_PER_CPU;
use super::local_tcp;
use super::options::{
    PATH_LOCAL_IN4, PATH_LOCAL_IN6, PATH_LOCAL_TCP, PATH_STAGES, PATH_USER_PORTS,
};
use crate::kernel::bpf::packet::PacketSkelBuilder;

#[test]
fn mirrored_limits_match_the_compiled_object() {
    let mut storage = MaybeUninit::uninit();
    let open = PacketSkelBuilder::default()
        .open(&mut storage)
        .expect("libbpf opens the packet object");
    let maps = &open.maps;

    // ND_MAX_IFACES: the slot hash for large ifindexes holds one entry per slot, and the
    // counters one value per slot and direction (per CPU once the agent resizes them).
    assert_eq!(
        maps.iface_slot_big.max_entries(),
        u32::try_from(MAX_IFACES).expect("MAX_IFACES fits a u32"),
        "MAX_IFACES against ND_MAX_IFACES (iface_slot_big)"
    );
    assert_eq!(
        maps.iface_stats.max_entries(),
        u32::try_from(MAX_IFACES * 2).expect("MAX_IFACES * 2 fits a u32"),
        "MAX_IFACES against ND_MAX_IFACES (iface_stats: two directions per slot)"
    );
    assert_eq!(
        maps.iface_slot.max_entries(),
        SLOT_ARRAY_IFINDEX,
        "SLOT_ARRAY_IFINDEX against ND_SLOT_ARRAY_IFINDEX (iface_slot)"
    );
    assert_eq!(
        maps.flow_lookup.max_entries() as usize,
        super::flow_lookup::BATCH,
        "flow_lookup::BATCH against ND_LOOKUP_BATCH (flow_lookup)"
    );
    assert_eq!(
        maps.flow_cache.max_entries(),
        SLOTS_PER_CPU,
        "flow_cache::SLOTS_PER_CPU against ND_FLOW_CACHE_SLOTS (flow_cache, one CPU's run)"
    );

    let bss = maps.bss_data.as_deref().expect("packet.bpf.c has a .bss");
    assert_eq!(
        bss.user_ports.len(),
        MAX_TUNNEL_PORTS,
        "MAX_TUNNEL_PORTS against ND_MAX_USER_PORTS (user_ports)"
    );
    assert_eq!(
        bss.user_port_encap.len(),
        MAX_TUNNEL_PORTS,
        "MAX_TUNNEL_PORTS against ND_MAX_USER_PORTS (user_port_encap)"
    );

    // ND_SIZE_BOUND_*: the programs bucket with the constants; the object publishes them in
    // `size_bounds`, whose initial value the opened skeleton holds.
    let rodata = maps
        .rodata_data
        .as_deref()
        .expect("packet.bpf.c has a .rodata");
    assert_eq!(
        rodata.size_bounds, SIZE_BUCKET_BOUNDS,
        "SIZE_BUCKET_BOUNDS against ND_SIZE_BOUND_* (size_bounds)"
    );
    // enum nd_path's bits, published in `path_bits`.
    assert_eq!(
        rodata.path_bits,
        [
            PATH_LOCAL_TCP,
            PATH_STAGES,
            PATH_USER_PORTS,
            PATH_LOCAL_IN4,
            PATH_LOCAL_IN6
        ],
        "PATH_* against enum nd_path (path_bits)"
    );

    let addrs = crate::kernel::views::nd_local_addrs::default();
    assert_eq!(
        addrs.v4.len(),
        local_tcp::MAX_V4,
        "MAX_V4 against ND_LOCAL_V4"
    );
    assert_eq!(
        addrs.v6.len(),
        local_tcp::MAX_V6,
        "MAX_V6 against ND_LOCAL_V6"
    );
}

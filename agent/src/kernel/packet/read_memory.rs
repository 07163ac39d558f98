//! What one reading of the flow table holds at its peak: the flows it returns, and not the
//! table a second time (issue 34: a million flows must not take the agent's memory with them).

use std::mem::MaybeUninit;

use libbpf_rs::{MapCore, MapFlags};

use super::flows::Flow;
use super::{Dataplane, Options};
use crate::kernel::views::{encode, nd_flow_key, nd_flow_stats};
use crate::testing::{peak_bytes, root_or_skip};

/// Flows put in the table: enough that what a reading holds dwarfs everything else it does,
/// and under half the table (filled from one CPU, an LRU table evicts before it is full).
const FLOWS: u32 = 60_000;

/// Fills the loaded table with `FLOWS` distinct UDP flows on interface 1.
fn fill(dp: &Dataplane<'_>) {
    for i in 0..FLOWS {
        let key = nd_flow_key {
            ifindex: 1,
            family: 4,
            proto: 17,
            sport: (i & 0xffff) as u16,
            dport: (i >> 16) as u16 + 1,
            ..Default::default()
        };
        let stats = nd_flow_stats {
            packets: 1,
            segs: 1,
            bytes: 100,
            first_ns: 1,
            last_ns: 1,
            ..Default::default()
        };
        dp.skel
            .maps
            .flows
            .update(encode(&key), encode(&stats), MapFlags::NO_EXIST)
            .expect("a new flow in the table");
    }
}

#[test]
fn a_reading_holds_each_flow_once() {
    if !root_or_skip("to load the packet programs") {
        return;
    }
    let mut storage = MaybeUninit::uninit();
    let options = Options {
        max_flows: 131_072,
        ..Options::default()
    };
    let dp = Dataplane::load(&mut storage, options).expect("load the packet programs");
    fill(&dp);
    let ((flows, table), peak) = peak_bytes(|| dp.flows_and_table().expect("a reading"));
    assert_eq!(flows.len(), FLOWS as usize);
    assert_eq!(table.entries, u64::from(FLOWS));
    // The flows returned, with room for a growing vector's spare capacity (the fill bypassed
    // the programs' insert count, which sizes the vector), plus 2 MiB: the batches and two
    // copies of the flow cache's slots.
    let held = FLOWS as usize * std::mem::size_of::<Flow>();
    let bound = held + held / 4 + (2 << 20);
    println!("a reading of {FLOWS} flows peaked at {peak} bytes; the flows are {held} bytes");
    assert!(
        peak <= bound,
        "a reading of {FLOWS} flows peaked at {:.1} MiB; the flows are {:.1} MiB (bound {:.1} MiB)",
        peak as f64 / f64::from(1 << 20),
        held as f64 / f64::from(1 << 20),
        bound as f64 / f64::from(1 << 20),
    );
}

//! A window compares only the flows active in it: exact for those, and its memory follows
//! them, not the table.

use std::sync::Arc;

use super::super::flows::{test_flow, Flow};
use super::super::snapshot::Snapshot;
use crate::kernel::views::{Clocks, Direction};
use crate::testing::peak_bytes;

/// The UNIX time when CLOCK_MONOTONIC read 0, ns.
const BOOT_UNIX_NS: u64 = 1_764_000_000_000_000_000;
const S: u64 = 1_000_000_000;

fn clocks(mono_s: u64) -> Clocks {
    Clocks::at(mono_s * S, BOOT_UNIX_NS + mono_s * S)
}

/// `n` flows on one interface, each last seen at `seen_ms` (monotonic ms) with `packets`.
fn flows(n: u32, packets: u64, seen_ms: impl Fn(u32) -> u64) -> Vec<Flow> {
    (0..n)
        .map(|i| {
            let mut f = test_flow(3, Direction::Ingress, "10.0.0.1", i as u16, "10.0.1.1", 0);
            f.dst_port = (i >> 16) as u16;
            f.packets = packets;
            f.bytes = packets * 100;
            f.last_seen_ms = BOOT_UNIX_NS / 1_000_000 + seen_ms(i);
            f
        })
        .collect()
}

fn reading(flows: Vec<Flow>, mono_s: u64) -> Snapshot {
    Snapshot {
        flows: Arc::new(flows),
        flows_clocks: Some(clocks(mono_s)),
        mono_ns: mono_s * S,
        ..Snapshot::default()
    }
}

const TABLE: u32 = 50_000;
const ACTIVE: u32 = 100;

/// A table of `TABLE` flows read at 100 s and at 110 s; the first `ACTIVE` of them carried
/// 3 packets more in between, last at 105 s.
fn two_readings() -> (Snapshot, Snapshot) {
    let earlier = reading(flows(TABLE, 5, |_| 50_000), 100);
    let mut now = flows(TABLE, 5, |_| 50_000);
    for f in now.iter_mut().take(ACTIVE as usize) {
        f.packets += 3;
        f.bytes += 300;
        f.last_seen_ms = BOOT_UNIX_NS / 1_000_000 + 105_000;
    }
    (earlier, reading(now, 110))
}

#[test]
fn a_window_holds_its_active_flows_with_their_deltas() {
    let (earlier, now) = two_readings();
    let window = now.since(&earlier);
    assert_eq!(window.flows.len(), ACTIVE as usize);
    for f in window.flows.iter() {
        assert!(u32::from(f.src_port) < ACTIVE, "{f:?}");
        assert_eq!((f.packets, f.bytes), (3, 300), "{f:?}");
    }
    assert_eq!(window.since_mono_ns, 100 * S);
}

#[test]
fn a_window_over_a_large_table_holds_memory_for_its_active_flows_only() {
    let (earlier, now) = two_readings();
    let (window, peak) = peak_bytes(|| now.since(&earlier));
    assert_eq!(window.flows.len(), ACTIVE as usize);
    // The window's flows and the map of the active flows' keys, with room to spare; a map
    // of every earlier flow's key would take megabytes.
    let bound = 64 * ACTIVE as usize * std::mem::size_of::<Flow>();
    println!(
        "a window of {ACTIVE} active flows over {TABLE} peaked at {peak} bytes (bound {bound})"
    );
    assert!(
        peak <= bound,
        "a window of {ACTIVE} active flows over a table of {TABLE} peaked at {peak} bytes \
         (bound {bound}): it held something the size of the table"
    );
}

#[test]
fn a_flow_stamped_a_tick_before_the_earlier_reading_still_counts() {
    // The coarse clock stamps a packet up to a tick (or a flow-cache slot a jiffy more)
    // before the time the reading saw: a flow last seen 300 ms before the earlier reading
    // began, with packets counted after it, is compared all the same.
    let earlier = reading(flows(10, 5, |_| 50_000), 100);
    let mut now = flows(10, 5, |_| 50_000);
    now[4].packets = 7;
    now[4].last_seen_ms = BOOT_UNIX_NS / 1_000_000 + 99_700;
    let window = reading(now, 110).since(&earlier);
    assert_eq!(window.flows.len(), 1);
    assert_eq!((window.flows[0].src_port, window.flows[0].packets), (4, 2));
}

#[test]
fn without_clocks_every_flow_is_compared() {
    // Snapshots not read from a data plane (tests, a first window against nothing) carry
    // no clocks: every flow with packets is in the window, as a whole when new.
    let (earlier, now) = two_readings();
    let mut earlier = earlier;
    earlier.flows_clocks = None;
    assert_eq!(now.since(&earlier).flows.len(), ACTIVE as usize);
    let all = now.since(&Snapshot::default());
    assert_eq!(all.flows.len(), TABLE as usize);
    assert_eq!(all.flows[0].packets, 8);
}

#[test]
fn a_window_against_a_smaller_earlier_reading_matches_by_key() {
    // The other side of the matching: fewer earlier flows than active ones.
    let earlier = reading(flows(3, 5, |_| 99_000), 100);
    let now = reading(flows(20, 9, |_| 105_000), 110);
    let window = now.since(&earlier);
    assert_eq!(window.flows.len(), 20);
    let packets: Vec<u64> = window.flows.iter().map(|f| f.packets).collect();
    assert_eq!(&packets[..4], &[4, 4, 4, 9]);
}

/// A table value read for window `n` gives the counts of the window its parity holds when
/// that is `n`, none otherwise, and everything else as it is.
#[test]
fn a_value_in_a_window_counts_only_that_window() {
    use super::super::flows::value_in_window;
    use crate::kernel::views::{nd_flow_stats, nd_flow_win};

    let win = |window, packets| nd_flow_win {
        window,
        packets,
        bytes: u64::from(packets) * 100,
        segs: packets * 2,
        retrans_segs: 1,
        wg_msgs: [0, 0, 0, packets],
    };
    let v = nd_flow_stats {
        packets: 50,
        bytes: 5000,
        first_ns: 7,
        last_ns: 9,
        syn_mss: 1460,
        win: [win(4, 3), win(5, 8)],
        ..Default::default()
    };
    let w5 = value_in_window(&v, 5);
    assert_eq!((w5.packets, w5.bytes, w5.segs), (8, 800, 16));
    assert_eq!((w5.retrans_segs, w5.wg_msgs), (1, [0, 0, 0, 8]));
    assert_eq!((w5.first_ns, w5.last_ns, w5.syn_mss), (7, 9, 1460));
    assert_eq!(value_in_window(&v, 4).packets, 3);
    // Window 6 is at the parity of 4, which holds an older window: nothing in 6.
    let w6 = value_in_window(&v, 6);
    assert_eq!((w6.packets, w6.bytes, w6.wg_msgs), (0, 0, [0; 4]));
}

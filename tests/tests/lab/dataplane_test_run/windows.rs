//! The agent's windows (`ebpf/include/flow_window.bpf.h`): the data plane counts what each
//! flow carried in each window, and closing a window returns exactly the flows with packets
//! in it, counted over it, whichever path (cache slot on either CPU, the table when a slot is
//! busy, a slot retired or flushed into the table) their packets took; totals stay exact.

use std::collections::BTreeMap;
use std::mem::MaybeUninit;
use std::time::Duration;

use anyhow::{ensure, Context, Result};
use libbpf_rs::OpenObject;
use netdoctor::kernel::packet::flow_table::FlowTableUse;
use netdoctor::kernel::packet::{
    Dataplane, LinkType, Options, ProgramKind, WindowReads, WINDOW_COUNT_EVERY as COUNT_EVERY,
};
use netdoctor_lab::lab_guard;
use netdoctor_lab::packet::builder as pkt;
use netdoctor_lab::packet::random::Rng;

use crate::dataplane_test_run::harness::{pin, run, two_cpus, unpin, LO};

/// Packets and bytes per source port.
type Counts = BTreeMap<u16, (u64, u64)>;
/// A port whose counts differ: (port, counted, sent).
type Difference = (u16, Option<(u64, u64)>, Option<(u64, u64)>);

/// An Ethernet frame of a UDP datagram 10.0.0.1:`sport` -> 10.0.0.2:80 with `n` bytes of
/// payload, and its length (what tc counts as a packet's bytes).
fn datagram(sport: u16, n: usize) -> (Vec<u8>, u64) {
    let frame = pkt::v4(pkt::UDP, &pkt::udp(sport, 80, &pkt::data(n)));
    let len = frame.len() as u64;
    (frame, len)
}

/// Closes the data plane's window: its flows' packets and bytes by source port.
fn close(dp: &mut Dataplane<'_>) -> Result<Counts> {
    let w = dp.window_snapshot().context("closing a window")?;
    let mut out = Counts::new();
    for f in w.flows.iter() {
        ensure!(
            out.insert(f.src_port, (f.packets, f.bytes)).is_none(),
            "flow {} twice in one window",
            f.src_port
        );
    }
    Ok(out)
}

/// Windows per run.
const WINDOWS: usize = 12;

/// Longer than ND_SLOT_IDLE_J (4 jiffies) at any HZ: an idle slot may be taken over.
const IDLE: Duration = Duration::from_millis(60);

/// Seeded windows of random traffic over `FLOWS` flows, which share the 1,024 slots of a
/// CPU (so some collide: busy slots send packets to the table, idle ones are retired): each
/// window some flows send 1-20 datagrams of random sizes from CPU 0 or 1, sometimes after a
/// pause that lets slots go idle; some windows carry nothing, and one carries every flow
/// (more than a batched lookup's 1,024 keys). Every closed window must hold exactly the
/// model's flows and counts, and the totals at the end every packet.
fn random_windows(dp: &mut Dataplane<'_>, seed: u64, cpus: usize) -> Result<()> {
    const FLOWS: u16 = 1500;
    const EVERY_FLOW: usize = WINDOWS / 2;
    let mut rng = Rng::new(seed);
    let mut totals = Counts::new();
    for window in 1..=WINDOWS {
        let mut model = Counts::new();
        let busy = if window == EVERY_FLOW {
            usize::from(FLOWS)
        } else if rng.chance(15) {
            0
        } else {
            1 + rng.below(600)
        };
        for i in 0..busy {
            if window != EVERY_FLOW && rng.chance(2) {
                std::thread::sleep(IDLE);
            }
            pin(rng.below(cpus))?;
            let sport = 20_000
                + if window == EVERY_FLOW {
                    i
                } else {
                    rng.below(usize::from(FLOWS))
                } as u16;
            for _ in 0..1 + rng.below(20) {
                let (frame, len) = datagram(sport, 1 + rng.below(1400));
                run(dp, ProgramKind::TcEgress, &frame)?;
                for c in [&mut model, &mut totals] {
                    let e = c.entry(sport).or_default();
                    e.0 += 1;
                    e.1 += len;
                }
            }
        }
        unpin()?;
        let got = close(dp)?;
        ensure!(
            got == model,
            "seed {seed:#x}, window {window}: {} flows counted, {} sent; first differences: {:?}",
            got.len(),
            model.len(),
            differences(&got, &model)
        );
    }
    let flows = dp.flows()?;
    let got: Counts = flows
        .iter()
        .map(|f| (f.src_port, (f.packets, f.bytes)))
        .collect();
    ensure!(
        got == totals,
        "seed {seed:#x}: totals differ: {:?}",
        differences(&got, &totals)
    );
    Ok(())
}

/// Up to five ports whose counts differ.
fn differences(got: &Counts, want: &Counts) -> Vec<Difference> {
    got.keys()
        .chain(want.keys())
        .filter(|p| got.get(p) != want.get(p))
        .take(5)
        .map(|p| (*p, got.get(p).copied(), want.get(p).copied()))
        .collect()
}

/// Loads a data plane watching the loopback (`windows`: with a ring sized for the agent's
/// windows; without, a page that overflows); the first window begins.
fn windowed(storage: &mut MaybeUninit<OpenObject>, windows: bool) -> Result<Dataplane<'_>> {
    let options = Options {
        windows,
        ..Options::default()
    };
    let mut dp = Dataplane::load(storage, options).context("load data plane")?;
    dp.watch(LO, 1500, LinkType::Ether)?;
    let first = dp.window_snapshot()?;
    ensure!(first.flows.is_empty(), "the first call returns no flows");
    Ok(dp)
}

/// Both ways of reading a window give the same, exact figures: the flows the ring names (a
/// ring sized for the windows; looked up in batches where the kernel can, else one by one
/// as in the other run), and the whole table (a ring that overflows at once).
#[test]
fn windows_hold_exactly_what_each_carried() -> Result<()> {
    lab_guard!();
    let cpus = if two_cpus() { 2 } else { 1 };
    for seed in [0x3e1_0001, 0x3e1_0002] {
        for windows in [true, false] {
            let mut storage = MaybeUninit::uninit();
            let mut dp = windowed(&mut storage, windows)?;
            random_windows(&mut dp, seed, cpus)?;
            let reads = dp.window_reads();
            println!("seed {seed:#x}, ring sized for windows: {windows}: {reads:?}");
            if windows {
                ensure!(
                    dp.looks_up_in_batches() == netdoctor::kernel::features::syscall_loop(),
                    "batched lookups: {}, where the kernel runs them: {}",
                    dp.looks_up_in_batches(),
                    netdoctor::kernel::features::syscall_loop()
                );
                // The table never fills: no window needs it read whole.
                ensure!(
                    reads
                        == WindowReads {
                            named: WINDOWS as u64,
                            whole: 0
                        },
                    "seed {seed:#x}: {reads:?}"
                );
            } else {
                // A page holds 73 records: the busy windows overflow it.
                ensure!(
                    reads.whole > 0,
                    "seed {seed:#x}: no window overflowed: {reads:?}"
                );
            }
        }
    }
    Ok(())
}

/// A table that evicts, counted by walks: a window reports the entries and evictions a
/// count of the whole table gives, counted at the first window and again once `COUNT_EVERY`
/// windows created flows since; in between it keeps the last count (which the next count
/// catches up on).
#[test]
fn a_full_tables_use_is_counted_every_few_windows() -> Result<()> {
    lab_guard!();
    let mut storage = MaybeUninit::uninit();
    let mut dp = evicting(&mut storage, true)?;
    let (first, counted) = overflow(&mut dp)?;
    ensure!(first == counted, "window {first:?}, table {counted:?}");
    for window in 2..=COUNT_EVERY + 1 {
        let (got, now) = more_flows(&mut dp)?;
        if window <= COUNT_EVERY {
            ensure!(
                got == counted,
                "window {window}: {got:?}, last count {counted:?}"
            );
        } else {
            ensure!(
                got == now && got.evictions >= counted.evictions + 60,
                "window {window}: {got:?}, table {now:?}"
            );
        }
    }
    ensure!(dp.window_reads().whole == 2, "{:?}", dp.window_reads());
    Ok(())
}

/// A table that evicts, on a kernel that counts a hash map's entries (Linux 6.6 and later,
/// `bpf_map_sum_elem_count`): every window reports the use a walk of the table gives, and
/// no window walks it. (Each window's ten new flows show as entries plus evictions, at
/// least ten: the LRU evicts in small batches, and a cache slot retired after its flow's
/// entry was evicted creates the entry again.) Where the kernel has no count the agent must fall back to walks.
#[test]
fn a_full_tables_use_is_the_kernels_count_at_every_window() -> Result<()> {
    lab_guard!();
    let mut storage = MaybeUninit::uninit();
    let mut dp = evicting(&mut storage, false)?;
    let has_count = netdoctor::kernel::btf::vmlinux()
        .is_some_and(|b| netdoctor::kernel::btf::has_kfunc(&b, "bpf_map_sum_elem_count"));
    ensure!(
        dp.counts_in_kernel() == has_count,
        "kernel count used: {}, kernel has it: {has_count}",
        dp.counts_in_kernel()
    );
    if !has_count {
        eprintln!("this kernel keeps no count of a map's entries: walks count the table");
        return Ok(());
    }
    let (first, counted) = overflow(&mut dp)?;
    ensure!(first == counted, "window {first:?}, table {counted:?}");
    let mut last = first;
    for window in 2..=COUNT_EVERY + 2 {
        let (got, now) = more_flows(&mut dp)?;
        ensure!(
            got == now && got.evictions + got.entries >= last.evictions + last.entries + 10,
            "window {window}: {got:?}, table {now:?}, before {last:?}"
        );
        last = got;
    }
    ensure!(dp.window_reads().whole == 0, "{:?}", dp.window_reads());
    Ok(())
}

const TABLE: u32 = 1024;

/// A data plane counting windows over a table of [`TABLE`] flows watching loopback, its
/// first window closed.
fn evicting(storage: &mut MaybeUninit<OpenObject>, count_by_walk: bool) -> Result<Dataplane<'_>> {
    let options = Options {
        windows: true,
        count_by_walk,
        max_flows: TABLE,
        ..Options::default()
    };
    let mut dp = Dataplane::load(storage, options).context("load data plane")?;
    dp.watch(LO, 1500, LinkType::Ether)?;
    dp.window_snapshot()?;
    Ok(dp)
}

/// `flows` new flows from CPU 0, from source ports never used before.
fn send(dp: &Dataplane<'_>, flows: u32) -> Result<()> {
    static NEXT_PORT: std::sync::atomic::AtomicU16 = std::sync::atomic::AtomicU16::new(10_000);
    pin(0)?;
    for _ in 0..flows {
        let port = NEXT_PORT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        run(dp, ProgramKind::TcEgress, &datagram(port, 10).0)?;
    }
    unpin()
}

/// CPU 0's share of the table and 100 flows more (its LRU list evicts): the window's table
/// use and a walk's, which must have seen the evictions.
fn overflow(dp: &mut Dataplane<'_>) -> Result<(FlowTableUse, FlowTableUse)> {
    let share = TABLE / u32::try_from(libbpf_rs::num_possible_cpus()?)?;
    send(dp, share + 100)?;
    let first = dp.window_snapshot()?.flow_table;
    let (_, counted) = dp.flows_and_table()?;
    ensure!(first.evictions >= 100, "{first:?}");
    Ok((first, counted))
}

/// Ten more flows: the next window's table use and a walk's.
fn more_flows(dp: &mut Dataplane<'_>) -> Result<(FlowTableUse, FlowTableUse)> {
    send(dp, 10)?;
    let got = dp.window_snapshot()?.flow_table;
    let (_, now) = dp.flows_and_table()?;
    Ok((got, now))
}

//! The agent's windows (`ebpf/include/flow_window.bpf.h`): the data plane counts what each
//! flow carried in each window, and closing a window returns exactly the flows with packets
//! in it, counted over it, whichever path (cache slot on either CPU, the table when a slot is
//! busy, a slot retired or flushed into the table) their packets took; totals stay exact.

use std::collections::BTreeMap;
use std::mem::MaybeUninit;
use std::time::Duration;

use anyhow::{ensure, Context, Result};
use libbpf_rs::OpenObject;
use netdoctor::kernel::packet::{Dataplane, LinkType, Options, ProgramKind};
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

/// Longer than ND_SLOT_IDLE_J (4 jiffies) at any HZ: an idle slot may be taken over.
const IDLE: Duration = Duration::from_millis(60);

/// Seeded windows of random traffic over `FLOWS` flows, which share the 1,024 slots of a
/// CPU (so some collide: busy slots send packets to the table, idle ones are retired): each
/// window some flows send 1-20 datagrams of random sizes from CPU 0 or 1, sometimes after a
/// pause that lets slots go idle; some windows carry nothing. Every closed window must hold
/// exactly the model's flows and counts, and the totals at the end every packet.
fn random_windows(dp: &mut Dataplane<'_>, seed: u64, cpus: usize) -> Result<()> {
    const FLOWS: u16 = 1500;
    const WINDOWS: usize = 12;
    let mut rng = Rng::new(seed);
    let mut totals = Counts::new();
    for window in 1..=WINDOWS {
        let mut model = Counts::new();
        let busy = if rng.chance(15) {
            0
        } else {
            1 + rng.below(600)
        };
        for _ in 0..busy {
            if rng.chance(2) {
                std::thread::sleep(IDLE);
            }
            pin(rng.below(cpus))?;
            let sport = 20_000 + rng.below(usize::from(FLOWS)) as u16;
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

/// Loads a data plane watching the loopback; the first window begins.
fn windowed(storage: &mut MaybeUninit<OpenObject>) -> Result<Dataplane<'_>> {
    let mut dp = Dataplane::load(storage, Options::default()).context("load data plane")?;
    dp.watch(LO, 1500, LinkType::Ether)?;
    let first = dp.window_snapshot()?;
    ensure!(first.flows.is_empty(), "the first call returns no flows");
    Ok(dp)
}

#[test]
fn windows_hold_exactly_what_each_carried() -> Result<()> {
    lab_guard!();
    let cpus = if two_cpus() { 2 } else { 1 };
    for seed in [0x3e1_0001, 0x3e1_0002] {
        let mut storage = MaybeUninit::uninit();
        let mut dp = windowed(&mut storage)?;
        random_windows(&mut dp, seed, cpus)?;
    }
    Ok(())
}

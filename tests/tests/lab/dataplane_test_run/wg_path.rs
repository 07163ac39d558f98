//! The WireGuard path (`ebpf/include/wg_path.bpf.h`): sessions received, counted against an
//! independent model (`netdoctor_lab::packet::wg_model`) through the real programs, with
//! reordering, duplicates, gaps, GSO packets, two CPUs and a new index; and handshake
//! messages sent, answered or not.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd};

use anyhow::{ensure, Context, Result};
use netdoctor::kernel::packet::wg_path::{Role, WgSession};
use netdoctor::kernel::packet::{Dataplane, Options, ProgramKind};
use netdoctor_lab::bpf::maps;
use netdoctor_lab::bpf::test_run::skb_ctx;
use netdoctor_lab::lab_guard;
use netdoctor_lab::packet::builder as pkt;
use netdoctor_lab::packet::random::Rng;
use netdoctor_lab::packet::wg_model::WgModel;

use crate::dataplane_test_run::harness::{
    pin, run, run_cases, run_ctx, two_cpus, unpin, A, B, ETHER_1500,
};

/// Transport data of session `index` with `counter`, from A:51820 to B:51820.
fn data(index: u32, counter: u64) -> Vec<u8> {
    pkt::v4(
        pkt::UDP,
        &pkt::udp(51820, 51820, &pkt::wg_data(index, counter, 48)),
    )
}

fn sessions(dp: &Dataplane<'_>) -> Result<BTreeMap<u32, WgSession>> {
    Ok(dp
        .wg_sessions()?
        .into_iter()
        .map(|s| (s.index, s))
        .collect())
}

/// Compares every session the data plane holds with the model's.
fn check(dp: &Dataplane<'_>, model: &WgModel) -> Result<()> {
    let got = sessions(dp)?;
    let want = model.sessions();
    ensure!(
        got.keys().eq(want.keys()),
        "sessions {:x?}, model {:x?}",
        got.keys().collect::<Vec<_>>(),
        want.keys().collect::<Vec<_>>()
    );
    let source: SocketAddr = SocketAddr::new(A, 51820);
    for (index, w) in &want {
        let g = &got[index];
        ensure!(
            (g.low, g.high, g.received, g.duplicates) == (w.low, w.high, w.received, w.duplicates)
                && g.expected == w.high - w.low + 1
                && g.source == source
                && g.ifindex == crate::dataplane_test_run::harness::LO,
            "session {index:#x}: data plane {g:?}, model {w:?}"
        );
    }
    Ok(())
}

/// Seeded random traffic of three sessions: in order, swapped neighbours, late messages,
/// repeated ones, gaps, GSO packets of 2-8 messages (tc), through XDP and tc ingress on CPUs
/// 0 and 1 in turn. Messages sent (tc egress) are not sessions received.
fn sessions_match_the_model(dp: &Dataplane<'_>) -> Result<()> {
    let cpus = if two_cpus() { 2 } else { 1 };
    let mut rng = Rng::new(0x5eed_3100);
    let mut model = WgModel::default();
    let indexes = [0x1111_1111u32, 0xdead_beef, 7];
    let mut next = [0u64; 3];
    // Sent but not yet delivered: (session, counter), delivered late.
    let mut held: Vec<(usize, u64)> = Vec::new();
    for _ in 0..2000 {
        let s = rng.below(3);
        let cpu = rng.below(cpus);
        pin(cpu)?;
        let gso = rng.chance(10);
        let segs = if gso { 2 + rng.below(7) as u64 } else { 1 };
        let counter = next[s];
        next[s] += segs;
        let roll = rng.below(100);
        if roll < 3 {
            continue; // lost
        }
        if roll < 8 && !gso {
            held.push((s, counter)); // late
            continue;
        }
        let kind = if gso || rng.chance(50) {
            ProgramKind::TcIngress
        } else {
            ProgramKind::XdpIngress
        };
        let frame = data(indexes[s], counter);
        if gso {
            run_ctx(dp, kind, &frame, Some(&skb_ctx(segs as u32, 48)))?;
        } else {
            run(dp, kind, &frame)?;
        }
        model.receive(indexes[s], counter, segs, cpu);
        if roll < 11 && !gso {
            run(dp, kind, &frame)?; // repeated on the wire
            model.receive(indexes[s], counter, 1, cpu);
        }
        if !held.is_empty() && rng.chance(30) {
            let (hs, hc) = held.remove(rng.below(held.len()));
            run(dp, ProgramKind::TcIngress, &data(indexes[hs], hc))?;
            model.receive(indexes[hs], hc, 1, cpu);
        }
        if rng.chance(5) {
            run(dp, ProgramKind::TcEgress, &frame)?;
        }
    }
    unpin()?;
    let dups: u64 = model.sessions().values().map(|s| s.duplicates).sum();
    ensure!(
        dups > 0,
        "the sequence repeated no message within 64 counters"
    );
    check(dp, &model)
}

/// Sessions change at every rekey: a new index counts from its own first counter while the
/// old one's late messages still count where they belong.
fn a_new_index_is_a_new_session(dp: &Dataplane<'_>) -> Result<()> {
    let mut model = WgModel::default();
    pin(0)?;
    for c in (0..100).filter(|c| c % 10 != 3) {
        run(dp, ProgramKind::TcIngress, &data(0xa, c))?;
        model.receive(0xa, c, 1, 0);
    }
    for c in 0..50 {
        run(dp, ProgramKind::TcIngress, &data(0xb, c))?;
        model.receive(0xb, c, 1, 0);
        if c == 20 {
            run(dp, ProgramKind::TcIngress, &data(0xa, 93))?; // late, old session
            model.receive(0xa, 93, 1, 0);
        }
    }
    unpin()?;
    check(dp, &model)?;
    let got = sessions(dp)?;
    let (old, new) = (&got[&0xa], &got[&0xb]);
    ensure!(
        (old.expected, old.received, old.lost()) == (100, 91, 9)
            && (new.expected, new.received, new.lost()) == (50, 50, 0),
        "old {old:?}, new {new:?}"
    );
    Ok(())
}

/// The slot `index` had in the former per-CPU session cache. Sessions of one flow now share
/// its flow cache slot whatever their index, so any two indexes share a slot here; colliding
/// ones keep the case what it was.
fn cache_slot(index: u32) -> u32 {
    ((index ^ (crate::dataplane_test_run::harness::LO << 16)).wrapping_mul(0x9e37_79b9) >> 24) & 255
}

/// Two sessions in one slot (their flow's): while the first is busy the second is counted in the
/// table; once the first is idle the second takes the slot (the first's state moves to the
/// table), and the other way round. Every message is counted once, wherever it was.
fn sessions_sharing_a_cache_slot(dp: &Dataplane<'_>) -> Result<()> {
    let a = 0x100u32;
    let b = (a + 1..)
        .find(|i| cache_slot(*i) == cache_slot(a))
        .context("a colliding index")?;
    let mut model = WgModel::default();
    let mut send = |index: u32, counters: std::ops::Range<u64>| -> Result<()> {
        for c in counters {
            run(dp, ProgramKind::TcIngress, &data(index, c))?;
            model.receive(index, c, 1, 0);
        }
        Ok(())
    };
    let idle = std::time::Duration::from_millis(150); // more than 8 jiffies at any HZ >= 100
    pin(0)?;
    send(a, 0..30)?;
    send(b, 0..40)?; // a holds the slot: b in the table
    send(a, 30..50)?;
    std::thread::sleep(idle);
    send(b, 40..100)?; // a idle: retired, b takes the slot
    std::thread::sleep(idle);
    send(a, 50..60)?; // b idle: retired next to its table part, a takes the slot again
    send(b, 100..110)?;
    unpin()?;
    check(dp, &model)?;
    let got = sessions(dp)?;
    ensure!(
        got[&a].received == 60 && got[&b].received == 110 && got[&b].lost() == 0,
        "{got:?}"
    );
    Ok(())
}

/// A transport-data message of the session its flow's cache slot holds writes only what a
/// plain datagram's flow record writes: the interface's counters and the flow's slot, no map
/// of its own (issue 31: one map lookup and update per message). The twin: a datagram that
/// is not WireGuard writes the same two.
fn a_data_message_writes_only_its_flow_slot(dp: &Dataplane<'_>) -> Result<()> {
    let fd = dp.program(ProgramKind::TcIngress).as_fd().as_raw_fd();
    let all = maps::program_maps(fd)?;
    let plain = pkt::v4(pkt::UDP, &pkt::udp(40000, 9999, &[0xcd; 48]));
    pin(0)?;
    let result = (|| -> Result<()> {
        for (what, first, second) in [
            ("wireguard data", data(0xa, 0), data(0xa, 1)),
            ("plain udp", plain.clone(), plain.clone()),
        ] {
            run(dp, ProgramKind::TcIngress, &first)?; // the flow (and session) take the slot
            let before = maps::snapshot(&all)?;
            run(dp, ProgramKind::TcIngress, &second)?;
            let changed = maps::changed(&before, &maps::snapshot(&all)?);
            ensure!(
                changed == ["flow_cache", "iface_stats"],
                "{what}: a cached flow's packet changed maps {changed:?}, expected only \
                 flow_cache and iface_stats"
            );
        }
        Ok(())
    })();
    unpin()?;
    result?;
    let got = sessions(dp)?;
    ensure!(
        got.get(&0xa).map(|s| (s.received, s.expected)) == Some((2, 2)),
        "sessions {got:?}"
    );
    Ok(())
}

/// An initiation leaving and the response carrying its index, a response leaving and the
/// first data carrying its index: two answered handshakes; what is not answered stays so.
fn handshakes_and_their_answers(dp: &Dataplane<'_>) -> Result<()> {
    let udp = |wg: Vec<u8>| pkt::v4(pkt::UDP, &pkt::udp(51820, 51820, &wg));
    run(dp, ProgramKind::TcEgress, &udp(pkt::wg_initiation(0x1001)))?;
    run(dp, ProgramKind::TcEgress, &udp(pkt::wg_initiation(0x5005)))?;
    run(
        dp,
        ProgramKind::TcEgress,
        &udp(pkt::wg_response(0x3003, 0x4004)),
    )?;
    run(
        dp,
        ProgramKind::TcEgress,
        &udp(pkt::wg_response(0x6006, 0x7007)),
    )?;
    std::thread::sleep(std::time::Duration::from_millis(20));
    run(
        dp,
        ProgramKind::TcIngress,
        &udp(pkt::wg_response(0x2002, 0x1001)),
    )?;
    // A response to an index this host did not initiate with, and one to its own response.
    run(
        dp,
        ProgramKind::XdpIngress,
        &udp(pkt::wg_response(0x2003, 0x9999)),
    )?;
    run(
        dp,
        ProgramKind::TcIngress,
        &udp(pkt::wg_response(0x2004, 0x6006)),
    )?;
    run(dp, ProgramKind::XdpIngress, &data(0x3003, 0))?;
    // Data for the initiator's session changes nothing of its handshake.
    run(dp, ProgramKind::TcIngress, &data(0x1001, 0))?;
    let hs = dp.wg_handshakes()?;
    let peer = SocketAddr::new(B, 51820);
    let by: BTreeMap<u32, _> = hs.iter().map(|h| (h.index, h)).collect();
    ensure!(
        by.keys().copied().collect::<Vec<_>>() == [0x1001, 0x3003, 0x5005, 0x6006],
        "handshakes {hs:?}"
    );
    for (index, role, answered) in [
        (0x1001, Role::Initiator, true),
        (0x5005, Role::Initiator, false),
        (0x3003, Role::Responder, true),
        (0x6006, Role::Responder, false),
    ] {
        let h = by.get(&index).context("listed")?;
        let rtt = h.rtt_ns();
        ensure!(
            h.role == role && h.peer == peer && rtt.is_some() == answered,
            "{index:#x}: {h:?}"
        );
        if let Some(rtt) = rtt {
            ensure!(
                (20_000_000..2_000_000_000).contains(&rtt),
                "{index:#x}: {rtt} ns between a message and its answer 20 ms later"
            );
        }
    }
    Ok(())
}

#[test]
fn wireguard_sessions_and_handshakes() -> Result<()> {
    lab_guard!();
    run_cases(
        Options::default(),
        &[
            (
                "sessions_match_the_model",
                ETHER_1500,
                sessions_match_the_model,
            ),
            (
                "a_new_index_is_a_new_session",
                ETHER_1500,
                a_new_index_is_a_new_session,
            ),
            (
                "sessions_sharing_a_cache_slot",
                ETHER_1500,
                sessions_sharing_a_cache_slot,
            ),
            (
                "a_data_message_writes_only_its_flow_slot",
                ETHER_1500,
                a_data_message_writes_only_its_flow_slot,
            ),
            (
                "handshakes_and_their_answers",
                ETHER_1500,
                handshakes_and_their_answers,
            ),
        ],
    )
}

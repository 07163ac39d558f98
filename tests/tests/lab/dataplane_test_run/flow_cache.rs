//! The per-CPU flow cache: one flow's packets on two CPUs, colliding slots, shared TCP
//! sequence state, and 32-bit slot counts flushed before they wrap.

use anyhow::{ensure, Context, Result};
use netdoctor::kernel::packet::{Dataplane, Options, ProgramKind};
use netdoctor::kernel::views::Direction;
use netdoctor_lab::lab_guard;
use netdoctor_lab::packet::builder::{self as pkt, Tcp};

use crate::dataplane_test_run::expect::Expect;
use crate::dataplane_test_run::harness::{
    pin, run_cases, tcp_seg, test_run_repeat, two_cpus, unpin, Case, A, B, ETHER_1500, LO,
};

/// `flow_hash()` of packet.bpf.c for an IPv4 TCP/UDP flow on the loopback (10.0.0.1 ->
/// 10.0.0.2, the packet builder's addresses): the key's five native-endian 64-bit words and
/// its ports' 32-bit word, each times its constant, summed, then mixed.
fn flow_hash(dir: Direction, proto: u8, sport: u16, dport: u16) -> u64 {
    let mut key = [0u8; 44];
    key[0..4].copy_from_slice(&LO.to_ne_bytes());
    key[4] = dir as u8;
    key[5] = proto;
    key[6] = 4;
    key[8..12].copy_from_slice(&[10, 0, 0, 1]);
    key[24..28].copy_from_slice(&[10, 0, 0, 2]);
    key[40..42].copy_from_slice(&sport.to_ne_bytes());
    key[42..44].copy_from_slice(&dport.to_ne_bytes());
    let word = |i: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&key[8 * i..8 * i + 8]);
        u64::from_ne_bytes(w)
    };
    let ports = u64::from(u32::from_ne_bytes([key[40], key[41], key[42], key[43]]));
    let constants: [u64; 5] = [
        0x9e37_79b9_7f4a_7c15,
        0xff51_afd7_ed55_8ccd,
        0xc4ce_b9fe_1a85_ec53,
        0xd6e8_feb8_6659_fd93,
        0xa076_1d64_78bd_642f,
    ];
    let mut h = (0..5).fold(ports.wrapping_mul(0xe703_7ed1_a0b4_28db), |h, i| {
        h.wrapping_add(word(i).wrapping_mul(constants[i]))
    });
    h ^= h >> 32;
    h = h.wrapping_mul(0x8ebc_6af0_9c88_c6e3);
    h ^= h >> 29;
    h
}

/// Mirrors ND_FLOW_CACHE_SLOTS and ND_SEQ_SLOTS in ebpf/include/packet.h.
const CACHE_SLOTS: u64 = 1024;
const SEQ_SLOTS: u64 = 4096;

/// Two source ports (from `from`) whose flows `same(hash_a, hash_b)` says collide.
fn colliding_ports(
    dir: Direction,
    proto: u8,
    from: u16,
    same: impl Fn(u64, u64) -> bool,
) -> (u16, u16) {
    let first = flow_hash(dir, proto, from, 80);
    let other = (from + 1..u16::MAX)
        .find(|&p| same(first, flow_hash(dir, proto, p, 80)))
        .expect("a colliding port");
    (from, other)
}

/// Longer than ND_SLOT_IDLE_J / ND_SEQ_IDLE_J (4 jiffies) at any HZ (100 to 1000).
const IDLE: std::time::Duration = std::time::Duration::from_millis(100);

/// One flow's packets on two CPUs: the counts add up, and a retransmission is recognised on
/// a CPU that never saw the data beyond it (the sequence state is shared).
fn flow_split_across_cpus(dp: &Dataplane<'_>) -> Result<()> {
    let mut e = Expect::new(dp);
    e.on(ProgramKind::TcIngress);
    let key = (pkt::TCP, A, 45000, B, 80);
    let syn = Tcp::new(key.2, 80, 999, pkt::SYN).opts(&[2, 4, 5, 0xb4]);
    pin(0)?;
    e.ip(&pkt::v4(pkt::TCP, &syn.build(&[])), 44, key)?;
    e.ip(&tcp_seg(key.2, 1000, pkt::ACK, 100), 140, key)?;
    e.ip(&tcp_seg(key.2, 1100, pkt::ACK, 100), 140, key)?;
    pin(1)?;
    e.ip(&tcp_seg(key.2, 1200, pkt::ACK | pkt::PSH, 300), 340, key)?;
    e.ip(&tcp_seg(key.2, 1500, pkt::ACK, 100), 140, key)?;
    let f = e.flow(key);
    f.tcp_flags = pkt::SYN | pkt::ACK | pkt::PSH;
    f.syn_mss = Some(1460);
    e.check()?;
    pin(0)?;
    // CPU 0 saw data up to 1200 only; 1300 was sent (on CPU 1) before.
    e.ip(&tcp_seg(key.2, 1300, pkt::ACK, 100), 140, key)?;
    pin(1)?;
    e.ip(&tcp_seg(key.2, 1000, pkt::ACK, 100), 140, key)?;
    e.ip(&tcp_seg(key.2, 1600, pkt::FIN | pkt::ACK, 0), 40, key)?;
    let f = e.flow(key);
    f.tcp_flags |= pkt::FIN;
    f.retransmits = 2;
    e.check()?;
    unpin()
}

/// (CPU, slot, source port) of every flow the cache holds, in order.
fn cached_ports(dp: &Dataplane<'_>) -> Vec<(u32, u64, u16)> {
    let mut v: Vec<(u32, u64, u16)> = dp
        .cached_flows()
        .into_iter()
        .map(|(cpu, slot, f)| (cpu, u64::from(slot), f.src_port))
        .collect();
    v.sort_unstable();
    v
}

/// A slot counts bytes in 32 bits; a flow that carries 4 GiB through one CPU's slot has it
/// flushed to the table just before the count would wrap, and totals stay exact: 1.45
/// million runs of a 3 kB datagram (4.3 GB) through one program on one CPU.
fn slot_bytes_flushed_before_they_wrap(dp: &Dataplane<'_>) -> Result<()> {
    let frame = pkt::v4(pkt::UDP, &pkt::udp(45000, 80, &pkt::data(2958)));
    let len = frame.len() as u64;
    let runs = (1u64 << 32) / len + 1_000;
    pin(0)?;
    let ran = test_run_repeat(
        dp,
        ProgramKind::TcEgress,
        &frame,
        None,
        u32::try_from(runs)?,
    );
    unpin()?;
    ran.context("repeated test run")?;
    let flows = dp.flows()?;
    let f = flows
        .iter()
        .find(|f| f.src_port == 45000)
        .context("the flow")?;
    ensure!(
        (f.packets, f.segments, f.bytes) == (runs, runs, runs * len),
        "{runs} runs of {len} bytes: counted {} packets, {} segments, {} bytes",
        f.packets,
        f.segments,
        f.bytes
    );
    // The slot holds only what came after the flush.
    let cached = dp.cached_flows();
    let (_, _, slot) = cached
        .iter()
        .find(|(_, _, f)| f.src_port == 45000)
        .context("the flow's slot")?;
    ensure!(
        slot.packets < runs && slot.bytes == slot.packets * len,
        "no flush: the slot holds {} packets, {} bytes of {runs} packets",
        slot.packets,
        slot.bytes
    );
    Ok(())
}

/// Two flows in one slot of one CPU: while the first is busy the second is counted in the
/// table; once the first has been idle the second takes the slot, and the first's counts
/// move to the table. Totals stay exact throughout.
fn colliding_flows_share_a_slot(dp: &Dataplane<'_>) -> Result<()> {
    let mut e = Expect::new(dp);
    e.on(ProgramKind::TcEgress);
    let (a, b) = colliding_ports(Direction::Egress, pkt::UDP, 46000, |x, y| {
        x % CACHE_SLOTS == y % CACHE_SLOTS
    });
    let udp = |sport: u16, n: usize| pkt::v4(pkt::UDP, &pkt::udp(sport, 80, &pkt::data(n)));
    let ka = (pkt::UDP, A, a, B, 80);
    let kb = (pkt::UDP, A, b, B, 80);
    let slot = flow_hash(Direction::Egress, pkt::UDP, a, 80) % CACHE_SLOTS;
    pin(0)?;
    for n in [100, 200] {
        e.ip(&udp(a, n), 28 + n as u32, ka)?;
    }
    e.ip(&udp(b, 300), 328, kb)?; // slot busy with a: counted in the table
    e.ip(&udp(a, 50), 78, ka)?;
    e.check()?;
    // The mirror of flow_hash() is right and the two flows do collide: a holds the slot.
    ensure!(
        cached_ports(dp) == [(0, slot, a)],
        "a in slot {slot} of CPU 0, b not cached"
    );
    std::thread::sleep(IDLE);
    e.ip(&udp(b, 400), 428, kb)?; // a idle: retired into the table, b takes the slot
    e.ip(&udp(b, 10), 38, kb)?;
    e.check()?;
    ensure!(cached_ports(dp) == [(0, slot, b)], "b took slot {slot}");
    std::thread::sleep(IDLE);
    e.ip(&udp(a, 60), 88, ka)?; // and back
    e.check()?;
    unpin()
}

/// Two TCP flows whose sequence state would share an entry: the second keeps its state in
/// the table while the first is busy, takes the entry over once the first is idle (writing
/// the first's state back), and no retransmission is missed or invented on either.
fn colliding_flows_share_sequence_state(dp: &Dataplane<'_>) -> Result<()> {
    let mut e = Expect::new(dp);
    e.on(ProgramKind::TcIngress);
    let (c, d) = colliding_ports(Direction::Ingress, pkt::TCP, 47000, |x, y| {
        (x >> 16) % SEQ_SLOTS == (y >> 16) % SEQ_SLOTS && (x >> 32) | 1 != (y >> 32) | 1
    });
    let kc = (pkt::TCP, A, c, B, 80);
    let kd = (pkt::TCP, A, d, B, 80);
    for (sport, seq, key) in [
        (c, 1000, kc), // c owns the entry
        (c, 1100, kc),
        (d, 5000, kd), // busy: d's state goes to its table entry
        (d, 5100, kd),
        (d, 5000, kd), // retransmission, seen through the table state
        (c, 1000, kc), // retransmission, seen through the entry
    ] {
        e.ip(&tcp_seg(sport, seq, pkt::ACK, 100), 140, key)?;
    }
    e.flow(kc).retransmits = 1;
    e.flow(kd).retransmits = 1;
    std::thread::sleep(IDLE);
    for (sport, seq, key) in [
        (d, 5200, kd), // c idle: d takes the entry, c's state is written back
        (c, 1100, kc), // retransmission: c's state is in its table entry now
        (c, 1200, kc),
        (d, 5100, kd), // retransmission, through the entry
        (d, 5300, kd),
    ] {
        e.ip(&tcp_seg(sport, seq, pkt::ACK, 100), 140, key)?;
    }
    e.flow(kc).retransmits = 2;
    e.flow(kd).retransmits = 2;
    for key in [kc, kd] {
        e.flow(key).tcp_flags = pkt::ACK;
    }
    e.check()
}

/// The flow cache: one flow on two CPUs, two flows in one slot, shared sequence state, and
/// 32-bit slot counts flushed before they wrap.
#[test]
fn flow_cache_cpus_and_collisions() -> Result<()> {
    lab_guard!();
    let mut cases: Vec<Case> = vec![
        (
            "colliding_flows_share_a_slot",
            ETHER_1500,
            colliding_flows_share_a_slot,
        ),
        (
            "colliding_flows_share_sequence_state",
            ETHER_1500,
            colliding_flows_share_sequence_state,
        ),
        (
            "slot_bytes_flushed_before_they_wrap",
            ETHER_1500,
            slot_bytes_flushed_before_they_wrap,
        ),
    ];
    if two_cpus() {
        cases.push(("flow_split_across_cpus", ETHER_1500, flow_split_across_cpus));
    } else {
        println!("SKIP: flow_split_across_cpus needs CPUs 0 and 1");
    }
    run_cases(Options::default(), &cases)
}

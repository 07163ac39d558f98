//! Reading the per-CPU flow cache (`flow_cache` in `ebpf/include/flow_cache.bpf.h`) and adding
//! it to the `flows` table, so that every reader sees each flow's whole total.
//!
//! A flow's figures are split between its table entry and the cache slots that hold it
//! (at most one per CPU): a slot counts what the flow carried on that CPU since the CPU
//! took the slot, and adds it to the table entry only when it is retired (given to another
//! flow, or flushed before its 32-bit byte count would wrap). Both are cumulative, so the
//! total is their sum; first and last seen are the minimum and maximum, the largest segment
//! the maximum, TCP flags the union. The SYN's MSS is only ever in the table; a flow's
//! encapsulation is the same wherever it was recorded.
//!
//! The slots are mapped read-only (no system call per slot). A retirement moves counts from
//! a slot to the table while the agent reads, so the reader copies every slot, reads the
//! table, copies every slot again, and uses the second copy: a slot's counts reach the table
//! only after the slot shows a new generation, so a generation seen in the second copy was
//! not in the table when it was read (never counted twice). If any generation moved between
//! the two copies, counts may have left a slot after the table was read and are missing
//! from this read; the whole read is then repeated (a retirement is rare: it needs a new
//! flow in the slot of a flow idle for a few ticks). After `ATTEMPTS` the last read is
//! used without the slots that moved: it can miss such counts, and the next read has them.
//!
//! The table is streamed, not held: each entry is converted as its batch arrives, except
//! the few whose flow a slot of the first copy holds, which wait for the second copy.

use std::collections::{HashMap, HashSet};

use libbpf_rs::MapCore;

use super::mapped::Mapped;
use crate::kernel::error::{Error, Result};
use crate::kernel::views::{encode, nd_flow_key, nd_flow_slot, nd_flow_stats};

/// Mirrors `ND_FLOW_CACHE_SLOTS` in ebpf/include/packet.h: slots per CPU (checked by the
/// `limits` test).
pub const SLOTS_PER_CPU: u32 = 1024;
/// Bytes of one slot (`struct nd_flow_slot`).
const SLOT_BYTES: usize = 192;
/// Where the slot's sequence lock lives (`gen_begin`, `gen_end`).
const GEN_BEGIN: usize = std::mem::offset_of!(nd_flow_slot, gen_begin);
const GEN_END: usize = std::mem::offset_of!(nd_flow_slot, gen_end);
/// Reads of table and slots before accepting one that raced with a retirement.
const ATTEMPTS: usize = 4;
/// Copies of one slot before giving up on an untorn one (a rewrite takes well under a
/// microsecond, so a second copy normally suffices).
const SLOT_COPIES: usize = 1000;

const _: () = assert!(std::mem::size_of::<nd_flow_slot>() == SLOT_BYTES);

/// The `flow_cache` array mapped read-only into this process.
#[derive(Debug)]
pub(crate) struct SlotView {
    slots: Mapped,
}

/// A copy of one slot, if it was not torn by a concurrent retirement.
pub(crate) type SlotCopy = Option<nd_flow_slot>;

impl SlotView {
    /// Maps `map` (the loaded `flow_cache`, BPF_F_MMAPABLE) read-only.
    pub(crate) fn map(map: &impl MapCore) -> Result<SlotView> {
        let err = |e: std::io::Error| Error::Map {
            map: "flow_cache",
            source: libbpf_rs::Error::from(e),
        };
        if map.value_size() as usize != SLOT_BYTES {
            return Err(err(std::io::Error::other(format!(
                "slot size {} != {SLOT_BYTES}",
                map.value_size()
            ))));
        }
        Ok(SlotView {
            slots: Mapped::map(map, false).map_err(err)?,
        })
    }

    /// Slot `i`, read under its sequence lock ([`Mapped::copy_locked`]).
    fn copy(&self, i: usize) -> SlotCopy {
        let (mut slot, gen) =
            self.slots
                .copy_locked::<nd_flow_slot>(i, GEN_BEGIN, GEN_END, SLOT_COPIES)?;
        slot.gen_begin = gen;
        slot.gen_end = gen;
        Some(slot)
    }

    /// Every slot, each copied under its lock (`None`: torn on every copy).
    pub(crate) fn copy_all(&self) -> Vec<SlotCopy> {
        (0..self.slots.entries()).map(|i| self.copy(i)).collect()
    }

    /// [`SlotView::copy_all`]; with `window`, a slot holding another of the agent's windows
    /// reads as unused (`ebpf/include/flow_window.bpf.h`: a slot holds one window's counts).
    fn copy_all_of(&self, window: Option<u32>) -> Vec<SlotCopy> {
        let mut all = self.copy_all();
        if let Some(n) = window {
            for s in all.iter_mut().flatten().filter(|s| s.window != n) {
                s.used = 0;
            }
        }
        all
    }

    /// The flows of the slots holding counts of the agent's window `n`.
    pub(crate) fn keys_in_window(&self, n: u32) -> Vec<nd_flow_key> {
        self.copy_all_of(Some(n))
            .into_iter()
            .flatten()
            .filter(|s| s.used != 0)
            .map(|s| s.key)
            .collect()
    }

    /// Every slot in use, with its CPU and its index within that CPU's slots.
    pub(crate) fn used(&self) -> Vec<(u32, u32, nd_flow_key, nd_flow_stats)> {
        (0..self.slots.entries())
            .filter_map(|i| {
                let s = self.copy(i).filter(|s| s.used != 0)?;
                let mut v = nd_flow_stats::default();
                add_slot(&mut v, &s);
                let i = u32::try_from(i).ok()?;
                Some((i / SLOTS_PER_CPU, i % SLOTS_PER_CPU, s.key, v))
            })
            .collect()
    }
}

/// Whether no slot was retired (or torn) between two copies.
pub(crate) fn settled(before: &[SlotCopy], after: &[SlotCopy]) -> bool {
    before.iter().zip(after).all(|(b, a)| match (b, a) {
        (Some(b), Some(a)) => b.gen_begin == a.gen_begin,
        _ => false,
    })
}

/// The slots of the second copy that held the same generation in the first: a slot that
/// moved may have handed its counts to the table during the read, so it is left out of
/// this read (the next has its counts) rather than counted twice.
fn unmoved<'a>(
    before: &'a [SlotCopy],
    after: &'a [SlotCopy],
) -> impl Iterator<Item = &'a nd_flow_slot> {
    before.iter().zip(after).filter_map(|(b, a)| match (b, a) {
        (Some(b), Some(a)) if b.gen_begin == a.gen_begin => Some(a),
        _ => None,
    })
}

/// The keys the used slots of one copy hold: the few table entries that need a slot added.
/// A bit per hash of the key answers "no" for almost every entry without a hash-set
/// lookup (a million entries against at most `SLOTS_PER_CPU` slots per CPU).
struct CachedKeys<'a> {
    keys: HashSet<&'a [u8]>,
    bits: Vec<u64>,
}

/// Bits of the `CachedKeys` filter: 64 per slot of a 1,024-slot CPU, ~3 % false hits.
const FILTER_BITS: usize = 1 << 16;

impl<'a> CachedKeys<'a> {
    fn new(slots: impl Iterator<Item = &'a nd_flow_slot>) -> Self {
        let mut out = CachedKeys {
            keys: HashSet::new(),
            bits: vec![0; FILTER_BITS / 64],
        };
        for s in slots.filter(|s| s.used != 0) {
            let bytes = encode(&s.key);
            let bit = quick_hash(bytes) % FILTER_BITS;
            out.bits[bit / 64] |= 1 << (bit % 64);
            out.keys.insert(bytes);
        }
        out
    }

    fn contains(&self, key: &nd_flow_key) -> bool {
        let bytes = encode(key);
        let bit = quick_hash(bytes) % FILTER_BITS;
        self.bits[bit / 64] & (1 << (bit % 64)) != 0 && self.keys.contains(bytes)
    }
}

/// A cheap hash of a key's bytes (a multiply-rotate over its words), for `CachedKeys`.
fn quick_hash(bytes: &[u8]) -> usize {
    let mut h: u64 = 0;
    for w in bytes.chunks(8) {
        let mut word = [0u8; 8];
        word[..w.len()].copy_from_slice(w);
        h = (h.rotate_left(5) ^ u64::from_ne_bytes(word)).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
    (h >> 32) as usize
}

/// Every flow, converted by `convert` as the table streams by: the table's entries (each
/// handed to the callback `read_table` is given) plus the cached slots (with `window`, only
/// those holding that window of the agent's). Only the entries whose flow holds a slot are
/// kept as they are until the slots' second copy is taken; every other entry is converted
/// at once, so the table is never held twice, and kept if `convert` gives it. `hint`: the
/// entries expected (the output's capacity). Returns the flows and the table's entries.
pub(crate) fn merged_flows<T>(
    view: &SlotView,
    hint: usize,
    window: Option<u32>,
    read_table: impl Fn(&mut dyn FnMut(&nd_flow_key, &nd_flow_stats)) -> Result<()>,
    convert: impl Fn(&nd_flow_key, &nd_flow_stats) -> Option<T>,
) -> Result<(Vec<T>, u64)> {
    let mut attempt = 1;
    loop {
        let before = view.copy_all_of(window);
        let cached = CachedKeys::new(before.iter().flatten());
        let mut out = Vec::with_capacity(hint + cached.keys.len());
        let mut held = Vec::new();
        let mut entries = 0u64;
        read_table(&mut |k, v| {
            entries += 1;
            if cached.contains(k) {
                held.push((*k, *v));
            } else {
                out.extend(convert(k, v));
            }
        })?;
        let after = view.copy_all_of(window);
        let quiet = settled(&before, &after);
        if attempt == ATTEMPTS || quiet {
            if attempt > 1 {
                tracing::debug!(attempt, quiet, "flow cache read raced with retirements");
            }
            // A slot that kept its generation holds the same flow in both copies.
            let merged = merge(held, unmoved(&before, &after));
            out.extend(merged.iter().filter_map(|(k, v)| convert(k, v)));
            return Ok((out, entries));
        }
        attempt += 1;
    }
}

/// Adds the used slots to the table's entries, in place (flows only in slots become
/// records). The slots are few (at most `SLOTS_PER_CPU` per CPU), so they are indexed by
/// their key's bytes and the entries walked once.
pub(crate) fn merge<'a>(
    mut table: Vec<(nd_flow_key, nd_flow_stats)>,
    slots: impl Iterator<Item = &'a nd_flow_slot>,
) -> Vec<(nd_flow_key, nd_flow_stats)> {
    // A flow has at most one slot per CPU.
    let mut cached: HashMap<&[u8], Vec<&nd_flow_slot>> = HashMap::new();
    for s in slots.filter(|s| s.used != 0) {
        cached.entry(encode(&s.key)).or_default().push(s);
    }
    if cached.is_empty() {
        return table;
    }
    for (k, v) in &mut table {
        for s in cached.remove(encode(k)).unwrap_or_default() {
            add_slot(v, s);
        }
    }
    for held in cached.into_values() {
        let mut v = nd_flow_stats::default();
        for s in &held {
            add_slot(&mut v, s);
        }
        if let Some(first) = held.first() {
            table.push((first.key, v));
        }
    }
    table
}

/// `v` (a table entry, or zero for a flow the table lacks) plus one slot.
fn add_slot(v: &mut nd_flow_stats, s: &nd_flow_slot) {
    v.packets += u64::from(s.packets);
    v.segs += u64::from(s.segs);
    v.bytes += u64::from(s.bytes);
    v.retrans_segs = v.retrans_segs.wrapping_add(s.retrans_segs);
    for (a, b) in v.wg_msgs.iter_mut().zip(s.wg_msgs) {
        *a = a.wrapping_add(b);
    }
    v.first_ns = if v.first_ns == 0 {
        s.first_ns
    } else {
        v.first_ns.min(s.first_ns)
    };
    v.last_ns = v.last_ns.max(s.last_ns);
    v.max_seg = v.max_seg.max(s.max_seg);
    v.tcp_flags |= s.tcp_flags;
    if v.encap == 0 {
        v.encap = s.encap;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(sport: u16) -> nd_flow_key {
        nd_flow_key {
            ifindex: 3,
            family: 4,
            proto: 6,
            sport,
            dport: 443,
            ..Default::default()
        }
    }

    fn slot(k: nd_flow_key, packets: u32, first: u64, last: u64) -> nd_flow_slot {
        nd_flow_slot {
            key: k,
            packets,
            segs: packets * 2,
            bytes: packets * 100,
            first_ns: first,
            last_ns: last,
            retrans_segs: 1,
            wg_msgs: [0, 0, 0, 1],
            max_seg: 900,
            tcp_flags: 0x10,
            encap: 1,
            used: 1,
            ..Default::default()
        }
    }

    #[test]
    fn slots_add_to_table_entries_and_stand_alone() {
        let table = vec![(
            key(1),
            nd_flow_stats {
                packets: 10,
                segs: 10,
                bytes: 1000,
                first_ns: 500,
                last_ns: 800,
                retrans_segs: 2,
                wg_msgs: [1, 0, 0, 5],
                syn_mss: 1460,
                max_seg: 1500,
                tcp_flags: 0x02,
                ..Default::default()
            },
        )];
        let slots = [
            slot(key(1), 3, 600, 900),
            slot(key(1), 4, 400, 700),
            slot(key(2), 7, 1000, 1100),
            // The same flow in another CPU's slot, and in no table entry.
            slot(key(2), 2, 900, 1200),
            nd_flow_slot {
                used: 0,
                ..slot(key(3), 9, 1, 2)
            },
        ];
        let mut out = merge(table, slots.iter());
        out.sort_by_key(|(k, _)| k.sport);
        assert_eq!(out.len(), 2, "unused slots are ignored");
        let (_, a) = out[0];
        assert_eq!((a.packets, a.segs, a.bytes), (17, 24, 1700));
        assert_eq!((a.first_ns, a.last_ns), (400, 900));
        assert_eq!((a.retrans_segs, a.wg_msgs), (4, [1, 0, 0, 7]));
        assert_eq!(
            (a.syn_mss, a.max_seg, a.tcp_flags, a.encap),
            (1460, 1500, 0x12, 1)
        );
        let (_, b) = out[1];
        assert_eq!(
            (b.packets, b.bytes, b.first_ns, b.last_ns),
            (9, 900, 900, 1200)
        );
        assert_eq!((b.syn_mss, b.max_seg, b.tcp_flags), (0, 900, 0x10));
    }

    #[test]
    fn only_slots_that_kept_their_generation_are_added() {
        let kept = slot(key(1), 1, 1, 1);
        let old = slot(key(2), 1, 1, 1);
        let moved = nd_flow_slot {
            gen_begin: 1,
            gen_end: 1,
            ..slot(key(3), 5, 2, 2)
        };
        let before = [Some(kept), Some(old), None];
        let after = [Some(kept), Some(moved), Some(kept)];
        let out: Vec<u16> = unmoved(&before, &after).map(|s| s.key.sport).collect();
        assert_eq!(
            out,
            [1],
            "a moved, torn or new slot waits for the next read"
        );
    }

    #[test]
    fn cached_keys_find_exactly_the_slots_flows() {
        let slots: Vec<nd_flow_slot> = (0..2048).map(|p| slot(key(p), 1, 1, 1)).collect();
        let unused = nd_flow_slot {
            used: 0,
            ..slot(key(60_000), 1, 1, 1)
        };
        let cached = CachedKeys::new(slots.iter().chain([&unused]));
        assert!((0..2048).all(|p| cached.contains(&key(p))));
        assert!((2048..60_001).all(|p| !cached.contains(&key(p))));
        let other_iface = nd_flow_key {
            ifindex: 4,
            ..key(1)
        };
        assert!(!cached.contains(&other_iface));
    }

    #[test]
    fn a_moved_generation_is_not_settled() {
        let a = slot(key(1), 1, 1, 1);
        let b = nd_flow_slot {
            gen_begin: 1,
            gen_end: 1,
            ..a
        };
        assert!(settled(&[Some(a)], &[Some(a)]));
        assert!(!settled(&[Some(a)], &[Some(b)]));
        assert!(!settled(&[Some(a)], &[None]));
    }
}

//! Reading the data plane's maps: interface counters, flows (the table plus the per-CPU
//! flow cache), too-big reports and the programs' run statistics, and [`Snapshot`], what
//! was counted at one moment, whose difference to an earlier one is a window.

use std::collections::HashMap;
use std::sync::Arc;

use libbpf_rs::skel::Skel;
use libbpf_rs::{MapCore, MapFlags};

use super::counters::IfaceCounters;
use super::dataplane::Dataplane;
use super::flow_cache;
use super::flow_table::{self, FlowTableUse};
use super::flows::Flow;
use super::too_big::TooBig;
use super::wg_path::{self, WgHandshake, WgSession};
use crate::kernel::error::{Error, Result};
use crate::kernel::prog_stats::{self, ProgramRuns};
use crate::kernel::views::{
    decode, nd_flow_key, nd_flow_stats, nd_iface_dir, nd_ptb_key, nd_ptb_stats, Clocks,
};

impl Dataplane<'_> {
    /// Counters of a watched interface, summed over CPUs.
    pub fn counters(&self, index: u32) -> Result<Option<IfaceCounters>> {
        let slot = self.slots().get(&index).copied();
        let Some(slot) = slot else {
            return Ok(None);
        };
        let map = &self.skel.maps.iface_stats;
        let mut sum = IfaceCounters::default();
        for (key, dir) in self.counter_keys(slot) {
            let value = map.lookup(&key, MapFlags::ANY).map_err(|e| Error::Map {
                map: "iface_stats",
                source: e,
            })?;
            if let Some(v) = value.and_then(|bytes| decode::<nd_iface_dir>(&bytes)) {
                sum.dir_mut(dir).add(&v.s);
            }
        }
        Ok(Some(sum))
    }

    /// Every flow: the table's entries plus what the per-CPU flow cache holds of them
    /// (see [`flow_cache`]), so each flow's figures are its whole total.
    pub fn flows(&self) -> Result<Vec<Flow>> {
        Ok(self.flows_and_table()?.0)
    }

    /// Every flow (as [`Dataplane::flows`]) and the table's use, evictions included, from
    /// the same reading of the table.
    pub fn flows_and_table(&self) -> Result<(Vec<Flow>, FlowTableUse)> {
        self.read_flows().map(|(flows, table, _)| (flows, table))
    }

    /// [`Dataplane::flows_and_table`] and the clocks its timestamps were converted with,
    /// read before the table.
    fn read_flows(&self) -> Result<(Vec<Flow>, FlowTableUse, Clocks)> {
        self.read_flows_in(None)
    }

    /// Every flow with its totals, or with `window`, the flows with packets in that window of
    /// the agent's with what they carried in it (`window`'s notes); the table's use, and the
    /// clocks read before the table.
    pub(super) fn read_flows_in(
        &self,
        window: Option<u32>,
    ) -> Result<(Vec<Flow>, FlowTableUse, Clocks)> {
        // The insert count first: see flow_table's notes.
        let inserts = flow_table::inserts(&self.skel.maps.flow_inserts)?;
        let capacity = self.flow_table_capacity() as u64;
        // The table holds at most what was ever inserted, and at most its capacity; a
        // window's flows are those active in it, and grow as they come.
        let hint = match window {
            None => usize::try_from(inserts.min(capacity)).unwrap_or(0),
            Some(_) => 0,
        };
        let clocks = Clocks::now();
        let (flows, entries) = flow_cache::merged_flows(
            &self.flow_cache,
            hint,
            window,
            |entry| {
                let mut each = |k: &nd_flow_key, v: &nd_flow_stats| match window {
                    None => entry(k, v),
                    Some(n) => entry(k, &super::flows::value_in_window(v, n)),
                };
                for_each_entry::<nd_flow_key, nd_flow_stats>(
                    &self.skel.maps.flows,
                    "flows",
                    &mut each,
                )
            },
            |k, v| (window.is_none() || v.packets > 0).then(|| Flow::from_raw_at(k, v, &clocks)),
        )?;
        let table = flow_table::table_use(&self.evictions_seen, capacity, inserts, entries);
        Ok((flows, table, clocks))
    }

    /// The flows the per-CPU flow cache holds right now, as (CPU, slot within that CPU's
    /// slots, the flow as its slot alone counts it): how the cache is used, for tests and
    /// for looking into the cache itself. [`Dataplane::flows`] gives the totals.
    pub fn cached_flows(&self) -> Vec<(u32, u32, Flow)> {
        self.flow_cache
            .used()
            .iter()
            .map(|(cpu, slot, k, v)| (*cpu, *slot, Flow::from_raw(k, v)))
            .collect()
    }

    /// Counters of every watched interface and every flow, now.
    pub fn snapshot(&self) -> Result<Snapshot> {
        let flows = self.read_flows()?;
        self.snapshot_with(flows, false)
    }

    /// A snapshot of the counters now, with `flows` read just before (`window`: they are
    /// a window's already).
    pub(super) fn snapshot_with(
        &self,
        (flows, flow_table, clocks): (Vec<Flow>, FlowTableUse, Clocks),
        window: bool,
    ) -> Result<Snapshot> {
        let indexes: Vec<u32> = self.slots().keys().copied().collect();
        let mut counters = HashMap::with_capacity(indexes.len());
        for index in indexes {
            if let Some(c) = self.counters(index)? {
                counters.insert(index, c);
            }
        }
        Ok(Snapshot {
            counters,
            flows: Arc::new(flows),
            flows_clocks: Some(clocks),
            flows_window: window,
            flow_table,
            wg_sessions: self.wg_sessions()?,
            wg_handshakes: self.wg_handshakes()?,
            mono_ns: wg_path::mono_now_ns(),
            since_mono_ns: 0,
        })
    }

    /// Capacity of the flow table (entries).
    pub fn flow_table_capacity(&self) -> usize {
        self.skel
            .maps
            .flows
            .info()
            .map_or(0, |i| i.info.max_entries as usize)
    }

    /// Kernel statistics of the loaded packet programs ([`prog_stats`]): counted only
    /// while the kernel's BPF statistics are on.
    pub fn program_stats(&self) -> Vec<ProgramRuns> {
        prog_stats::of_object(self.skel.object())
    }

    /// Every ICMP too-big report in the table.
    pub fn too_big(&self) -> Result<Vec<TooBig>> {
        read_all::<nd_ptb_key, nd_ptb_stats, _>(&self.skel.maps.ptb_events, "ptb_events", |k, v| {
            TooBig::from_raw(k, v)
        })
    }
}

/// What the data plane had counted at one moment.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// Counters per watched interface index.
    pub counters: HashMap<u32, IfaceCounters>,
    /// Every flow in the table (in a window: those with packets in it, counted over it).
    /// Shared: the agent's previous reading and its API serve the same flows.
    pub flows: Arc<Vec<Flow>>,
    /// The clocks the flows' timestamps were converted with, read as the reading of the
    /// table began (`None`: not read from a data plane).
    pub(crate) flows_clocks: Option<Clocks>,
    /// The flows are a window of the agent's already, counted over it by the data plane
    /// ([`Dataplane::window_snapshot`]), not totals.
    pub(crate) flows_window: bool,
    /// The flow table's size, entries and evictions (in a window: evictions during it).
    pub flow_table: FlowTableUse,
    /// WireGuard sessions the underlays received (in a window: those with messages in it,
    /// counted over it).
    pub wg_sessions: Vec<WgSession>,
    /// WireGuard handshake messages this host sent, as the table holds them when read
    /// (older ones too: a window's are those sent after `since_mono_ns`).
    pub wg_handshakes: Vec<WgHandshake>,
    /// When it was read, CLOCK_MONOTONIC nanoseconds (0: never read).
    pub mono_ns: u64,
    /// A window: when its start was read (0 for a reading).
    pub since_mono_ns: u64,
}

impl Snapshot {
    /// Counters of interface `index` (zero if it was not watched).
    pub fn counters(&self, index: u32) -> IfaceCounters {
        self.counters.get(&index).cloned().unwrap_or_default()
    }
}

/// Reads every entry of a hash map, tolerating entries that vanish (LRU eviction) meanwhile,
/// converted by `convert` (see [`for_each_entry`]).
fn read_all<K, V, T>(
    map: &impl MapCore,
    name: &'static str,
    convert: impl Fn(&K, &V) -> T,
) -> Result<Vec<T>>
where
    K: plain::Plain + Default,
    V: plain::Plain + Default,
{
    let mut out = Vec::new();
    for_each_entry::<K, V>(map, name, &mut |k, v| out.push(convert(k, v)))?;
    Ok(out)
}

/// Hands every entry of a hash map to `entry` as it arrives, tolerating entries that vanish
/// (LRU eviction) meanwhile: in batches of [`BATCH`] entries per system call where the
/// kernel supports it (Linux 5.6), else one key at a time (two system calls per entry).
/// Nothing of the map is held beyond one batch.
fn for_each_entry<K, V>(
    map: &impl MapCore,
    name: &'static str,
    entry: &mut dyn FnMut(&K, &V),
) -> Result<()>
where
    K: plain::Plain + Default,
    V: plain::Plain + Default,
{
    let err = |source| Error::Map { map: name, source };
    let seen = std::cell::Cell::new(0u64);
    let mut push = |k: &[u8], v: &[u8]| {
        if let (Some(k), Some(v)) = (decode::<K>(k), decode::<V>(v)) {
            seen.set(seen.get() + 1);
            entry(&k, &v);
        }
    };
    match read_batched(map, &mut push) {
        Ok(()) => Ok(()),
        // EINVAL: a kernel before batch operations; ENOTSUPP (524, the kernel's own): a map
        // type without them. Refused at the first batch, before any entry: read one key at
        // a time instead.
        Err(e)
            if seen.get() == 0
                && matches!(
                    e.raw_os_error(),
                    Some(libc::EINVAL | libc::EOPNOTSUPP | 524)
                ) =>
        {
            read_one_by_one(map, &mut push).map_err(err)
        }
        Err(e) => Err(err(libbpf_rs::Error::from(e))),
    }
}

/// Entries per batch: a hash map's batch must hold its fullest bucket, which 4,096 does
/// with a wide margin.
const BATCH: u32 = 4096;

/// Every entry through `BPF_MAP_LOOKUP_BATCH`, handed to `entry` as (key, value) bytes.
fn read_batched(map: &impl MapCore, entry: &mut impl FnMut(&[u8], &[u8])) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let (key_size, value_size) = (map.key_size() as usize, map.value_size() as usize);
    let mut keys = vec![0u8; key_size * BATCH as usize];
    let mut values = vec![0u8; value_size * BATCH as usize];
    let mut out_batch = vec![0u8; key_size];
    let mut in_batch: Option<Vec<u8>> = None;
    let opts = libbpf_sys::bpf_map_batch_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_map_batch_opts>() as _,
        ..Default::default()
    };
    loop {
        let mut count = BATCH;
        let prev = in_batch
            .as_mut()
            .map_or(std::ptr::null_mut(), |b| b.as_mut_ptr().cast());
        // SAFETY: `keys` and `values` hold `BATCH` keys and values of the map's sizes and
        // `count` says so; `out_batch` holds one key, as does `in_batch` when given; all
        // outlive the call, and `opts` carries its own size.
        let ret = unsafe {
            libbpf_sys::bpf_map_lookup_batch(
                map.as_fd().as_raw_fd(),
                prev,
                out_batch.as_mut_ptr().cast(),
                keys.as_mut_ptr().cast(),
                values.as_mut_ptr().cast(),
                &mut count,
                &opts,
            )
        };
        let done = match ret {
            0 => false,
            e if -e == libc::ENOENT => true,
            e => return Err(std::io::Error::from_raw_os_error(-e)),
        };
        let n = (count as usize).min(BATCH as usize);
        for (k, v) in keys
            .chunks_exact(key_size)
            .zip(values.chunks_exact(value_size))
            .take(n)
        {
            entry(k, v);
        }
        if done {
            return Ok(());
        }
        in_batch = Some(out_batch.clone());
    }
}

/// Every entry, one key at a time.
fn read_one_by_one(
    map: &impl MapCore,
    entry: &mut impl FnMut(&[u8], &[u8]),
) -> libbpf_rs::Result<()> {
    for key in map.keys() {
        if let Some(value) = map.lookup(&key, MapFlags::ANY)? {
            entry(&key, &value);
        }
    }
    Ok(())
}

//! The packet data plane: loads `ebpf/packet.bpf.c`, watches interfaces (their counter
//! slots) and holds what is attached (`attaching`); `snapshot` reads its maps.

use std::collections::HashMap;
use std::mem::MaybeUninit;

use super::options::{Hooks, IngressHook, LinkType, Options, ProgramKind};
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{MapCore, MapFlags, OpenObject, ProgramMut};

use crate::kernel::attach::Attachment;
use crate::kernel::bpf::packet::{OpenPacketSkel, PacketSkel, PacketSkelBuilder};
use crate::kernel::error::{Error, Result};
use crate::kernel::packet::flow_cache::{self, SlotView};
use crate::kernel::packet::flow_lookup;
use crate::kernel::packet::flow_table;
use crate::kernel::packet::mapped::Mapped;
use crate::kernel::packet::table_count;
use crate::kernel::packet::wg_path;
use crate::kernel::views::{decode, encode, nd_iface_dir};

/// Mirrors `ND_MAX_IFACES` in ebpf/include/packet.h (checked by the `limits` test).
pub const MAX_IFACES: usize = 256;
/// Mirrors `ND_SLOT_ARRAY_IFINDEX` in ebpf/include/packet.h (checked by the `limits` test).
pub(super) const SLOT_ARRAY_IFINDEX: u32 = 65536;
/// Mirrors `ND_MAX_USER_PORTS` in ebpf/include/packet.h (checked by the `limits` test).
pub const MAX_TUNNEL_PORTS: usize = 8;
/// Names of the packet programs, as the kernel reports them (used to find leftovers).
pub(super) const PROGRAM_NAMES: [&str; 3] = ["nd_xdp_ingress", "nd_tc_ingress", "nd_tc_egress"];

/// What one interface has attached ([`Dataplane::attach`]).
pub(super) struct Attached {
    pub(super) hooks: Hooks,
    pub(super) _attachments: Vec<Attachment>,
}

/// The loaded data plane. Dropping it detaches everything.
pub struct Dataplane<'obj> {
    pub(super) skel: PacketSkel<'obj>,
    pub(super) attached: HashMap<u32, Attached>,
    /// Counter slot of each watched interface (behind a lock so that watching needs no
    /// exclusive borrow, like every other map operation).
    slots: std::sync::Mutex<HashMap<u32, u32>>,
    /// Possible CPUs: `iface_stats` and `flow_cache` hold a run of values for each.
    cpus: u32,
    /// The per-CPU flow cache, mapped read-only: flows are the table plus these slots.
    pub(super) flow_cache: SlotView,
    /// The largest eviction count read so far (readings never go backwards).
    pub(super) evictions_seen: std::sync::atomic::AtomicU64,
    pub(super) options: Options,
    /// The families whose received segments can be local (PATH_LOCAL_IN4/IN6), as the
    /// latest [`Self::refresh_local_addrs`] found them.
    pub(super) local_in: std::sync::atomic::AtomicU8,
    /// What closing the agent's windows remembers between them.
    pub(super) window_state: super::window_ring::WindowState,
    /// The iterator reading the kernel's count of the table's entries, where it has one.
    pub(super) table_count: Option<libbpf_rs::Link>,
    /// The batched lookup of a window's flows, where the kernel runs it.
    pub(super) lookup: Option<flow_lookup::Batch>,
}

impl std::fmt::Debug for Dataplane<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dataplane")
            .field("attached", &self.attached.keys().collect::<Vec<_>>())
            .field("options", &self.options)
            .finish()
    }
}

impl<'obj> Dataplane<'obj> {
    /// Opens and loads the programs; nothing is attached yet. `storage` holds libbpf's
    /// object for as long as the data plane lives.
    pub fn load(storage: &'obj mut MaybeUninit<OpenObject>, options: Options) -> Result<Self> {
        if options.tunnel_ports.len() > MAX_TUNNEL_PORTS {
            return Err(Error::Load(libbpf_rs::Error::from(std::io::Error::other(
                format!("at most {MAX_TUNNEL_PORTS} tunnel ports can be configured"),
            ))));
        }
        let mut open = PacketSkelBuilder::default()
            .open(storage)
            .map_err(Error::from_load)?;
        let bss = open.maps.bss_data.as_deref_mut().ok_or_else(no_bss)?;
        for (i, tp) in options.tunnel_ports.iter().enumerate() {
            bss.user_port_encap[i] = tp.encap as u8;
            bss.user_ports[i] = tp.port;
        }
        // Each possible CPU gets its own run of flow-cache slots and interface counters
        // (packet.bpf.c indexes them by the CPU number).
        let cpus = libbpf_rs::num_possible_cpus()
            .map_err(Error::from_load)
            .and_then(|n| {
                u32::try_from(n).map_err(|_| {
                    Error::Load(libbpf_rs::Error::from(std::io::Error::other(format!(
                        "{n} possible CPUs"
                    ))))
                })
            })?;
        let per_cpu = |map: &mut libbpf_rs::OpenMapMut<'_>, values: u32| {
            let total = cpus.checked_mul(values).ok_or_else(|| {
                Error::Load(libbpf_rs::Error::from(std::io::Error::other(format!(
                    "{cpus} possible CPUs"
                ))))
            })?;
            map.set_max_entries(total).map_err(Error::from_load)
        };
        per_cpu(&mut open.maps.flow_cache, flow_cache::SLOTS_PER_CPU)?;
        let max_flows = flow_table::check_max_flows(options.max_flows)
            .map_err(|e| Error::Load(libbpf_rs::Error::from(std::io::Error::other(e))))?;
        open.maps
            .flows
            .set_max_entries(max_flows)
            .map_err(Error::from_load)?;
        per_cpu(&mut open.maps.iface_stats, MAX_IFACES as u32 * 2)?;
        open.maps
            .flow_active
            .set_max_entries(super::window_ring::active_ring_bytes(&options))
            .map_err(Error::from_load)?;
        choose_xdp(&mut open, &options);
        let counts = table_count::choose(
            &mut open.progs.nd_count_flows,
            options.windows && !options.count_by_walk,
        );
        let batch = flow_lookup::choose(
            &mut open.progs.nd_lookup_flows,
            &mut open.maps.flow_lookup,
            options.windows,
        )?;
        let mut skel = open.load().map_err(Error::from_load)?;
        let (table_count, lookup) = window_helpers(&mut skel, counts, batch)?;
        let flow_cache = SlotView::map(&skel.maps.flow_cache)?;
        let dp = Dataplane {
            skel,
            attached: HashMap::new(),
            slots: std::sync::Mutex::new(HashMap::new()),
            cpus,
            flow_cache,
            evictions_seen: std::sync::atomic::AtomicU64::new(0),
            options,
            local_in: Default::default(),
            window_state: Default::default(),
            table_count,
            lookup,
        };
        dp.refresh_local_addrs();
        Ok(dp)
    }

    /// A program, e.g. for `BPF_PROG_TEST_RUN` or its kernel statistics. The XDP one is
    /// loaded only with [`Options::load_all_programs`] or XDP ingress: [`Self::loaded`].
    pub fn program(&self, kind: ProgramKind) -> &ProgramMut<'obj> {
        match kind {
            ProgramKind::XdpIngress => &self.skel.progs.nd_xdp_ingress,
            ProgramKind::TcIngress => &self.skel.progs.nd_tc_ingress,
            ProgramKind::TcEgress => &self.skel.progs.nd_tc_egress,
        }
    }

    /// Whether the agent's windows read the table's entry count from the kernel
    /// (`table_count`) rather than counting it by walks.
    pub fn counts_in_kernel(&self) -> bool {
        self.table_count.is_some()
    }

    /// Whether the agent's windows look their flows up in batches (`flow_lookup`) rather
    /// than one system call each.
    pub fn looks_up_in_batches(&self) -> bool {
        self.lookup.is_some()
    }

    /// Whether program `kind` was loaded (see [`Options::load_all_programs`]).
    pub fn loaded(&self, kind: ProgramKind) -> bool {
        self.program(kind).autoload()
    }

    /// The slot table (a panic elsewhere cannot leave it inconsistent: every change is one
    /// insert or remove).
    pub(super) fn slots(&self) -> std::sync::MutexGuard<'_, HashMap<u32, u32>> {
        self.slots
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Starts accounting for interface `index` (giving it a counter slot) without
    /// attaching anything. Packets on interfaces that are not watched are ignored by the
    /// programs. Watching an interface again keeps its counters and updates MTU and link.
    pub fn watch(&self, index: u32, mtu: u32, link: LinkType) -> Result<()> {
        // An empty flow-cache slot has ifindex 0 in its key (flow_record in
        // ebpf/include/flow_cache.bpf.h), and a free counter slot has owner 0.
        if index == 0 {
            return Err(Error::NoInterfaceIndex);
        }
        let mut slots = self.slots();
        let link = u8::from(link == LinkType::RawIp);
        let path = self.path();
        let slot = match slots.get(&index) {
            // A live slot: the programs count into it, so only its header is written, in
            // place (rewriting the whole value would lose what they count meanwhile, and
            // a counter that goes back reads as a slot watched afresh).
            Some(&slot) => {
                self.write_header(slot, mtu, link, path)?;
                slot
            }
            None => {
                // The programs look for an interface's counters in slot
                // ifindex % MAX_IFACES first, so that one is taken if free.
                let preferred = index % MAX_IFACES as u32;
                let slot = std::iter::once(preferred)
                    .chain(0..MAX_IFACES as u32)
                    .find(|s| !slots.values().any(|used| used == s))
                    .ok_or(Error::TooManyInterfaces(MAX_IFACES))?;
                // A fresh slot's counters start from zero with MTU and link in place
                // before it names its owner: the programs count into a slot only once it
                // does, so no packet sees the new owner with a stale MTU.
                self.write_counters(slot, |_| nd_iface_dir {
                    mtu,
                    link,
                    path,
                    ..Default::default()
                })?;
                self.write_counters(slot, |old| nd_iface_dir {
                    ifindex: index,
                    ..old
                })?;
                slots.insert(index, slot);
                slot
            }
        };
        // Slots other than the preferred one are found through this mapping. Written every
        // time: idempotent, and it repairs a mapping someone cleared.
        let maps = &self.skel.maps;
        let (map, name): (&dyn MapCore, &'static str) = if index < SLOT_ARRAY_IFINDEX {
            (&maps.iface_slot, "iface_slot")
        } else {
            (&maps.iface_slot_big, "iface_slot_big")
        };
        map.update(
            &index.to_ne_bytes(),
            &(slot + 1).to_ne_bytes(),
            MapFlags::ANY,
        )
        .map_err(|e| Error::Map {
            map: name,
            source: e,
        })
    }

    /// Keys of `slot`'s counters in `iface_stats`, with their direction (0: ingress), for
    /// every CPU (iface_index in ebpf/include/iface_stats.bpf.h).
    pub(super) fn counter_keys(&self, slot: u32) -> impl Iterator<Item = ([u8; 4], u32)> {
        (0..self.cpus).flat_map(move |cpu| {
            (0..2).map(move |dir| {
                let index = (cpu * MAX_IFACES as u32 + slot) * 2 + dir;
                (index.to_ne_bytes(), dir)
            })
        })
    }

    /// Writes MTU, link and path into `slot`'s header.
    fn write_header(&self, slot: u32, mtu: u32, link: u8, path: u8) -> Result<()> {
        self.store_headers(slot, |values, index| {
            values.store_u32(index, std::mem::offset_of!(nd_iface_dir, mtu), mtu);
            values.store_u8(index, std::mem::offset_of!(nd_iface_dir, link), link);
            values.store_u8(index, std::mem::offset_of!(nd_iface_dir, path), path);
        })
    }

    /// Stores into `slot`'s header, both directions on every CPU, through a mapping of the
    /// counters: `store` gets the mapping and a value's index, and nothing else of the values
    /// changes.
    pub(super) fn store_headers(&self, slot: u32, store: impl Fn(&Mapped, usize)) -> Result<()> {
        let map = &self.skel.maps.iface_stats;
        let values = Mapped::map(map, true).map_err(|e| Error::Map {
            map: "iface_stats",
            source: libbpf_rs::Error::from(e),
        })?;
        for (key, _) in self.counter_keys(slot) {
            store(&values, u32::from_ne_bytes(key) as usize);
        }
        Ok(())
    }

    /// Rewrites `slot`'s counters, both directions on every CPU, through `change`: only for
    /// a slot no program counts into (not yet, or no longer, owned by an interface).
    fn write_counters(
        &self,
        slot: u32,
        change: impl Fn(nd_iface_dir) -> nd_iface_dir,
    ) -> Result<()> {
        let map = &self.skel.maps.iface_stats;
        let err = |source| Error::Map {
            map: "iface_stats",
            source,
        };
        for (key, _) in self.counter_keys(slot) {
            let old = map
                .lookup(&key, MapFlags::ANY)
                .map_err(err)?
                .and_then(|bytes| decode(&bytes))
                .unwrap_or_default();
            map.update(&key, encode(&change(old)), MapFlags::ANY)
                .map_err(err)?;
        }
        Ok(())
    }

    /// Stops accounting for interface `index` and frees its counter slot (zeroed, so a
    /// later `watch` starts from nothing). Attachments, if any, stay until `detach`.
    pub fn unwatch(&self, index: u32) {
        let removed = self.slots().remove(&index);
        let Some(slot) = removed else { return };
        let maps = &self.skel.maps;
        let _ = if index < SLOT_ARRAY_IFINDEX {
            maps.iface_slot
                .update(&index.to_ne_bytes(), &0u32.to_ne_bytes(), MapFlags::ANY)
        } else {
            maps.iface_slot_big.delete(&index.to_ne_bytes())
        };
        let _ = self.write_counters(slot, |_| nd_iface_dir::default());
    }

    /// What the interfaces' packets go through (the bits of `enum nd_path`): the options'
    /// and the families received segments can be local in.
    pub(super) fn path(&self) -> u8 {
        self.options.path() | self.local_in.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Every WireGuard session the underlays received ([`wg_path::sessions`]).
    pub fn wg_sessions(&self) -> Result<Vec<wg_path::WgSession>> {
        wg_path::sessions(&self.skel.maps.wg_rx, &self.flow_cache)
    }

    /// Every handshake message this host sent that the table still holds.
    pub fn wg_handshakes(&self) -> Result<Vec<wg_path::WgHandshake>> {
        wg_path::handshakes(&self.skel.maps.wg_hs)
    }
}

/// Loads the XDP program only when something will run it: tc counts received packets
/// otherwise (and stands in when XDP is taken, so it is always loaded).
fn choose_xdp(open: &mut OpenPacketSkel<'_>, options: &Options) {
    let xdp = options.load_all_programs || options.ingress == IngressHook::Xdp;
    open.progs.nd_xdp_ingress.set_autoload(xdp);
    if xdp && crate::kernel::features::xdp_frags() {
        // Multi-buffer XDP: the program sees whole frames, fragments included. Set here
        // rather than by section "xdp.frags", whose flag kernels before 5.18 refuse; there
        // the program sees each frame's linear part, the whole frame.
        open.progs
            .nd_xdp_ingress
            .set_flags(libbpf_sys::BPF_F_XDP_HAS_FRAGS);
    } else if xdp {
        tracing::info!("this kernel has no multi-buffer XDP: XDP counts linear frames");
    }
}

/// What helps the agent close its windows, as loaded: the kernel's count of the table
/// (`counts`) and the batched lookup (`batch`).
fn window_helpers(
    skel: &mut PacketSkel<'_>,
    counts: bool,
    batch: bool,
) -> Result<(Option<libbpf_rs::Link>, Option<flow_lookup::Batch>)> {
    let lookup = if batch {
        Some(flow_lookup::Batch::map(&skel.maps.flow_lookup)?)
    } else {
        None
    };
    let count = if counts {
        let bss = skel.maps.bss_data.as_deref_mut().ok_or_else(no_bss)?;
        table_count::attach(
            &skel.progs.nd_count_flows,
            &skel.maps.flows,
            &mut bss.nd_count_map_id,
        )
    } else {
        None
    };
    Ok((count, lookup))
}

/// The error of a skeleton without its `.bss` (the programs' settings the agent writes).
pub(super) fn no_bss() -> Error {
    Error::Load(libbpf_rs::Error::from(std::io::Error::other(
        "packet.bpf.c has no .bss",
    )))
}

//! Packets the kernel dropped, by interface, reason and protocol, from
//! `ebpf/drops.bpf.c` (tp_btf/kfree_skb). Reason names come from the running kernel's BTF
//! enum `skb_drop_reason`, so they are right for whatever kernel this is.

use std::collections::{BTreeMap, HashMap};
use std::mem::MaybeUninit;

use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};
use libbpf_rs::{Link, MapCore, MapFlags, OpenObject};
use serde::Serialize;

use crate::kernel::bpf::drops::types::{nd_drop_key, nd_drop_stats};
use crate::kernel::bpf::drops::{DropsSkel, DropsSkelBuilder};
use crate::kernel::btf;
use crate::kernel::error::{Error, Result};
use crate::kernel::views::decode;

// SAFETY: `#[repr(C)]` structs generated from drops.h made only of integers with explicit
// padding: every bit pattern is a valid value.
unsafe impl plain::Plain for nd_drop_key {}
// SAFETY: as above.
unsafe impl plain::Plain for nd_drop_stats {}

/// Reasons the kernel reports through kfree_skb that are not packets lost on the network:
/// queued data freed when a socket is closed or its queues are purged (every ordinary TCP
/// teardown produces some). They are left out of every report.
pub const NOT_NETWORK_DROPS: [&str; 2] = ["QUEUE_PURGE", "SOCKET_CLOSE"];

/// The reason of every drop on a kernel whose kfree_skb tracepoint reports none.
pub const NO_REASON: &str = "UNKNOWN";

/// Drops of one (interface, reason, protocol).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DropCount {
    /// Interface index the packet was on (0: none).
    pub ifindex: u32,
    /// Reason name without the `SKB_DROP_REASON_` prefix, e.g. `IP_INADDRERRORS`.
    pub reason: String,
    /// The kernel's numeric reason.
    pub reason_code: u32,
    /// EtherType, e.g. 0x0800 for IPv4.
    pub ethertype: u16,
    /// Transport protocol for IP packets (6 TCP, 17 UDP, 1 ICMP, 58 ICMPv6), else 0.
    pub protocol: u8,
    /// Packets dropped.
    pub packets: u64,
    /// Bytes dropped.
    pub bytes: u64,
}

/// The loaded kfree_skb program. Dropping it detaches.
pub struct DropProbe<'obj> {
    skel: DropsSkel<'obj>,
    netns: u32,
    _link: Link,
    reasons: BTreeMap<u32, String>,
    /// Whether this kernel reports why it dropped (kfree_skb's `reason`).
    has_reasons: bool,
}

impl std::fmt::Debug for DropProbe<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DropProbe")
            .field("reasons", &self.reasons.len())
            .finish()
    }
}

impl<'obj> DropProbe<'obj> {
    /// Loads and attaches; `Ok(None)` (with a warning) when the kernel lacks the
    /// tracepoint.
    pub fn load(storage: &'obj mut MaybeUninit<OpenObject>) -> Result<Option<Self>> {
        let kernel = btf::vmlinux().ok_or(Error::NoBtf)?;
        if !btf::has_tracepoint(&kernel, "kfree_skb") {
            tracing::info!(
                "this kernel lacks the kfree_skb BTF tracepoint; drop reasons are skipped"
            );
            return Ok(None);
        }
        let has_reasons = btf::tracepoint_args(&kernel, "kfree_skb").unwrap_or(2) >= 3;
        let reasons = if has_reasons {
            btf::enum_names(&kernel, "skb_drop_reason", "SKB_DROP_REASON_")
        } else {
            tracing::info!("this kernel's kfree_skb tracepoint reports no drop reason (Linux < 5.17): drops are counted without reasons");
            BTreeMap::new()
        };
        let mut open = DropsSkelBuilder::default()
            .open(storage)
            .map_err(Error::from_load)?;
        if let Some(rodata) = open.maps.rodata_data.as_deref_mut() {
            rodata.kfree_skb_has_reason = has_reasons;
        }
        let skel = open.load().map_err(Error::from_load)?;
        let link = skel.progs.nd_kfree_skb.attach().map_err(|e| {
            Error::attach(
                "tp_btf/kfree_skb",
                "-",
                std::io::Error::other(e.to_string()),
            )
        })?;
        Ok(Some(DropProbe {
            skel,
            netns: crate::kernel::netns::current_netns().unwrap_or(0),
            _link: link,
            reasons,
            has_reasons,
        }))
    }

    /// Every (interface, reason, protocol) of the loading namespace seen since load, most
    /// packets first.
    pub fn counts(&self) -> Result<Vec<DropCount>> {
        let map = &self.skel.maps.drops;
        let mut totals: HashMap<(u32, u32, u16, u8), (u64, u64)> = HashMap::new();
        for key in map.keys() {
            let Some(k) = decode::<nd_drop_key>(&key).filter(|k| k.netns == self.netns) else {
                continue;
            };
            let per_cpu = map
                .lookup_percpu(&key, MapFlags::ANY)
                .map_err(|e| Error::Map {
                    map: "drops",
                    source: e,
                })?
                .unwrap_or_default();
            let t = totals
                .entry((k.ifindex, k.reason, k.ethertype, k.l4proto))
                .or_default();
            for v in per_cpu.iter().filter_map(|b| decode::<nd_drop_stats>(b)) {
                t.0 += v.packets;
                t.1 += v.bytes;
            }
        }
        let mut out: Vec<DropCount> = totals
            .into_iter()
            .filter(|((_, code, _, _), _)| {
                !NOT_NETWORK_DROPS.contains(&self.reason_name(*code).as_str())
            })
            .map(
                |((ifindex, code, ethertype, protocol), (packets, bytes))| DropCount {
                    ifindex,
                    reason: self.reason_name(code),
                    reason_code: code,
                    ethertype,
                    protocol,
                    packets,
                    bytes,
                },
            )
            .collect();
        out.sort_by(|a, b| b.packets.cmp(&a.packets).then(a.reason.cmp(&b.reason)));
        Ok(out)
    }

    /// Kernel statistics of the drop program ([`crate::kernel::prog_stats`]).
    pub fn program_stats(&self) -> Vec<crate::kernel::prog_stats::ProgramRuns> {
        crate::kernel::prog_stats::of_object(self.skel.object())
    }

    /// Drops that found the table full and were only counted here.
    pub fn overflow(&self) -> u64 {
        self.skel
            .maps
            .bss_data
            .as_deref()
            .map_or(0, |b| b.drops_overflow)
    }

    /// Whether drops come with the kernel's reason (Linux 5.17's kfree_skb `reason`);
    /// without it every drop is counted under [`NO_REASON`].
    pub fn has_reasons(&self) -> bool {
        self.has_reasons
    }

    /// The name of a reason code on this kernel.
    pub fn reason_name(&self, code: u32) -> String {
        if !self.has_reasons {
            return NO_REASON.into();
        }
        self.reasons
            .get(&code)
            .cloned()
            .unwrap_or_else(|| format!("reason {code}"))
    }
}

/// Subtracts `before` from `after` (same keys), keeping entries that grew.
pub fn delta(before: &[DropCount], after: &[DropCount]) -> Vec<DropCount> {
    let base: HashMap<(u32, u32, u16, u8), (u64, u64)> = before
        .iter()
        .map(|d| {
            (
                (d.ifindex, d.reason_code, d.ethertype, d.protocol),
                (d.packets, d.bytes),
            )
        })
        .collect();
    after
        .iter()
        .filter_map(|d| {
            let (p, b) = base
                .get(&(d.ifindex, d.reason_code, d.ethertype, d.protocol))
                .copied()
                .unwrap_or_default();
            let packets = d.packets.saturating_sub(p);
            (packets > 0).then(|| DropCount {
                packets,
                bytes: d.bytes.saturating_sub(b),
                ..d.clone()
            })
        })
        .collect()
}

//! The ring that names the flows of each of the agent's windows (`flow_active`,
//! `ebpf/include/flow_window.bpf.h`): its record and size, and what closing windows
//! remembers between them (`agent_windows` reads them).

use super::flow_table::FlowTableUse;
use super::options::Options;
use crate::kernel::views::{encode, nd_flow_key};

/// Windows between two counts of a table that may be evicting.
pub const COUNT_EVERY: u32 = 6;

/// A record of the ring `flow_active`: `struct nd_flow_active` of ebpf/include/packet.h
/// (which the skeleton does not generate: no map or global has its type).
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct nd_flow_active {
    pub(super) key: nd_flow_key,
    pub(super) window: u32,
}
const _: () = assert!(std::mem::size_of::<nd_flow_active>() == 48);
// SAFETY: `#[repr(C)]` of a plain key (itself `Plain`) and an integer, no padding: every bit
// pattern of its size is a valid value.
unsafe impl plain::Plain for nd_flow_active {}

/// A flow key's bytes (`struct nd_flow_key`), as sets hold them.
pub(super) type KeyBytes = [u8; KEY_BYTES];
const KEY_BYTES: usize = std::mem::size_of::<nd_flow_key>();
/// Bytes of one ring record: `struct nd_flow_active` and the ring's 8-byte header.
const RECORD_BYTES: u64 = std::mem::size_of::<nd_flow_active>() as u64 + 8;

pub(super) fn key_bytes(key: &nd_flow_key) -> KeyBytes {
    let mut out = [0u8; KEY_BYTES];
    out.copy_from_slice(encode(key));
    out
}

/// Size of `flow_active`. Without windows, a page (the least). A table of up to
/// [`SMALL_TABLE`] flows gets 64 KiB (1,170 records): a window with more active flows streams
/// the table instead, which costs tens of milliseconds at that size. A larger table gets
/// records for an eighth of its flows active in one window, a power of two up to 16 MiB. The
/// agent maps the ring twice while it reads it, so its size counts twice in its peak memory.
pub(super) fn active_ring_bytes(options: &Options) -> u32 {
    const SMALLEST: u64 = 64 << 10;
    if !options.windows {
        return 4096;
    }
    if options.max_flows <= SMALL_TABLE {
        return SMALLEST as u32;
    }
    let want = (u64::from(options.max_flows) / 8 * RECORD_BYTES).next_power_of_two();
    want.clamp(SMALLEST, 16 << 20) as u32
}

/// The largest table whose windows need no more than the smallest ring.
pub(super) const SMALL_TABLE: u32 = 131_072;

/// What closing windows remembers between them.
#[derive(Debug, Default)]
pub(super) struct WindowState {
    /// Flows of the next window the ring already named while this one was read.
    pub(super) pending: Vec<KeyBytes>,
    /// `nd_active_lost` at the last close.
    pub(super) lost_seen: u64,
    /// The table's use at its last count, and the inserts then.
    pub(super) counted: Option<(FlowTableUse, u64)>,
    /// Windows closed since the last count.
    pub(super) since_count: u32,
    /// Windows read by the flows named, and by streaming the table.
    pub(super) reads: WindowReads,
}

/// How closed windows were read.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct WindowReads {
    /// By looking up the flows the ring and the slots named.
    pub named: u64,
    /// By streaming the whole table (the ring overflowed, or the table was counted).
    pub whole: u64,
}

//! The WireGuard path as the data plane measures it on an underlay (`ebpf/include/wg_path.bpf.h`):
//! the sessions received, per (interface, receiver index), with the counters their
//! transport-data messages carried, and the handshake messages this host sent with the time
//! their answer took.
//!
//! A session's loss is counters never seen: the highest counter's advance (what the peer
//! sent) minus the messages received, so a message that arrives late is counted when it
//! arrives, never as lost. The peer a session belongs to is the endpoint its messages come
//! from (the facts map it to the configured peer).
//!
//! A session's state is split like a flow's (see [`super::flow_cache`]): per CPU, the flow
//! cache slot of the underlay flow its messages arrive on (mapped read-only) holds what that
//! CPU counted since the slot took the session (`wg_index`, `wg`), and the table `wg_rx` the
//! rest; a session leaving its slot moves to the table. Both are read under the slots'
//! sequence lock: slots, table, slots again, and the whole read repeated when a slot's
//! contents were retired meanwhile.

use std::collections::HashMap;
use std::net::SocketAddr;

use libbpf_rs::{MapCore, MapFlags};
use serde::Serialize;

use super::flow_cache::{settled, SlotCopy, SlotView};
use crate::kernel::error::{Error, Result};
use crate::kernel::views::{addr, decode, nd_flow_slot, nd_wg_hs, nd_wg_key, nd_wg_rx};

/// Reads of slots and table before accepting one that raced with a retirement.
const ATTEMPTS: usize = 4;

/// A WireGuard session as one interface received it, from every CPU's share.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WgSession {
    /// Interface index (an underlay).
    pub ifindex: u32,
    /// The receiver index its messages carry: this host's index of the session.
    pub index: u32,
    /// Where its messages come from: the peer's endpoint.
    pub source: SocketAddr,
    /// Highest counter seen.
    pub high: u64,
    /// Lowest counter seen.
    pub low: u64,
    /// Counters the peer used: in a reading, from the lowest seen to the highest; in a
    /// window, the highest counter's advance.
    pub expected: u64,
    /// Messages received (duplicates excluded); in a window, those of the window.
    pub received: u64,
    /// Messages whose counter the CPU that received them had seen.
    pub duplicates: u64,
    /// The latest message, CLOCK_MONOTONIC nanoseconds (tick resolution).
    pub last_seen_mono_ns: u64,
}

impl WgSession {
    /// Messages expected and never received (late ones count where they arrive).
    pub fn lost(&self) -> u64 {
        self.expected.saturating_sub(self.received)
    }

    /// Sums the CPUs' values of one session; `None` if no CPU saw a message.
    fn from_cpus(key: &nd_wg_key, cpus: &[nd_wg_rx]) -> Option<Self> {
        let seen: Vec<&nd_wg_rx> = cpus.iter().filter(|v| v.c.packets > 0).collect();
        let first = seen.first()?;
        let high = seen.iter().map(|v| v.c.high).max().unwrap_or(0);
        let low = seen.iter().map(|v| v.c.low).min().unwrap_or(0);
        Some(WgSession {
            ifindex: key.ifindex,
            index: key.index,
            source: SocketAddr::new(addr(first.family, &first.saddr), first.sport),
            high,
            low,
            expected: high.saturating_sub(low).saturating_add(1),
            received: seen.iter().map(|v| u64::from(v.c.packets)).sum(),
            duplicates: seen.iter().map(|v| u64::from(v.c.dups)).sum(),
            last_seen_mono_ns: seen.iter().map(|v| v.c.last_ns).max().unwrap_or(0),
        })
    }

    /// What the session carried since `earlier`, the same session read before. One the
    /// table evicted and started again in between (a lowest counter above the one read
    /// before, fewer messages or a lower highest counter) counts as new: its gap is not
    /// counted as lost.
    pub fn since(&self, earlier: &WgSession) -> WgSession {
        if self.low > earlier.low || earlier.received > self.received || earlier.high > self.high {
            return self.clone();
        }
        WgSession {
            expected: self.high - earlier.high,
            received: self.received - earlier.received,
            duplicates: self.duplicates.saturating_sub(earlier.duplicates),
            ..self.clone()
        }
    }
}

/// Which handshake message this host sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// An initiation: the peer's response answers it.
    Initiator,
    /// A response: the peer's first transport data confirms it.
    Responder,
}

/// A handshake message this host sent, and when the peer's answer arrived.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WgHandshake {
    /// This host's sender index in it.
    pub index: u32,
    /// The interface it left by.
    pub ifindex: u32,
    /// Initiation or response.
    pub role: Role,
    /// Where it went: the peer's endpoint.
    pub peer: SocketAddr,
    /// When it left, CLOCK_MONOTONIC nanoseconds.
    pub sent_mono_ns: u64,
    /// When the answer arrived (the response to an initiation, the first data after a
    /// response), if it did.
    pub answered_mono_ns: Option<u64>,
}

impl WgHandshake {
    /// The round trip it measured: from the message leaving to the answer arriving.
    pub fn rtt_ns(&self) -> Option<u64> {
        self.answered_mono_ns
            .map(|done| done.saturating_sub(self.sent_mono_ns))
    }

    fn from_raw(index: u32, v: &nd_wg_hs) -> Option<Self> {
        let role = match v.role {
            1 => Role::Initiator,
            2 => Role::Responder,
            _ => return None,
        };
        Some(WgHandshake {
            index,
            ifindex: v.ifindex,
            role,
            peer: SocketAddr::new(addr(v.family, &v.daddr), v.dport),
            sent_mono_ns: v.sent_ns,
            answered_mono_ns: (v.done_ns != 0).then_some(v.done_ns),
        })
    }
}

/// The WireGuard path from one remote endpoint as one interface received it: every session
/// from it added up, and the latest round trip of a handshake this host sent it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EndpointPath {
    /// Interface index (an underlay).
    pub ifindex: u32,
    /// The remote endpoint (a peer's).
    pub endpoint: SocketAddr,
    /// Sessions (receiver indexes) with messages from it.
    pub sessions: usize,
    /// Messages it sent (its counters' advance).
    pub expected: u64,
    /// Of those, received.
    pub received: u64,
    /// Of those, lost on the way.
    pub lost: u64,
    /// lost / expected in percent; -1 when nothing was expected.
    pub loss_percent: f64,
    /// Round trip of the latest handshake with it, ms; -1 if none was timed.
    pub rtt_ms: f64,
    /// How long ago that handshake completed, seconds; -1 if none.
    pub rtt_age_s: i64,
}

/// `sessions` grouped by the endpoint they come from, with the latest round trip of the
/// `handshakes` this host sent each endpoint; `now_mono_ns` dates them. Busiest first.
pub fn by_endpoint(
    sessions: &[WgSession],
    handshakes: &[WgHandshake],
    now_mono_ns: u64,
) -> Vec<EndpointPath> {
    // Each row with when its round trip's handshake completed.
    let mut rows: HashMap<(u32, SocketAddr), (EndpointPath, u64)> = HashMap::new();
    fn row(
        rows: &mut HashMap<(u32, SocketAddr), (EndpointPath, u64)>,
        ifindex: u32,
        endpoint: SocketAddr,
    ) -> &mut (EndpointPath, u64) {
        let endpoint = SocketAddr::new(endpoint.ip().to_canonical(), endpoint.port());
        rows.entry((ifindex, endpoint)).or_insert_with(|| {
            let empty = EndpointPath {
                ifindex,
                endpoint,
                sessions: 0,
                expected: 0,
                received: 0,
                lost: 0,
                loss_percent: -1.0,
                rtt_ms: -1.0,
                rtt_age_s: -1,
            };
            (empty, 0)
        })
    }
    for s in sessions {
        let (r, _) = row(&mut rows, s.ifindex, s.source);
        r.sessions += 1;
        r.expected += s.expected;
        r.received += s.received;
        r.lost += s.lost();
    }
    for h in handshakes {
        let (Some(rtt), Some(at)) = (h.rtt_ns(), h.answered_mono_ns) else {
            continue;
        };
        let (r, latest) = row(&mut rows, h.ifindex, h.peer);
        if at > *latest {
            *latest = at;
            r.rtt_ms = rtt as f64 / 1e6;
            r.rtt_age_s =
                i64::try_from(now_mono_ns.saturating_sub(at) / 1_000_000_000).unwrap_or(-1);
        }
    }
    let mut out: Vec<EndpointPath> = rows
        .into_values()
        .map(|(mut r, _)| {
            if r.expected > 0 {
                r.loss_percent = r.lost as f64 * 100.0 / r.expected as f64;
            }
            r
        })
        .collect();
    out.sort_by(|a, b| {
        b.expected
            .cmp(&a.expected)
            .then(a.endpoint.cmp(&b.endpoint))
    });
    out
}

/// CLOCK_MONOTONIC now, in nanoseconds: what the data plane's times count in.
pub fn mono_now_ns() -> u64 {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
        .map(|t| t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64)
        .unwrap_or(0)
}

/// The session a flow cache slot holds, as the table would hold it: the key, and this CPU's
/// value with the slot's flow as the source (the peer's endpoint).
fn slot_session(s: &nd_flow_slot) -> Option<(nd_wg_key, nd_wg_rx)> {
    if s.used == 0 || s.wg.packets == 0 {
        return None;
    }
    let key = nd_wg_key {
        ifindex: s.key.ifindex,
        index: s.wg_index,
    };
    let rx = nd_wg_rx {
        c: s.wg,
        last_j: s.wg_last_j,
        sport: s.key.sport,
        family: s.key.family,
        saddr: s.key.saddr,
        ..Default::default()
    };
    Some((key, rx))
}

/// The sessions of the table's per-CPU values and the flow cache's slots together.
fn merge(table: Vec<(nd_wg_key, Vec<nd_wg_rx>)>, slots: &[SlotCopy]) -> Vec<WgSession> {
    let mut parts: HashMap<(u32, u32), (nd_wg_key, Vec<nd_wg_rx>)> = table
        .into_iter()
        .map(|(k, v)| ((k.ifindex, k.index), (k, v)))
        .collect();
    for (k, rx) in slots.iter().flatten().filter_map(slot_session) {
        parts
            .entry((k.ifindex, k.index))
            .or_insert_with(|| (k, Vec::new()))
            .1
            .push(rx);
    }
    parts
        .values()
        .filter_map(|(k, v)| WgSession::from_cpus(k, v))
        .collect()
}

/// Every WireGuard session the underlays received: the flow cache's slots (`cache`) and
/// the table's (`wg_rx`) values of every CPU added up.
pub(super) fn sessions(wg_rx: &impl MapCore, cache: &SlotView) -> Result<Vec<WgSession>> {
    let mut attempt = 1;
    loop {
        let before = cache.copy_all();
        let table = read_table(wg_rx)?;
        let after = cache.copy_all();
        if attempt == ATTEMPTS || settled(&before, &after) {
            return Ok(merge(table, &after));
        }
        attempt += 1;
    }
}

/// The table's sessions, each with its per-CPU values.
fn read_table(map: &impl MapCore) -> Result<Vec<(nd_wg_key, Vec<nd_wg_rx>)>> {
    let err = |source| Error::Map {
        map: "wg_rx",
        source,
    };
    let mut out = Vec::new();
    for key in map.keys() {
        let Some(k) = decode::<nd_wg_key>(&key) else {
            continue;
        };
        // An entry evicted between listing and reading is gone: skipped.
        let Some(values) = map.lookup_percpu(&key, MapFlags::ANY).map_err(err)? else {
            continue;
        };
        out.push((k, values.iter().filter_map(|v| decode(v)).collect()));
    }
    Ok(out)
}

/// Every handshake message this host sent that the table still holds.
pub(super) fn handshakes(map: &impl MapCore) -> Result<Vec<WgHandshake>> {
    let err = |source| Error::Map {
        map: "wg_hs",
        source,
    };
    let mut out = Vec::new();
    for key in map.keys() {
        let (Ok(bytes), Some(value)) = (
            <[u8; 4]>::try_from(key.as_slice()),
            map.lookup(&key, MapFlags::ANY).map_err(err)?,
        ) else {
            continue;
        };
        if let Some(v) = decode::<nd_wg_hs>(&value) {
            out.extend(WgHandshake::from_raw(u32::from_ne_bytes(bytes), &v));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::views::nd_wg_ctr;

    fn cpu(high: u64, low: u64, packets: u32) -> nd_wg_rx {
        let mut v = nd_wg_rx {
            c: nd_wg_ctr {
                high,
                low,
                packets,
                ..Default::default()
            },
            sport: 51820,
            family: 4,
            ..Default::default()
        };
        v.saddr[..4].copy_from_slice(&[192, 0, 2, 2]);
        v
    }

    #[test]
    fn cpus_add_up_and_windows_take_the_advance() {
        let key = nd_wg_key {
            ifindex: 2,
            index: 7,
        };
        // Two CPUs took turns; a third saw nothing (its value is zero, not a counter 0).
        let s = WgSession::from_cpus(&key, &[cpu(99, 1, 50), cpu(100, 0, 45), cpu(0, 0, 0)])
            .expect("seen");
        assert_eq!((s.low, s.high, s.expected, s.received), (0, 100, 101, 95));
        assert_eq!(s.lost(), 6);
        assert_eq!(s.source, "192.0.2.2:51820".parse().expect("addr"));

        let later =
            WgSession::from_cpus(&key, &[cpu(299, 1, 150), cpu(300, 0, 145)]).expect("seen");
        let w = later.since(&s);
        assert_eq!((w.expected, w.received, w.lost()), (200, 200, 0));
        // Late messages beyond what the window expected: no negative loss.
        let late = WgSession {
            received: later.received + 3,
            ..later.clone()
        };
        assert_eq!(late.since(&later).lost(), 0);
        // Evicted and started again: counted as new, not as a huge loss.
        let again = WgSession::from_cpus(&key, &[cpu(310, 305, 6)]).expect("seen");
        let w = again.since(&later);
        assert_eq!((w.expected, w.received), (6, 6));
        // ... also once it has received more than before the eviction.
        let grown = WgSession::from_cpus(&key, &[cpu(900, 305, 596)]).expect("seen");
        assert_eq!(grown.since(&later).lost(), 0);
        assert!(WgSession::from_cpus(&key, &[cpu(0, 0, 0)]).is_none());
    }
}

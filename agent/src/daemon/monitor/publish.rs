//! Publishing a window to the view the API and metrics read.

use std::collections::{BTreeMap, HashMap};

use crate::config::iface::Interface;
use crate::daemon::state::{DropView, Health, LimitTotals, Rates, SocketView, View};
use crate::facts::Facts;
use crate::kernel::drops::{DropCount, DropProbe, NOT_NETWORK_DROPS};
use crate::kernel::packet;
use crate::kernel::packet::counters::IfaceCounters;
use crate::kernel::prog_stats::{self, ProgramRuns};
use crate::kernel::sockets::rates::SocketRow;

use super::{now_ms, Monitor, Role};

impl Monitor<'_> {
    /// Replaces the view with this window's figures.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn publish_window(
        &self,
        dp_now: &packet::Snapshot,
        window: &packet::Snapshot,
        evaluated: &[(Interface, Facts)],
        rows: Option<&[SocketRow]>,
        drops_now: &[DropCount],
        active: &[crate::daemon::store::StoredFinding],
        secs: f64,
        now: i64,
    ) {
        let names: HashMap<u32, String> = self
            .watched
            .values()
            .map(|w| (w.iface.index, w.iface.name.clone()))
            .collect();
        let name_of = |idx: u32| names.get(&idx).cloned().unwrap_or_default();
        // The kernel counts runs only while its statistics are on: read the switch, never
        // turn it (prog_stats).
        let stats_on = prog_stats::stats_enabled();
        let program_stats = self.program_stats();

        let mut view = self.shared.view_mut();
        publish_counters(&mut view, dp_now, window, &name_of, secs, now);
        publish_facts(&mut view, evaluated, active);
        view.flows = dp_now.flows.clone();
        view.flow_interfaces = names.clone();
        if let Some(rows) = rows {
            publish_sockets(&mut view, rows, &name_of);
        }
        // Series of interfaces that are gone end with them, so churn (containers' veths)
        // cannot grow the label set without bound.
        let present = |name: &String| names.values().any(|n| n == name);
        view.tcp.retain(|(name, _), _| present(name));
        view.srtt.retain(|name, _| present(name));
        view.limits.retain(|(name, _), _| present(name));
        view.drops = drop_views(&self.prev_drops, drops_now, &name_of, self.drops.as_ref());
        view.active = active.to_vec();
        // The snapshot read the table: its entries are the table's fill.
        publish_health(&mut view.health, dp_now.flow_table, stats_on, program_stats);
    }

    /// Lists every interface in the view, keeping what the last evaluation learnt.
    pub(super) fn publish_interfaces(&self, all: &[Interface]) {
        let mut view = self.shared.view_mut();
        let mut next = BTreeMap::new();
        for i in all {
            let w = self.watched.get(&i.index);
            let mut entry = view
                .interfaces
                .remove(&i.name)
                .filter(|v| v.index == i.index)
                .unwrap_or_else(|| crate::daemon::state::IfaceView {
                    name: i.name.clone(),
                    index: i.index,
                    kind: i.kind.to_string(),
                    mtu: i.mtu,
                    up: i.up,
                    watched: false,
                    hooks: None,
                    counters: IfaceCounters::default(),
                    rates: Rates::default(),
                    facts: None,
                    worst_severity: None,
                    updated_ms: now_ms(),
                });
            entry.kind = i.kind.to_string();
            entry.mtu = i.mtu;
            entry.up = i.up;
            entry.watched = w.is_some_and(|w| w.role == Role::Selected);
            entry.hooks = self.dp.as_ref().and_then(|dp| dp.hooks(i.index)).cloned();
            if !entry.watched {
                entry.facts = None;
                entry.worst_severity = None;
            }
            next.insert(i.name.clone(), entry);
        }
        view.interfaces = next;
        view.health.programs_attached = self
            .watched
            .keys()
            .filter_map(|idx| self.dp.as_ref().and_then(|dp| dp.hooks(*idx)))
            .count() as u64
            * 2;
    }

    /// The run statistics of the loaded programs (their run counts mean something only
    /// while the kernel's statistics are on; their skipped runs always do).
    fn program_stats(&self) -> Vec<ProgramRuns> {
        let dp = self.dp.as_ref().map(|dp| dp.program_stats());
        let sockets = self.sockets.as_ref().map(|s| s.program_stats());
        let drops = self.drops.as_ref().map(|d| d.program_stats());
        [dp, sockets, drops]
            .into_iter()
            .flatten()
            .flatten()
            .collect()
    }
}

/// Each watched interface's counters and its rates over the window.
fn publish_counters(
    view: &mut View,
    dp_now: &packet::Snapshot,
    window: &packet::Snapshot,
    name_of: &dyn Fn(u32) -> String,
    secs: f64,
    now: i64,
) {
    for (idx, counters) in &dp_now.counters {
        let Some(entry) = view.interfaces.get_mut(&name_of(*idx)) else {
            continue;
        };
        let w = window.counters(*idx);
        let per_s = |v: u64| if secs > 0.0 { v as f64 / secs } else { 0.0 };
        entry.counters = counters.clone();
        entry.rates = Rates {
            rx_bps: per_s(w.ingress.bytes) * 8.0,
            tx_bps: per_s(w.egress.bytes) * 8.0,
            rx_pps: per_s(w.ingress.segments),
            tx_pps: per_s(w.egress.segments),
        };
        entry.updated_ms = now;
    }
}

/// The evaluated interfaces' facts, worst active severity and peer handshake ages; the
/// handshakes of interfaces not evaluated are dropped.
fn publish_facts(
    view: &mut View,
    evaluated: &[(Interface, Facts)],
    active: &[crate::daemon::store::StoredFinding],
) {
    for (me, facts) in evaluated {
        if let Some(entry) = view.interfaces.get_mut(&me.name) {
            entry.facts = Some(facts.clone());
            entry.worst_severity = active
                .iter()
                .filter(|f| f.interface == me.name)
                .map(|f| f.severity)
                .max();
        }
        view.handshakes.insert(
            me.name.clone(),
            facts
                .peers
                .iter()
                .filter(|p| facts.tunnel.kind == "wireguard" || p.handshake_age_s >= 0)
                .map(|p| (p.name.clone(), p.handshake_age_s))
                .collect(),
        );
    }
    view.handshakes
        .retain(|name, _| evaluated.iter().any(|(me, _)| &me.name == name));
}

/// The window's connections: the socket list, the retransmit totals and last ratio per
/// (interface, congestion control), the limit tally and the smoothed-RTT histograms.
fn publish_sockets(view: &mut View, rows: &[SocketRow], name_of: &dyn Fn(u32) -> String) {
    view.sockets = rows
        .iter()
        .map(|r| SocketView {
            interface: name_of(r.socket.ifindex),
            row: r.clone(),
        })
        .collect();
    // The ratio is the last window's: pairs without connections in it read 0.
    for t in view.tcp.values_mut() {
        t.last_ratio = 0.0;
    }
    for (name, ratio_rows) in by_iface_cc(rows, name_of) {
        let t = view.tcp.entry(name).or_default();
        t.segments += ratio_rows.0;
        t.retransmits += ratio_rows.1;
        t.last_ratio = if ratio_rows.0 > 0 {
            ratio_rows.1 as f64 / ratio_rows.0 as f64
        } else {
            0.0
        };
    }
    tally_limits(&mut view.limits, rows, name_of);
    for r in rows
        .iter()
        .filter(|r| r.socket.srtt_us > 0 && r.socket.ifindex != 0)
    {
        let name = name_of(r.socket.ifindex);
        if !name.is_empty() {
            view.srtt
                .entry(name)
                .or_default()
                .observe(f64::from(r.socket.srtt_us) / 1e6);
        }
    }
}

/// The agent's own health: the flow table's fill, the programs' run counts (while the
/// kernel's statistics are on) and skipped runs, and the time of this evaluation.
fn publish_health(
    health: &mut Health,
    table: packet::flow_table::FlowTableUse,
    stats_on: Option<bool>,
    program_stats: Vec<ProgramRuns>,
) {
    health.map_fill = BTreeMap::from([(
        "flows".to_owned(),
        if table.capacity > 0 {
            table.entries as f64 / table.capacity as f64
        } else {
            0.0
        },
    )]);
    health.flow_table = table;
    health.bpf_stats_enabled = stats_on;
    health.program_misses.clear();
    for p in &program_stats {
        *health.program_misses.entry(p.name.clone()).or_default() += p.missed;
    }
    health.program_stats = if stats_on == Some(true) {
        program_stats
            .into_iter()
            .map(|p| (p.name, (p.runs, p.run_ns)))
            .collect()
    } else {
        BTreeMap::new()
    };
    health.last_evaluation_ms = now_ms();
}

/// Counts the window's connections per (interface name, limit), replacing the last window's
/// counts (pairs without connections now read 0), and adds the bytes they acknowledged.
fn tally_limits(
    limits: &mut BTreeMap<(String, &'static str), LimitTotals>,
    rows: &[SocketRow],
    name_of: &dyn Fn(u32) -> String,
) {
    for t in limits.values_mut() {
        t.connections = 0;
    }
    for r in rows {
        let name = name_of(r.socket.ifindex);
        if name.is_empty() {
            continue;
        }
        let t = limits.entry((name, r.limits.limit.as_str())).or_default();
        t.connections += 1;
        t.bytes += r.window_bytes_acked;
    }
}

/// Sums window rows per (interface name, congestion control): (segments, retransmits).
fn by_iface_cc(
    rows: &[SocketRow],
    name_of: &dyn Fn(u32) -> String,
) -> BTreeMap<(String, String), (u64, u64)> {
    let mut out: BTreeMap<(String, String), (u64, u64)> = BTreeMap::new();
    for r in rows {
        let name = name_of(r.socket.ifindex);
        if name.is_empty() {
            continue;
        }
        let e = out.entry((name, r.socket.cc.clone())).or_default();
        e.0 += r.data_segs_sent;
        e.1 += r.retransmits;
    }
    out
}

/// Drops since the agent started and in the last window, by interface name and reason.
fn drop_views(
    before: &[DropCount],
    now: &[DropCount],
    name_of: &dyn Fn(u32) -> String,
    probe: Option<&DropProbe<'_>>,
) -> Vec<DropView> {
    if probe.is_none() {
        return Vec::new();
    }
    let window = crate::kernel::drops::delta(before, now);
    let mut out: BTreeMap<(String, String), (u64, u64)> = BTreeMap::new();
    for d in now
        .iter()
        .filter(|d| !NOT_NETWORK_DROPS.contains(&d.reason.as_str()))
    {
        out.entry((name_of(d.ifindex), d.reason.clone()))
            .or_default()
            .0 += d.packets;
    }
    for d in window
        .iter()
        .filter(|d| !NOT_NETWORK_DROPS.contains(&d.reason.as_str()))
    {
        out.entry((name_of(d.ifindex), d.reason.clone()))
            .or_default()
            .1 += d.packets;
    }
    out.into_iter()
        .map(|((interface, reason), (total, last))| DropView {
            interface,
            reason,
            packets_total: total,
            packets_last_window: last,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::sockets::limits::{Limit, Limits};
    use crate::kernel::sockets::Socket;

    fn row(ifindex: u32, limit: Limit, acked: u64) -> SocketRow {
        let mut socket = Socket::sample(u64::from(ifindex) * 100 + acked);
        socket.ifindex = ifindex;
        let mut r = SocketRow::sample(
            socket,
            Limits {
                limit,
                ..Limits::default()
            },
        );
        r.window_bytes_acked = acked;
        r
    }

    #[test]
    fn connections_are_the_last_windows_and_bytes_add_up() {
        let name_of = |i: u32| match i {
            3 => "wg0".to_owned(),
            _ => String::new(),
        };
        let mut limits = BTreeMap::new();
        let first = [
            row(3, Limit::ReceiverWindow, 1000),
            row(3, Limit::ReceiverWindow, 500),
            row(3, Limit::Application, 7),
            row(9, Limit::Congestion, 100), // an interface no longer known
        ];
        tally_limits(&mut limits, &first, &name_of);
        let get = |l: &BTreeMap<(String, &'static str), LimitTotals>, k: &'static str| {
            l.get(&("wg0".to_owned(), k)).copied().unwrap_or_default()
        };
        assert_eq!(
            get(&limits, "receiver_window"),
            LimitTotals {
                connections: 2,
                bytes: 1500
            }
        );
        assert_eq!(limits.len(), 2, "{limits:?}");
        tally_limits(&mut limits, &[row(3, Limit::Congestion, 40)], &name_of);
        assert_eq!(
            get(&limits, "receiver_window"),
            LimitTotals {
                connections: 0,
                bytes: 1500
            }
        );
        assert_eq!(get(&limits, "congestion").connections, 1);
        assert_eq!(get(&limits, "application").bytes, 7);
    }
}

//! One interface's sample of one window, as the history keeps it.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::config::iface::Interface;
use crate::daemon::store::{CcRetrans, Sample};
use crate::facts::Facts;
use crate::kernel::packet::counters::{bucket_label, IfaceCounters};
use crate::kernel::sockets::rates::SocketRow;

/// One interface's sample of one window.
pub(super) fn sample(
    me: &Interface,
    facts: &Facts,
    w: &IfaceCounters,
    rows: Option<&[SocketRow]>,
    active_findings: usize,
    elapsed: Duration,
    now: i64,
) -> Sample {
    let secs = elapsed.as_secs_f64().max(1e-3);
    let mut size_buckets = BTreeMap::new();
    for dir in [&w.ingress, &w.egress] {
        for (i, v) in dir.size_buckets.iter().enumerate() {
            *size_buckets.entry(bucket_label(i)).or_insert(0) += v;
        }
    }
    let mut retrans_by_cc: BTreeMap<String, CcRetrans> = BTreeMap::new();
    for r in rows
        .unwrap_or_default()
        .iter()
        .filter(|r| r.socket.ifindex == me.index)
    {
        let e = retrans_by_cc.entry(r.socket.cc.clone()).or_default();
        e.segments += r.data_segs_sent;
        e.retransmits += r.retransmits;
    }
    for e in retrans_by_cc.values_mut() {
        e.ratio = if e.segments > 0 {
            e.retransmits as f64 / e.segments as f64
        } else {
            0.0
        };
    }
    Sample {
        ts_ms: now,
        interface: me.name.clone(),
        window_s: secs,
        rx_bps: w.ingress.bytes as f64 * 8.0 / secs,
        tx_bps: w.egress.bytes as f64 * 8.0 / secs,
        rx_pps: w.ingress.segments as f64 / secs,
        tx_pps: w.egress.segments as f64 / secs,
        mtu: i64::from(me.mtu),
        size_buckets,
        retrans_by_cc,
        tcp_retrans_ratio: facts.traffic.tcp_retrans_ratio,
        drops_by_reason: facts
            .drops
            .by_reason
            .iter()
            .map(|(k, v)| (k.clone(), u64::try_from(*v).unwrap_or(0)))
            .collect(),
        overhead_expected: facts.tunnel.overhead_expected,
        overhead_measured: facts.tunnel.overhead_measured,
        path_mtu: facts.probe.path_mtu,
        probe_blackhole: facts.probe.blackhole,
        active_findings: active_findings as u64,
        wireguard_peers: Vec::new(),
    }
}

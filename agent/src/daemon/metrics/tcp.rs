//! Local TCP connections' series (by congestion control and by what limited them, the
//! smoothed RTT histogram) and the kernel's drops by reason.

use super::out::Out;
use crate::daemon::state::{View, SRTT_BUCKETS};

/// Puts the TCP and drop series of the view.
pub(super) fn tcp_and_drops(out: &mut Out, view: &View) {
    for ((iface, cc), t) in &view.tcp {
        out.put(
            "netdoctor_tcp_data_segments_total",
            &[iface, cc],
            t.segments as f64,
        );
        out.put(
            "netdoctor_tcp_retransmits_total",
            &[iface, cc],
            t.retransmits as f64,
        );
        out.put("netdoctor_tcp_retransmit_ratio", &[iface, cc], t.last_ratio);
    }
    for ((iface, limit), t) in &view.limits {
        out.put(
            "netdoctor_tcp_connections",
            &[iface, limit],
            t.connections as f64,
        );
        out.put(
            "netdoctor_tcp_limited_bytes_total",
            &[iface, limit],
            t.bytes as f64,
        );
    }
    for (iface, h) in &view.srtt {
        // The encoder adds the +Inf bucket from the sample count.
        out.histogram(
            "netdoctor_tcp_srtt_seconds",
            &[iface],
            &SRTT_BUCKETS,
            &h.counts,
            h.sum,
        );
    }
    for d in &view.drops {
        out.put(
            "netdoctor_drops_total",
            &[&d.interface, &d.reason],
            d.packets_total as f64,
        );
    }
}

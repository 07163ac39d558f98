//! Per-interface series: the hooks' counters by direction, and from the window's facts the
//! tunnel's overhead and MTUs and the last path-MTU probe.

use super::out::Out;
use crate::daemon::state::View;
use crate::kernel::packet::counters::{DirCounters, SIZE_BUCKET_BOUNDS};

/// Puts the series of every watched interface.
pub(super) fn interfaces(out: &mut Out, view: &View) {
    for v in view.interfaces.values().filter(|v| v.watched) {
        let name = v.name.as_str();
        out.put("netdoctor_interface_info", &[name, &v.kind], 1.0);
        out.put("netdoctor_interface_mtu_bytes", &[name], f64::from(v.mtu));
        direction(out, name, "rx", &v.counters.ingress);
        direction(out, name, "tx", &v.counters.egress);
        out.put(
            "netdoctor_interface_icmp_too_big_total",
            &[name],
            (v.counters.ingress.icmp_frag_needed + v.counters.ingress.icmp6_packet_too_big) as f64,
        );
        if let Some(facts) = &v.facts {
            facts_series(out, name, facts);
        }
    }
}

/// The series an interface's window facts give: retransmissions seen in packets, the tunnel's
/// overhead and MTUs, the path-MTU probe.
fn facts_series(out: &mut Out, name: &str, facts: &crate::facts::Facts) {
    out.put(
        "netdoctor_tcp_forwarded_retransmit_ratio",
        &[name],
        facts.traffic.tcp_retrans_ratio,
    );
    let t = &facts.tunnel;
    if t.present {
        for (source, bytes) in [
            ("expected", t.overhead_expected),
            ("measured", t.overhead_measured),
        ] {
            if bytes >= 0 {
                out.put(
                    "netdoctor_tunnel_overhead_bytes",
                    &[name, source],
                    bytes as f64,
                );
                if t.effective_underlay_mtu > 0 {
                    out.put(
                        "netdoctor_tunnel_overhead_ratio",
                        &[name, source],
                        bytes as f64 / t.effective_underlay_mtu as f64,
                    );
                }
            }
        }
        if t.underlay_mtu > 0 {
            out.put(
                "netdoctor_tunnel_underlay_mtu_bytes",
                &[name],
                t.underlay_mtu as f64,
            );
        }
        if t.max_mtu > 0 {
            out.put("netdoctor_tunnel_max_mtu_bytes", &[name], t.max_mtu as f64);
        }
    }
    if facts.probe.ran {
        out.put(
            "netdoctor_path_mtu_bytes",
            &[name],
            facts.probe.path_mtu as f64,
        );
        out.put(
            "netdoctor_path_mtu_blackhole",
            &[name],
            f64::from(u8::from(facts.probe.blackhole)),
        );
    }
}

/// The hooks' counters of one direction.
fn direction(out: &mut Out, iface: &str, dir: &str, c: &DirCounters) {
    let f = |v: u64| v as f64;
    out.put(
        "netdoctor_interface_packets_total",
        &[iface, dir],
        f(c.packets),
    );
    out.put(
        "netdoctor_interface_segments_total",
        &[iface, dir],
        f(c.segments),
    );
    out.put("netdoctor_interface_bytes_total", &[iface, dir], f(c.bytes));
    out.put(
        "netdoctor_interface_fragments_total",
        &[iface, dir],
        f(c.fragments()),
    );
    out.put(
        "netdoctor_interface_df_over_mtu_total",
        &[iface, dir],
        f(c.df_over_mtu),
    );
    out.put(
        "netdoctor_interface_local_tcp_segments_total",
        &[iface, dir],
        f(c.local_tcp_segments),
    );
    out.put(
        "netdoctor_interface_local_tcp_retransmits_total",
        &[iface, dir],
        f(c.local_tcp_retransmits),
    );
    for (i, n) in c.size_buckets.iter().enumerate() {
        let le = SIZE_BUCKET_BOUNDS
            .get(i)
            .map_or_else(|| "+Inf".to_owned(), ToString::to_string);
        out.put(
            "netdoctor_interface_segment_size_total",
            &[iface, dir, &le],
            f(*n),
        );
    }
}

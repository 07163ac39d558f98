//! The human-readable report of `netdoctor flows`.

use comfy_table::{CellAlignment, Table};

use super::flows_report::FlowsReport;
use super::limits::LimitView;
use super::path_output;
use super::table::{human_bytes, right_align, table};
use crate::kernel::packet::counters::DirCounters;

fn counter_rows(t: &mut Table, name: &str, c: &DirCounters, secs: f64) {
    let rate = if secs > 0.0 {
        c.bytes as f64 * 8.0 / secs / 1e6
    } else {
        0.0
    };
    t.add_row(vec![
        name.to_string(),
        c.packets.to_string(),
        c.segments.to_string(),
        human_bytes(c.bytes),
        format!("{rate:.2}"),
        (c.fragments_first + c.fragments_later).to_string(),
        c.df_over_mtu.to_string(),
        (c.icmp_frag_needed + c.icmp6_packet_too_big).to_string(),
        c.truncated.to_string(),
    ]);
}

/// Prints the report of `netdoctor flows`.
pub(super) fn print_flows(r: &FlowsReport) {
    print_header(r);
    print_counters(r);
    print_sizes(r);
    print_flow_table(r);
    print_sockets(r);
    if r.close_events_lost > 0 {
        println!(
            "{}",
            crate::kernel::sockets::lost_closes_note(r.close_events_lost)
        );
    }
    if r.retransmit_events_missed > 0 {
        println!(
            "{}",
            crate::kernel::sockets::missed_retransmits_note(r.retransmit_events_missed)
        );
    }
    print_tunnels(r);
    if let Some(tp) = &r.tunnel {
        path_output::print_peers(&r.interface.name, tp, &r.wireguard_paths);
    }
    path_output::print_unmatched(r);
    print_too_big(r);
}

/// The interface line: what was observed, for how long, through which hooks.
fn print_header(r: &FlowsReport) {
    let i = &r.interface;
    println!(
        "{} (index {}, {}, MTU {}, {}) observed {:.1}s; ingress hook {}, egress hook {}",
        i.name,
        i.index,
        i.kind,
        i.mtu,
        if i.up { "up" } else { "DOWN" },
        r.duration_s,
        r.hooks.ingress,
        r.hooks.egress
    );
    println!();
}

/// The per-direction counters, and the note on this host's own TCP segments.
fn print_counters(r: &FlowsReport) {
    let mut t = table(&[
        "dir",
        "packets",
        "segments",
        "bytes",
        "Mbit/s",
        "frags",
        "DF>MTU",
        "too-big",
        "truncated",
    ]);
    counter_rows(&mut t, "in", &r.counters.ingress, r.duration_s);
    counter_rows(&mut t, "out", &r.counters.egress, r.duration_s);
    right_align(&mut t, 1);
    println!("{t}\n");
    let (lin, lout) = (&r.counters.ingress, &r.counters.egress);
    if lin.local_tcp_segments + lout.local_tcp_segments > 0 {
        println!(
            "This host's own TCP connections (local path: counted per interface, no flow \
             records; each is listed under Local TCP connections below): {} segments in, {} of \
             them carrying data seen before; {} out (their retransmissions are the connections').\n",
            lin.local_tcp_segments,
            lin.local_tcp_retransmits,
            lout.local_tcp_segments
        );
    }
}

/// The segment-size histogram, only the buckets that saw a segment.
fn print_sizes(r: &FlowsReport) {
    let mut sizes = table(&["segment size", "in", "out"]);
    for (idx, label) in r.size_buckets.iter().enumerate() {
        let inn = r
            .counters
            .ingress
            .size_buckets
            .get(idx)
            .copied()
            .unwrap_or(0);
        let out = r
            .counters
            .egress
            .size_buckets
            .get(idx)
            .copied()
            .unwrap_or(0);
        if inn + out > 0 {
            sizes.add_row(vec![label.clone(), inn.to_string(), out.to_string()]);
        }
    }
    if sizes.row_count() > 0 {
        right_align(&mut sizes, 1);
        println!("{sizes}\n");
    }
}

/// The top IP flows by bytes, with the eviction note when the table was full.
fn print_flow_table(r: &FlowsReport) {
    if r.flows.is_empty() {
        println!("No IP flows seen.");
        return;
    }
    println!("Top {} of {} flows by bytes:", r.flows.len(), r.flows_total);
    if r.flow_table.evictions > 0 {
        println!(
            "The flow table ({} flows, --max-flows) was full and evicted {} flows: their \
             figures restarted from zero.",
            r.flow_table.capacity, r.flow_table.evictions
        );
    }
    let mut t = table(&[
        "dir",
        "proto",
        "source",
        "destination",
        "packets",
        "bytes",
        "max seg",
        "SYN MSS",
        "retrans",
        "encap",
    ]);
    for f in &r.flows {
        t.add_row(vec![
            format!("{:?}", f.direction).to_lowercase(),
            f.protocol_name(),
            endpoint(&f.src, f.src_port, f.protocol),
            endpoint(&f.dst, f.dst_port, f.protocol),
            f.segments.to_string(),
            human_bytes(f.bytes),
            f.max_segment.to_string(),
            f.syn_mss.map(|m| m.to_string()).unwrap_or_default(),
            if f.protocol == 6 {
                f.retransmits.to_string()
            } else {
                String::new()
            },
            if f.encap == crate::kernel::views::Encap::None {
                String::new()
            } else {
                format!("{:?}", f.encap).to_lowercase()
            },
        ]);
    }
    right_align(&mut t, 4);
    println!("{t}");
}

/// The local TCP connections through the interface, what limits each, and
/// the per-congestion-control summary when more than one is in use.
fn print_sockets(r: &FlowsReport) {
    if r.sockets.is_empty() {
        return;
    }
    println!(
        "\nLocal TCP connections through {} ({}):",
        r.interface.name,
        cc_summary(r)
    );
    let mut t = table(&[
        "local",
        "remote",
        "state",
        "cc",
        "srtt ms",
        "cwnd",
        "retrans",
        "ratio",
        "pmtu",
        "mss",
        "Mbit/s",
        "limited by",
    ]);
    let shown: Vec<_> = r.sockets.iter().take(r.flows.len().max(20)).collect();
    for s in &shown {
        let k = &s.socket;
        t.add_row(vec![
            k.local.to_string(),
            k.remote.to_string(),
            if s.closed {
                "closed".to_string()
            } else {
                k.state.to_string()
            },
            k.cc.clone(),
            format!("{:.2}", f64::from(k.srtt_us) / 1000.0),
            k.cwnd.to_string(),
            s.retransmits.to_string(),
            format!("{:.2}%", s.retrans_ratio * 100.0),
            k.pmtu.to_string(),
            k.mss.to_string(),
            format!("{:.2}", s.throughput_bps / 1e6),
            LimitView::from(*s).cell(),
        ]);
    }
    right_align(&mut t, 4);
    if let Some(c) = t.column_mut(11) {
        c.set_cell_alignment(CellAlignment::Left);
    }
    println!("{t}");
    for s in &shown {
        if let Some(d) = LimitView::from(*s).detail() {
            println!("  {} -> {}: {d}", s.socket.local, s.socket.remote);
        }
    }
    if r.congestion_control.len() > 1 {
        print_cc_table(r);
    }
}

/// The connections grouped by congestion-control algorithm.
fn print_cc_table(r: &FlowsReport) {
    let mut t = table(&[
        "cc",
        "connections",
        "segments sent",
        "retrans",
        "ratio",
        "Mbit/s",
    ]);
    for a in &r.congestion_control {
        t.add_row(vec![
            a.cc.clone(),
            a.sockets.to_string(),
            a.data_segs_sent.to_string(),
            a.retransmits.to_string(),
            format!("{:.2}%", a.retrans_ratio * 100.0),
            format!("{:.2}", a.throughput_bps / 1e6),
        ]);
    }
    right_align(&mut t, 1);
    println!("{t}");
}

/// The outer packets of tunnels carried on the interface.
fn print_tunnels(r: &FlowsReport) {
    if r.tunnels.is_empty() {
        return;
    }
    println!("\nTunnel traffic on this interface (outer packets):");
    let mut t = table(&[
        "dir",
        "encap",
        "from",
        "to",
        "packets",
        "bytes",
        "wg init/resp/data",
    ]);
    for tt in &r.tunnels {
        t.add_row(vec![
            format!("{:?}", tt.direction).to_lowercase(),
            format!("{:?}", tt.encap).to_lowercase(),
            format!("{}:{}", tt.src, tt.src_port),
            format!("{}:{}", tt.dst, tt.dst_port),
            tt.packets.to_string(),
            human_bytes(tt.bytes),
            format!(
                "{}/{}/{}",
                tt.wireguard.initiation, tt.wireguard.response, tt.wireguard.data
            ),
        ]);
    }
    println!("{t}");
}

/// The ICMP too-big messages seen, with the flow each one was about.
fn print_too_big(r: &FlowsReport) {
    if r.too_big.is_empty() {
        return;
    }
    println!("\nICMP too-big messages (path MTU reports):");
    let mut t = table(&["dir", "from router", "MTU", "count", "for flow"]);
    for p in &r.too_big {
        t.add_row(vec![
            format!("{:?}", p.direction).to_lowercase(),
            p.from.to_string(),
            p.mtu.to_string(),
            p.count.to_string(),
            format!(
                "{} -> {}",
                endpoint(&p.src, p.src_port, p.protocol),
                endpoint(&p.dst, p.dst_port, p.protocol)
            ),
        ]);
    }
    println!("{t}");
}

fn cc_summary(r: &FlowsReport) -> String {
    let cc = &r.congestion_control_sysctl;
    format!(
        "default cc {}, available: {}",
        cc.default.as_deref().unwrap_or("?"),
        if cc.available.is_empty() {
            "?".into()
        } else {
            cc.available.join(" ")
        }
    )
}

fn endpoint(addr: &std::net::IpAddr, port: u16, proto: u8) -> String {
    match (proto, addr) {
        (6 | 17, std::net::IpAddr::V6(a)) => format!("[{a}]:{port}"),
        (6 | 17, a) => format!("{a}:{port}"),
        _ => addr.to_string(),
    }
}

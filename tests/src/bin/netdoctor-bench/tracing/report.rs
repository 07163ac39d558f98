//! The tracing section's text table and JSON.

use serde_json::{json, Value};

use crate::args::Side;
use crate::programs::Counter;
use crate::report::fmt_opt;
use crate::tracing::load::SHORT_CONN_BYTES;
use crate::tracing::programs::ND_ITER_TCP;
use crate::tracing::{Tracing, TRACING_IDLE};

impl Tracing {
    pub(crate) fn print_text(&self, side: Side, packet_floor: Option<f64>) {
        let ns = side.namespace();
        println!("Tracing programs (ns per event = Δrun_time_ns / Δrun_cnt; raw, see floor)");
        println!(
            "  load:  iperf3 a→b 1 stream with {} % random loss on b/eth0 ingress (nft), plus short TCP",
            self.loss_percent
        );
        println!(
            "         connections ({SHORT_CONN_BYTES} B each way, server closes) over lo in {ns}, {} s per command;",
            self.secs
        );
        println!(
            "         netdoctor runs in {ns} and watches {ns}/eth0; stopped with SIGINT after the window"
        );
        println!(
            "  idle:  {} s before each load window with nothing generated. Tracepoints fire in every",
            TRACING_IDLE.as_secs()
        );
        println!("         namespace: whatever else runs on the machine counts in both windows");
        println!("  floor: there is no empty program for tracepoints; bpf_stats' own clock reads cost ~100 ns");
        println!("         per run on this VM. Beside each row: the empty tc programs (tests/bpf/floor.bpf.c) on");
        let packet = packet_floor
            .map(|f| format!("packet section above: median {f:.1} ns/run"))
            .unwrap_or_else(|| "packet section not run".into());
        println!(
            "         {ns}/eth0 in the same load window ({packet}); −floor is indicative only"
        );
        println!(
            "  {:<6} {:<18} {:<27} {:>9} {:>9} {:>9} {:>9} {:>7} {:>8} {:>10}",
            "cmd",
            "program",
            "hook",
            "idle ev/s",
            "load ev/s",
            "events",
            "ns/event",
            "floor",
            "−floor",
            "idle ns/ev"
        );
        for phase in &self.phases {
            for r in &phase.rows {
                let ns_ev = r.load.ns_per_run();
                let floor = r.floor.ns_per_run();
                println!(
                    "  {:<6} {:<18} {:<27} {:>9.1} {:>9.1} {:>9} {:>9} {:>7} {:>8} {:>10}",
                    phase.command,
                    r.prog.name,
                    r.prog.section,
                    r.idle.runs as f64 / phase.idle_secs,
                    r.load.runs as f64 / phase.load_secs,
                    r.load.runs,
                    fmt_opt(ns_ev, 1),
                    fmt_opt(floor, 1),
                    fmt_opt(ns_ev.zip(floor).map(|(a, b)| a - b), 1),
                    fmt_opt(r.idle.ns_per_run(), 1),
                );
            }
        }
        if let Some((_, snaps)) = &self.iter {
            println!(
                "  {:<6} {:<18} {:<27} one run per socket visited (+1 closing run), per snapshot:",
                "flows", ND_ITER_TCP.name, ND_ITER_TCP.section
            );
            for s in snaps {
                let ss =
                    s.ss.map(|c| {
                        format!(
                            "ss -tan in {ns}: {} sockets ({} time-wait)",
                            c.sockets, c.time_wait
                        )
                    })
                    .unwrap_or_else(|| "ss -tan failed".into());
                println!(
                    "         {:<5} snapshot: {:>6} sockets visited, {:>8.3} ms = {:>7} ns/run; {ss}",
                    s.when,
                    s.sockets_visited(),
                    s.stats.run_time_ns as f64 / 1e6,
                    fmt_opt(s.stats.ns_per_run(), 1),
                );
            }
        }
        for phase in &self.phases {
            let t = &phase.traffic;
            println!(
                "  traffic ({} window, {:.1} s): iperf3 {:.2} Gbit/s, {} retransmitted segments; {} short connections ({:.0}/s, {} failed); nft dropped {} packets",
                phase.command,
                t.secs,
                t.gbps,
                t.retransmits.map(|r| r.to_string()).unwrap_or_else(|| "?".into()),
                t.conns.connections,
                t.conns.connections as f64 / t.secs,
                t.conns.failures,
                t.nft_dropped.map(|r| r.to_string()).unwrap_or_else(|| "?".into()),
            );
        }
        if let Some(lost) = self.sock_events_lost {
            println!(
                "  netdoctor flows: {lost} close events did not fit its ring buffer (its .bss counter sock_events_lost; its report says so too)"
            );
        }
        if let Some((all, nf)) = self.drops_reported {
            println!(
                "  netdoctor drops: reported {all} dropped packets over its whole run (NETFILTER_DROP {nf}), all namespaces"
            );
        }
        let misses: Vec<String> = self
            .phases
            .iter()
            .flat_map(|p| p.rows.iter())
            .filter(|r| r.idle.recursion_misses + r.load.recursion_misses > 0)
            .map(|r| {
                format!(
                    "{} {}",
                    r.prog.name,
                    r.idle.recursion_misses + r.load.recursion_misses
                )
            })
            .collect();
        if !misses.is_empty() {
            println!(
                "  recursion misses (runs skipped by the kernel): {}",
                misses.join(", ")
            );
        }
    }

    pub(crate) fn json(&self, side: Side, packet_floor: Option<f64>) -> Value {
        let ns = side.namespace();
        let window = |c: Counter, secs: f64| {
            json!({
                "secs": secs,
                "events": c.runs,
                "run_time_ns": c.run_time_ns,
                "events_per_s": c.runs as f64 / secs,
                "ns_per_event": c.ns_per_run(),
                "recursion_misses": c.recursion_misses,
            })
        };
        let programs: Vec<Value> = self
            .phases
            .iter()
            .flat_map(|p| p.rows.iter().map(move |r| (p, r)))
            .map(|(p, r)| {
                json!({
                    "command": p.command,
                    "program": r.prog.name,
                    "kernel_name": r.prog.kernel_name(),
                    "hook": r.prog.section,
                    "id": r.id,
                    "idle": window(r.idle, p.idle_secs),
                    "load": window(r.load, p.load_secs),
                    "floor_ns_per_run": r.floor.ns_per_run(),
                    "ns_per_event_minus_floor": r.load.ns_per_run().zip(r.floor.ns_per_run()).map(|(a, b)| a - b),
                })
            })
            .collect();
        let iter = self.iter.as_ref().map(|(id, snaps)| {
            json!({
                "command": "flows",
                "program": ND_ITER_TCP.name,
                "hook": ND_ITER_TCP.section,
                "id": id,
                "note": "one program run per socket visited plus one closing run per snapshot",
                "snapshots": snaps.iter().map(|s| json!({
                    "when": s.when,
                    "runs": s.stats.runs,
                    "sockets_visited": s.sockets_visited(),
                    "run_time_ns": s.stats.run_time_ns,
                    "ns_per_run": s.stats.ns_per_run(),
                    "ss_sockets": s.ss.map(|c| c.sockets),
                    "ss_time_wait": s.ss.map(|c| c.time_wait),
                })).collect::<Vec<_>>(),
            })
        });
        let traffic: Vec<Value> = self
            .phases
            .iter()
            .map(|p| {
                let t = &p.traffic;
                json!({
                    "command": p.command,
                    "secs": t.secs,
                    "iperf3_gbps": t.gbps,
                    "iperf3_retransmits": t.retransmits,
                    "short_connections": t.conns.connections,
                    "short_connection_failures": t.conns.failures,
                    "nft_dropped_packets": t.nft_dropped,
                    "floor_tc": window(p.floor, p.load_secs),
                })
            })
            .collect();
        json!({
            "setup": {
                "load": format!("iperf3 a->b 1 stream, {} % random loss on b/eth0 ingress (nft), plus short TCP connections ({SHORT_CONN_BYTES} B each way, server closes first) over lo in {ns}", self.loss_percent),
                "load_secs_per_command": self.secs,
                "idle_secs_per_command": TRACING_IDLE.as_secs(),
                "netdoctor": format!("`netdoctor flows eth0` and `netdoctor drops` in {ns}, stopped with SIGINT"),
                "scope": "tracepoints fire in every namespace: other activity on the machine counts too",
            },
            "floor": {
                "note": "no empty program exists for tracepoints: ns_per_event is raw; bpf_stats' own clock reads cost ~100 ns per run on this VM, as the empty tc programs show",
                "packet_section_tc_floor_ns_per_run": packet_floor,
            },
            "programs": programs,
            "iter_tcp": iter,
            "traffic": traffic,
            "sock_events_lost": self.sock_events_lost,
            "netdoctor_drops_reported": self.drops_reported.map(|(all, nf)| json!({"packets": all, "netfilter_drop": nf})),
        })
    }
}

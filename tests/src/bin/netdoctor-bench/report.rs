//! The report: the text tables (packet section, then the others') or one JSON document.

use serde_json::{json, Value};

use crate::agent::AgentBench;
use crate::args::{Args, Side};
use crate::machine::Machine;
use crate::packet::run::{Kind, Role, Run};
use crate::paths::PathRows;
use crate::quiet::Quiet;
use crate::tables::{
    cpu_shares, min_max, packet_floor, prog_rows, throughput_rows, ProgRow, ThroughputRow,
};
use crate::tracing::Tracing;
use crate::{TARGET_NS_ABOVE_FLOOR, TARGET_RATIO};

pub(crate) fn fmt_opt(v: Option<f64>, decimals: usize) -> String {
    v.map(|x| format!("{x:.decimals$}"))
        .unwrap_or_else(|| "–".into())
}

pub(crate) fn verdict(ok: bool) -> &'static str {
    if ok {
        "met"
    } else {
        "MISSED"
    }
}

pub(crate) fn side_text(side: Side) -> &'static str {
    match side {
        Side::Receiver => {
            "b/eth0, the receiver: ingress (tc or XDP) sees the data as GSO super-packets, egress the ACKs"
        }
        Side::Sender => {
            "a/eth0, the sender: egress sees the data as GSO super-packets, ingress (tc or XDP) the ACKs"
        }
    }
}

pub(crate) struct Report<'a> {
    pub(crate) args: &'a Args,
    pub(crate) machine: Machine,
    pub(crate) cc: String,
    pub(crate) runs: Vec<Run>,
    pub(crate) tracing: Option<Tracing>,
    pub(crate) agent: Option<AgentBench>,
    /// Why NetObserv was not measured side by side (None: it was).
    pub(crate) peer_note: Option<String>,
    /// The paths side by side with NetObserv (all rounds, every path).
    pub(crate) path_rows: Vec<PathRows>,
    /// Whether the machine was quiet during the packet runs.
    pub(crate) quiet: Quiet,
}

impl Report<'_> {
    pub(crate) fn print_text(&self) {
        let a = self.args;
        let m = &self.machine;
        println!("netdoctor-bench — data-plane cost of netdoctor on a veth pair");
        println!(
            "machine: kernel {} | CPU {} | {} cores | {} | load avg {} (start) / {} (end)",
            m.kernel, m.cpu, m.cores, m.date, m.loadavg_start, m.loadavg_end
        );
        if !self.runs.is_empty() {
            println!(
                "traffic: iperf3 TCP a→b, 1 stream, cc {}, {} s per run, {} rounds (baseline runs alternate with attached runs)",
                self.cc, a.duration, a.rounds
            );
        }
        let load1 = m
            .loadavg_start
            .split_whitespace()
            .next()
            .and_then(|l| l.parse::<f64>().ok())
            .unwrap_or(0.0);
        if load1 > 1.0 {
            println!(
                "warning: the machine was busy before the benchmark started (1-min load {load1:.1} on {} cores):",
                m.cores
            );
            println!("         other processes compete with iperf3 and evict caches; expect noisy figures");
        }
        println!("watched: {}", side_text(a.side));
        println!("         an end host (net.ipv4.ip_forward=0 in its namespace): with --local-tcp sockets, the");
        println!(
            "         default, both directions of its own connections take netdoctor's local path"
        );
        if !self.runs.is_empty() || self.tracing.is_some() {
            println!(
                "stats:   BPF_ENABLE_STATS held for the packet and tracing sections, released before the agent's (kernel.bpf_stats_enabled was {} and is not written)",
                m.bpf_stats_sysctl
            );
        }
        if !self.runs.is_empty() {
            self.print_packet_text();
            if !a.configs.tc().is_empty() {
                crate::sidebyside::print(
                    &crate::sidebyside::rows(&self.runs, &a.configs.tc()),
                    self.peer_note.as_deref(),
                );
            }
        }
        if !self.path_rows.is_empty() {
            crate::paths::print(&self.path_rows, &self.quiet, self.peer_note.as_deref());
        }
        if let Some(t) = &self.tracing {
            if !self.runs.is_empty() {
                println!();
            }
            t.print_text(a.side, packet_floor(&self.runs));
        }
        if let Some(agent) = &self.agent {
            if !self.runs.is_empty() || self.tracing.is_some() {
                println!();
            }
            agent.print_text(a.side);
        }
    }

    pub(crate) fn print_packet_text(&self) {
        let a = self.args;
        println!("floor:   empty programs (tests/bpf/floor.bpf.c, same sections and return codes as netdoctor's):");
        println!("         tc  — attached in front of netdoctor's programs on the same tcx hooks in the same runs");
        println!("               (the first program of a chain pays the chain's shared cache misses, as netdoctor alone would);");
        println!("         xdp — one XDP program per interface, so measured in separate runs of the same");
        println!("               configuration (same interface, same mode) with the empty programs in netdoctor's place");
        println!();

        println!(
            "Throughput, iperf3 1 stream (Gbit/s; median [min..max] of n runs; ratio = median / baseline median; target ≥ {:.0} %,",
            TARGET_RATIO * 100.0
        );
        println!("  in XDP modes the verdict is on the ratio to the same mode with only the empty programs: the mode itself changes what a transfer gets)");
        for row in throughput_rows(&self.runs, 1) {
            let (lo, hi) = min_max(&row.runs);
            let ratio = match (row.kind, row.ratio, row.judged()) {
                (Kind::Netdoctor(_), Some(r), Some(j)) => {
                    let empty = row
                        .vs_empty
                        .map(|e| format!("  ({:.1} % of the empty programs')", e * 100.0))
                        .unwrap_or_default();
                    format!("{:6.1} %  {}{empty}", r * 100.0, verdict(j >= TARGET_RATIO))
                }
                (_, Some(r), _) => format!("{:6.1} %", r * 100.0),
                _ => String::new(),
            };
            println!(
                "  {:<34} {:>6.2} [{:.2}..{:.2}] n={}  {ratio}",
                row.kind.describe(),
                row.median,
                lo,
                hi,
                row.runs.len()
            );
        }
        println!("  (attached runs also carry the empty tc programs and BPF statistics; ratios are pessimistic)");
        println!();

        println!(
            "Per-program cost (ns per run; median over rounds; Δ = netdoctor − floor; target Δ ≤ {TARGET_NS_ABOVE_FLOOR:.0} ns)"
        );
        println!(
            "  {:<15} {:<15} {:>10} {:>8} {:>9} {:>8} {:>8}  {:<8} per-round netdoctor / floor",
            "config", "program", "runs/s", "seg/run", "netdoctor", "floor", "Δ", "target"
        );
        let print_rows = |rows: Vec<ProgRow>| {
            for r in rows {
                let target = r
                    .above_floor
                    .map(|d| verdict(d <= TARGET_NS_ABOVE_FLOOR))
                    .unwrap_or("–");
                let per_round = format!(
                    "{} / {}{}",
                    r.ns.iter()
                        .map(|v| format!("{v:.0}"))
                        .collect::<Vec<_>>()
                        .join(","),
                    r.floor_ns
                        .iter()
                        .map(|v| format!("{v:.0}"))
                        .collect::<Vec<_>>()
                        .join(","),
                    if r.floor_same_run {
                        ""
                    } else {
                        " (floor runs)"
                    }
                );
                let config = if r.parallel > 1 {
                    format!("{} -P {}", r.config.name(), r.parallel)
                } else {
                    r.config.name().to_owned()
                };
                println!(
                    "  {:<15} {:<15} {:>10} {:>8} {:>9} {:>8} {:>8}  {:<8} {per_round}",
                    config,
                    r.name,
                    fmt_opt(r.runs_per_s, 0),
                    fmt_opt(r.segments_per_run, 1),
                    fmt_opt(r.median_ns, 1),
                    fmt_opt(r.median_floor, 1),
                    fmt_opt(r.above_floor, 1),
                    target,
                );
            }
        };
        print_rows(prog_rows(&self.runs, 1, &a.configs.packet));
        if a.parallel > 1 {
            print_rows(prog_rows(&self.runs, a.parallel, &a.configs.many_flows()));
        }
        println!("  seg/run: wire segments per program run from netdoctor's own counters (counters.<dir>.segments / packets);");
        println!("           XDP cannot see gso_segs, so it counts every frame as one segment.");
        println!();
        println!(
            "CPU share (Δ × runs / CPU time the machine spent busy in the run, median over rounds): what a transfer"
        );
        println!(
            "bound by CPU loses to netdoctor's programs, without the noise of iperf3's throughput (target ≥ {:.0} % kept)",
            TARGET_RATIO * 100.0
        );
        for (config, rows) in cpu_shares(&prog_rows(&self.runs, 1, &a.configs.packet)) {
            let total: f64 = rows.iter().map(|(_, s)| s).sum();
            let parts = rows
                .iter()
                .map(|(name, s)| format!("{name} {:.2} %", s * 100.0))
                .collect::<Vec<_>>()
                .join(" + ");
            println!(
                "  {:<15} {:.2} % ({parts})  throughput kept ≈ {:.1} %  {}",
                config.name(),
                total * 100.0,
                (1.0 - total) * 100.0,
                verdict(1.0 - total >= TARGET_RATIO)
            );
        }
        if a.parallel > 1 {
            println!();
            println!(
                "Many flows: iperf3 -P {} for {} s, tc configurations (one run each, baseline before each)",
                a.parallel, a.parallel_duration
            );
            for row in throughput_rows(&self.runs, a.parallel) {
                let ratio = row
                    .ratio
                    .map(|r| format!("  {:.1} % of baseline", r * 100.0))
                    .unwrap_or_default();
                println!(
                    "  {:<34} {:>6.2} Gbit/s{ratio}",
                    row.kind.describe(),
                    row.median
                );
            }
            for r in self.runs.iter().filter(|r| r.parallel == a.parallel) {
                if let Some(flows) = r.flows_total {
                    let what = r.kind.label();
                    println!("  flow-table entries on the watched interface, {what}: {flows}");
                }
            }
        }
    }

    pub(crate) fn json(&self) -> Value {
        let a = self.args;
        let m = &self.machine;
        let prog_json = |r: &ProgRow| {
            json!({
                "config": r.config.name(),
                "parallel": r.parallel,
                "hook": r.hook.name(),
                "program": r.name,
                "runs_per_s": r.runs_per_s,
                "cpu_share": r.cpu_share,
                "segments_per_run": r.segments_per_run,
                "ns_per_run": r.median_ns,
                "floor_ns_per_run": r.median_floor,
                "ns_above_floor": r.above_floor,
                "floor_measured": if r.floor_same_run { "same runs, same hook" } else { "separate runs, same configuration" },
                "ns_per_run_by_round": r.ns,
                "floor_ns_per_run_by_round": r.floor_ns,
                "target_met": r.above_floor.map(|d| d <= TARGET_NS_ABOVE_FLOOR),
            })
        };
        let tp_json = |r: &ThroughputRow| {
            json!({
                "case": r.kind.label(),
                "description": r.kind.describe(),
                "parallel": r.parallel,
                "median_gbps": r.median,
                "gbps_by_run": r.runs,
                "ratio_vs_baseline": r.ratio,
                "ratio_vs_empty_programs": r.vs_empty,
                "target_met": match r.kind {
                    Kind::Netdoctor(_) => r.judged().map(|x| x >= TARGET_RATIO),
                    _ => None,
                },
            })
        };
        let mut programs: Vec<Value> = prog_rows(&self.runs, 1, &a.configs.packet)
            .iter()
            .map(prog_json)
            .collect();
        let mut throughput: Vec<Value> =
            throughput_rows(&self.runs, 1).iter().map(tp_json).collect();
        if a.parallel > 1 {
            programs.extend(
                prog_rows(&self.runs, a.parallel, &a.configs.many_flows())
                    .iter()
                    .map(prog_json),
            );
            throughput.extend(throughput_rows(&self.runs, a.parallel).iter().map(tp_json));
        }
        let runs: Vec<Value> = self
            .runs
            .iter()
            .map(|r| {
                json!({
                    "case": r.kind.label(),
                    "round": r.round + 1,
                    "parallel": r.parallel,
                    "gbps": r.gbps,
                    "cpu_busy_ns": r.cpu_busy_ns,
                    "retransmits": r.retransmits,
                    "ingress_hook": r.ingress_hook,
                    "flows_total": r.flows_total,
                    "counters": r.counters.map(|(i, e)| json!({
                        "ingress": {"packets": i.packets, "segments": i.segments},
                        "egress": {"packets": e.packets, "segments": e.segments},
                    })),
                    "programs": r.programs.iter().map(|p| json!({
                        "role": match p.role { Role::Netdoctor => "netdoctor", Role::Floor => "floor", Role::Peer => "netobserv" },
                        "hook": p.hook.name(),
                        "name": p.name,
                        "id": p.id,
                        "runs": p.runs,
                        "run_time_ns": p.run_time_ns,
                        "ns_per_run": p.ns_per_run(),
                    })).collect::<Vec<_>>(),
                })
            })
            .collect();
        json!({
            "machine": {
                "kernel": m.kernel,
                "cpu": m.cpu,
                "cores": m.cores,
                "date": m.date,
                "loadavg_start": m.loadavg_start,
                "loadavg_end": m.loadavg_end,
            },
            "setup": {
                "traffic": "iperf3 TCP a->b over veth, MTU 1500",
                "congestion_control": self.cc,
                "duration_s": a.duration,
                "rounds": a.rounds,
                "configs": a.configs.names(),
                "parallel": a.parallel,
                "parallel_duration_s": a.parallel_duration,
                "watched": format!("{}/eth0 ({})", a.side.namespace(), a.side.name()),
                "bpf_stats": "BPF_ENABLE_STATS descriptor held during the packet and tracing sections (not the agent section)",
                "bpf_stats_enabled_sysctl": m.bpf_stats_sysctl,
                "floor": "tc: empty programs in front of netdoctor's (first in the chain) on the same tcx hooks in the same runs; xdp: separate runs of the same configuration with empty programs",
            },
            "targets": {"throughput_ratio_min": TARGET_RATIO, "ns_above_floor_max": TARGET_NS_ABOVE_FLOOR},
            "throughput": throughput,
            "programs": programs,
            "paths": crate::paths::json(&self.path_rows, &self.quiet, self.peer_note.as_deref()),
            "side_by_side": crate::sidebyside::json(
                &crate::sidebyside::rows(&self.runs, &a.configs.tc()),
                self.peer_note.as_deref(),
            ),
            "runs": runs,
            "tracing": self.tracing.as_ref().map(|t| t.json(a.side, packet_floor(&self.runs))),
            "agent": self.agent.as_ref().map(|g| g.json(a.side)),
        })
    }
}

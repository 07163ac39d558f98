//! The tracing section: netdoctor's tracing programs per event, loaded as the product loads
//! them (`netdoctor flows`, `netdoctor drops`), over an idle window and a load window.

mod load;
mod programs;
mod report;

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use netdoctor_lab::{Direction, PacketLoss, PairTopology};
use serde_json::Value;

use crate::args::Args;
use crate::floor::Floor;
use crate::lab::{finish_netdoctor, flows_argv, spawn_netdoctor, Lab};
use crate::packet::run::Hook;
use crate::programs::Counter;
use crate::report::fmt_opt;
use crate::{STOP, WATCHING};
use load::{ss_count, tracing_traffic, SsCount, TraceTraffic};
use programs::{
    hold_programs, BssCounter, HeldProg, TraceProg, ND_ITER_TCP, ND_KFREE_SKB, ND_SOCK_STATE,
    ND_TCP_RETRANSMIT,
};

/// Needle `netdoctor drops` prints on stderr once its program is attached.
pub(crate) const COUNTING_DROPS: &str = "netdoctor: counting kernel drops";
/// Idle window before each load window: nothing generated.
pub(crate) const TRACING_IDLE: Duration = Duration::from_secs(2);

/// One program over the idle and the load window.
#[derive(Debug, Clone)]
pub(crate) struct TraceRow {
    pub(crate) prog: TraceProg,
    pub(crate) id: u32,
    pub(crate) idle: Counter,
    pub(crate) load: Counter,
    /// Empty tc programs on the watched interface in the same load window (in + out).
    pub(crate) floor: Counter,
}

/// The tracepoint programs of one command over an idle and a load window.
#[derive(Debug, Clone)]
pub(crate) struct TracePhase {
    pub(crate) command: &'static str,
    pub(crate) idle_secs: f64,
    pub(crate) load_secs: f64,
    pub(crate) rows: Vec<TraceRow>,
    pub(crate) floor: Counter,
    pub(crate) traffic: TraceTraffic,
}

/// Idle window, then the load window with the empty tc programs attached.
pub(crate) fn trace_windows(
    lab: &Lab,
    floor: &Floor<'_>,
    loss: &PacketLoss,
    held: &[&HeldProg],
    command: &'static str,
    secs: u32,
) -> Result<TracePhase> {
    let read = || held.iter().map(|h| h.stats()).collect::<Result<Vec<_>>>();
    let idle0 = read()?;
    let t0 = Instant::now();
    std::thread::sleep(TRACING_IDLE);
    let idle1 = read()?;
    let idle_secs = t0.elapsed().as_secs_f64();

    let hooks = [Hook::TcIn, Hook::TcOut];
    let links = floor.attach(lab.watched(), lab.ifindex, &hooks, 0)?;
    let floor_stats = || -> Result<Counter> {
        hooks.iter().try_fold(Counter::default(), |acc, &h| {
            Ok(acc.plus(floor.counter(h).context("floor statistics")?))
        })
    };
    let nft0 = loss.dropped_packets().ok();
    let floor0 = floor_stats()?;
    let load0 = read()?;
    let t1 = Instant::now();
    let (report, conns) = tracing_traffic(lab, secs)?;
    let load1 = read()?;
    let load_secs = t1.elapsed().as_secs_f64();
    let floor1 = floor_stats()?;
    let nft1 = loss.dropped_packets().ok();
    drop(links);
    let floor = floor1.since(floor0);

    let rows = held
        .iter()
        .enumerate()
        .map(|(i, h)| TraceRow {
            prog: h.prog,
            id: h.id,
            idle: idle1[i].since(idle0[i]),
            load: load1[i].since(load0[i]),
            floor,
        })
        .collect();
    Ok(TracePhase {
        command,
        idle_secs,
        load_secs,
        rows,
        floor,
        traffic: TraceTraffic {
            secs: load_secs,
            gbps: report.received_bits_per_second / 1e9,
            retransmits: report.retransmits,
            conns,
            nft_dropped: nft0.zip(nft1).map(|(a, b)| b.saturating_sub(a)),
        },
    })
}

/// One iter/tcp snapshot of `netdoctor flows`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct IterSnapshot {
    pub(crate) when: &'static str,
    /// Program runs: one per socket visited plus one closing run.
    pub(crate) stats: Counter,
    pub(crate) ss: Option<SsCount>,
}

impl IterSnapshot {
    pub(crate) fn sockets_visited(&self) -> u64 {
        self.stats.runs.saturating_sub(1)
    }
}

/// The statistics once netdoctor's start-of-window snapshot is complete.
pub(crate) fn wait_first_snapshot(iter: &HeldProg) -> Result<Counter> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let c = iter.stats()?;
        if c.runs > 0 {
            std::thread::sleep(Duration::from_millis(50));
            let again = iter.stats()?;
            if again == c {
                return Ok(c);
            }
            continue;
        }
        ensure!(
            Instant::now() < deadline,
            "netdoctor flows took no iter/tcp snapshot within 10 s"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// What the tracing section measured.
#[derive(Debug, Clone)]
pub(crate) struct Tracing {
    pub(crate) loss_percent: u8,
    pub(crate) secs: u32,
    pub(crate) phases: Vec<TracePhase>,
    pub(crate) iter: Option<(u32, Vec<IterSnapshot>)>,
    /// Close events `netdoctor flows` could not queue (its ring buffer was full).
    pub(crate) sock_events_lost: Option<u64>,
    /// Drops `netdoctor drops` reported: all, and NETFILTER_DROP.
    pub(crate) drops_reported: Option<(u64, u64)>,
}

pub(crate) fn run_tracing(
    lab: &Lab,
    floor: &Floor<'_>,
    netdoctor: &str,
    args: &Args,
) -> Result<Tracing> {
    let loss = PacketLoss::add(
        lab.receiver(),
        PairTopology::IFNAME,
        Direction::Ingress,
        args.tracing_loss,
    )?;
    let ns = lab.watched();
    let mut out = Tracing {
        loss_percent: args.tracing_loss,
        secs: args.tracing_duration,
        phases: Vec::new(),
        iter: None,
        sock_events_lost: None,
        drops_reported: None,
    };

    // netdoctor flows: iter/tcp + the two socket tracepoints (and its tc programs).
    ensure!(!STOP.load(Ordering::SeqCst), "interrupted");
    eprintln!("netdoctor-bench: tracing — netdoctor flows (socket probes)");
    let argv = flows_argv(netdoctor);
    let (nd, known) = spawn_netdoctor(lab, &argv, WATCHING)?;
    let held = hold_programs(
        &nd,
        &known,
        &[ND_TCP_RETRANSMIT, ND_SOCK_STATE, ND_ITER_TCP],
    )?;
    let lost = match BssCounter::open(&held[1], "sock_events_lost") {
        Ok(c) => Some(c),
        Err(e) => {
            eprintln!("netdoctor-bench: cannot read sock_events_lost: {e:#}");
            None
        }
    };
    let iter = &held[2];
    let first = wait_first_snapshot(iter)?;
    let ss_start = ss_count(ns);
    let phase = trace_windows(
        lab,
        floor,
        &loss,
        &[&held[0], &held[1]],
        "flows",
        args.tracing_duration,
    )?;
    progress_tracing(&phase);
    out.phases.push(phase);
    let ss_end = ss_count(ns);
    finish_netdoctor(nd).context("netdoctor flows")?;
    let total = iter.stats()?;
    out.iter = Some((
        iter.id,
        vec![
            IterSnapshot {
                when: "start",
                stats: first,
                ss: ss_start,
            },
            IterSnapshot {
                when: "end",
                stats: total.since(first),
                ss: ss_end,
            },
        ],
    ));
    out.sock_events_lost = lost.as_ref().and_then(|l| l.read().ok());
    drop(lost);
    drop(held);

    // netdoctor drops: kfree_skb.
    ensure!(!STOP.load(Ordering::SeqCst), "interrupted");
    eprintln!("netdoctor-bench: tracing — netdoctor drops (kfree_skb)");
    let argv = [netdoctor, "drops", "--duration", "10m", "--json"];
    let (nd, known) = spawn_netdoctor(lab, &argv, COUNTING_DROPS)?;
    let held = hold_programs(&nd, &known, &[ND_KFREE_SKB])?;
    let phase = trace_windows(
        lab,
        floor,
        &loss,
        &[&held[0]],
        "drops",
        args.tracing_duration,
    )?;
    progress_tracing(&phase);
    out.phases.push(phase);
    let json = finish_netdoctor(nd).context("netdoctor drops")?;
    out.drops_reported = json["drops"].as_array().map(|drops| {
        let packets = |d: &Value| d["packets"].as_u64().unwrap_or(0);
        (
            drops.iter().map(packets).sum(),
            drops
                .iter()
                .filter(|d| d["reason"] == "NETFILTER_DROP")
                .map(packets)
                .sum(),
        )
    });
    drop(loss);
    Ok(out)
}

pub(crate) fn progress_tracing(phase: &TracePhase) {
    let mut line = format!("netdoctor-bench: tracing {:<6}", phase.command);
    for r in &phase.rows {
        line.push_str(&format!(
            "  {} {:.0} ev/s {} ns/ev",
            r.prog.name,
            r.load.runs as f64 / phase.load_secs,
            fmt_opt(r.load.ns_per_run(), 0)
        ));
    }
    line.push_str(&format!(
        "  floor {} ns/run",
        fmt_opt(phase.floor.ns_per_run(), 0)
    ));
    eprintln!("{line}");
}

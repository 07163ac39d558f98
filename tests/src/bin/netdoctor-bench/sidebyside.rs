//! netdoctor, NetObserv and the floor side by side: in every single-stream tc run the three
//! sit on the same tcx hooks of the same interface and see the same packets, so each round
//! gives one Δ above the floor for each, from the same packets; `tc` (`--local-tcp sockets`)
//! and `tc-packets` (`--local-tcp packets`) each get their own rows, from the runs that
//! alternate in every round.
//! Over the rounds: medians and ranges, the peer's Δ over netdoctor's, and whether their
//! difference is larger than the spread between rounds (otherwise it is reported as noise);
//! when both tc variants ran, netdoctor's Δ of one against the other's, round by round.
//!
//! Order on each hook: the floor (first, see `floor`), netdoctor, then NetObserv (which
//! ends the chain).

use serde_json::{json, Value};

use crate::args::Config;
use crate::packet::run::{Hook, Kind, Role, Run};
use crate::tables::{median, min_max};

/// The order, as the report states it.
const ORDER: &str = "floor, netdoctor, NetObserv";

/// One round's figures on one hook (ns per run).
#[derive(Debug, Clone, Copy)]
pub(crate) struct SideRound {
    /// 0-based, as in [`Run::round`].
    pub(crate) round: u32,
    pub(crate) floor: f64,
    /// netdoctor − floor.
    pub(crate) netdoctor: f64,
    /// NetObserv − floor.
    pub(crate) peer: f64,
}

/// One configuration's figures on one hook over the rounds.
#[derive(Debug, Clone)]
pub(crate) struct SideRow {
    pub(crate) config: Config,
    pub(crate) hook: Hook,
    pub(crate) rounds: Vec<SideRound>,
}

fn spread(v: &[f64]) -> f64 {
    let (lo, hi) = min_max(v);
    hi - lo
}

/// Whether the medians of `a` and `b` differ by more than the larger of their ranges.
fn beyond_noise(a: &[f64], b: &[f64]) -> bool {
    match (median(a), median(b)) {
        (Some(ma), Some(mb)) => (mb - ma).abs() > spread(a).max(spread(b)),
        _ => false,
    }
}

impl SideRow {
    fn column(&self, f: impl Fn(&SideRound) -> f64) -> Vec<f64> {
        self.rounds.iter().map(f).collect()
    }

    pub(crate) fn floor(&self) -> Vec<f64> {
        self.column(|r| r.floor)
    }

    pub(crate) fn netdoctor(&self) -> Vec<f64> {
        self.column(|r| r.netdoctor)
    }

    pub(crate) fn peer(&self) -> Vec<f64> {
        self.column(|r| r.peer)
    }

    /// NetObserv's Δ over netdoctor's, per round (netdoctor's Δ at least 1 ns).
    pub(crate) fn ratios(&self) -> Vec<f64> {
        self.column(|r| r.peer / r.netdoctor.max(1.0))
    }

    /// Whether netdoctor's and NetObserv's medians differ by more than the spread.
    pub(crate) fn beyond_noise(&self) -> bool {
        beyond_noise(&self.netdoctor(), &self.peer())
    }
}

/// The side-by-side rows of the single-stream runs of the tc `configs` that had the peer
/// attached, by hook, then configuration.
pub(crate) fn rows(runs: &[Run], configs: &[Config]) -> Vec<SideRow> {
    let mut out = Vec::new();
    for hook in [Hook::TcIn, Hook::TcOut] {
        for &config in configs {
            let rounds: Vec<SideRound> = runs
                .iter()
                .filter(|r| r.kind == Kind::Netdoctor(config) && r.parallel == 1)
                .filter_map(|r| {
                    let floor = r.prog(Role::Floor, hook)?.ns_per_run()?;
                    let nd = r.prog(Role::Netdoctor, hook)?.ns_per_run()?;
                    let peer = r.prog(Role::Peer, hook)?.ns_per_run()?;
                    Some(SideRound {
                        round: r.round,
                        floor,
                        netdoctor: nd - floor,
                        peer: peer - floor,
                    })
                })
                .collect();
            if !rounds.is_empty() {
                out.push(SideRow {
                    config,
                    hook,
                    rounds,
                });
            }
        }
    }
    out
}

/// netdoctor's Δ with `--local-tcp packets` minus its Δ with `sockets` on one hook.
#[derive(Debug, Clone)]
pub(crate) struct VariantGap {
    pub(crate) hook: Hook,
    /// Per round in which both variants ran: packets Δ − sockets Δ (ns per run).
    pub(crate) by_round: Vec<f64>,
    /// Whether the two variants' medians differ by more than their spread between rounds.
    pub(crate) beyond_noise: bool,
}

/// Per hook, `tc-packets` against `tc` when both were measured.
pub(crate) fn variant_gaps(rows: &[SideRow]) -> Vec<VariantGap> {
    let find = |config, hook| rows.iter().find(|r| r.config == config && r.hook == hook);
    [Hook::TcIn, Hook::TcOut]
        .into_iter()
        .filter_map(|hook| {
            let (sockets, packets) = (find(Config::Tc, hook)?, find(Config::TcPackets, hook)?);
            let by_round = packets
                .rounds
                .iter()
                .filter_map(|p| {
                    let s = sockets.rounds.iter().find(|s| s.round == p.round)?;
                    Some(p.netdoctor - s.netdoctor)
                })
                .collect();
            Some(VariantGap {
                hook,
                by_round,
                beyond_noise: beyond_noise(&sockets.netdoctor(), &packets.netdoctor()),
            })
        })
        .collect()
}

/// `median [min..max]` (`..`, not `-`: differences can be negative).
pub(crate) fn stat(v: &[f64], decimals: usize) -> String {
    let (lo, hi) = min_max(v);
    match median(v) {
        Some(m) => format!("{m:.decimals$} [{lo:.decimals$}..{hi:.decimals$}]"),
        None => "-".into(),
    }
}

/// The text section; `note` says why there is none when the peer was not loaded.
pub(crate) fn print(rows: &[SideRow], note: Option<&str>) {
    println!();
    println!("side by side on the same packets (single-stream tc runs; ns per run, median [range] over rounds):");
    if let Some(note) = note {
        println!("  {note}");
        println!();
        return;
    }
    if rows.is_empty() {
        println!("  no tc run carried all three programs");
        println!();
        return;
    }
    println!(
        "  order on each hook: {ORDER}. The empty floor runs first because the first program of"
    );
    println!("  a tcx chain pays the chain's shared cache misses; NetObserv's TC_ACT_OK ends the chain, so");
    println!("  it runs last, on headers netdoctor already brought into cache: the comparison favours it.");
    println!("  tc = --local-tcp sockets (default), tc-packets = --local-tcp packets, alternating in each round");
    println!(
        "  {:<7} {:<11} {:<14} {:<14} {:<16} NetObserv/netdoctor (netdoctor Δ ≥ 1 ns)",
        "hook", "config", "floor", "netdoctor Δ", "NetObserv Δ"
    );
    for r in rows {
        println!(
            "  {:<7} {:<11} {:<14} {:<14} {:<16} {}{}",
            r.hook.name(),
            r.config.name(),
            stat(&r.floor(), 0),
            stat(&r.netdoctor(), 0),
            stat(&r.peer(), 0),
            stat(&r.ratios(), 1),
            if r.beyond_noise() {
                ""
            } else {
                "  (NetObserv − netdoctor within the spread between rounds: noise)"
            },
        );
    }
    println!("  per round, floor / netdoctor Δ / NetObserv Δ:");
    for r in rows {
        let rounds: Vec<String> = r
            .rounds
            .iter()
            .map(|x| {
                let (f, nd, p) = (x.floor, x.netdoctor, x.peer);
                format!("{}: {f:.0} / {nd:.0} / {p:.0}", x.round + 1)
            })
            .collect();
        let (hook, config) = (r.hook.name(), r.config.name());
        println!("  {hook:<7} {config:<11} {}", rounds.join("   "));
    }
    for g in variant_gaps(rows) {
        let rounds: Vec<String> = g.by_round.iter().map(|d| format!("{d:+.0}")).collect();
        println!(
            "  {:<7} netdoctor Δ, packets − sockets: {} ns (by round {}){}",
            g.hook.name(),
            stat(&g.by_round, 0),
            rounds.join(", "),
            if g.beyond_noise {
                ""
            } else {
                "; within the spread between rounds: noise"
            }
        );
    }
    println!("  target: NetObserv's Δ at least 10 times netdoctor's");
    println!();
}

pub(crate) fn json(rows: &[SideRow], note: Option<&str>) -> Value {
    json!({
        "skipped": note,
        "order": ORDER,
        "hooks": rows.iter().map(|r| json!({
            "config": r.config.name(),
            "hook": r.hook.name(),
            "rounds": r.rounds.iter().map(|x| x.round + 1).collect::<Vec<_>>(),
            "floor_ns": r.floor(),
            "netdoctor_above_floor_ns": r.netdoctor(),
            "netobserv_above_floor_ns": r.peer(),
            "netobserv_over_netdoctor": r.ratios(),
            "median_netdoctor_above_floor_ns": median(&r.netdoctor()),
            "median_netobserv_above_floor_ns": median(&r.peer()),
            "median_ratio": median(&r.ratios()),
            "difference_beyond_round_spread": r.beyond_noise(),
        })).collect::<Vec<_>>(),
        "local_tcp_packets_minus_sockets": variant_gaps(rows).iter().map(|g| json!({
            "hook": g.hook.name(),
            "netdoctor_above_floor_ns_by_round": g.by_round,
            "median_ns": median(&g.by_round),
            "difference_beyond_round_spread": g.beyond_noise,
        })).collect::<Vec<_>>(),
    })
}

//! netdoctor, NetObserv and the floor side by side: in every single-stream tc run the three
//! sit on the same tcx hooks of the same interface and see the same packets, so each round
//! gives one Δ above the floor for each, from the same packets.
//! Over the rounds: medians and ranges, the peer's Δ over netdoctor's, and whether their
//! difference is larger than the spread between rounds (otherwise it is reported as noise).
//!
//! Order on each hook: netdoctor, then the floor, then NetObserv (which ends the chain).

use serde_json::{json, Value};

use crate::packet::run::{Hook, Kind, Role, Run};
use crate::tables::{median, min_max};

use crate::args::Config;

/// One hook's figures over the rounds.
#[derive(Debug, Clone)]
pub(crate) struct SideRow {
    pub(crate) hook: Hook,
    /// Per round: (floor ns/run, netdoctor Δ, NetObserv Δ).
    pub(crate) rounds: Vec<(f64, f64, f64)>,
}

impl SideRow {
    fn column(&self, i: usize) -> Vec<f64> {
        self.rounds.iter().map(|r| [r.0, r.1, r.2][i]).collect()
    }

    pub(crate) fn floor(&self) -> Vec<f64> {
        self.column(0)
    }

    pub(crate) fn netdoctor(&self) -> Vec<f64> {
        self.column(1)
    }

    pub(crate) fn peer(&self) -> Vec<f64> {
        self.column(2)
    }

    /// NetObserv's Δ over netdoctor's, per round (netdoctor's Δ at least 1 ns).
    pub(crate) fn ratios(&self) -> Vec<f64> {
        self.rounds.iter().map(|r| r.2 / r.1.max(1.0)).collect()
    }

    /// Whether the medians differ by more than the larger of the two ranges.
    pub(crate) fn beyond_noise(&self) -> bool {
        let (nd, peer) = (self.netdoctor(), self.peer());
        let (Some(a), Some(b)) = (median(&nd), median(&peer)) else {
            return false;
        };
        let spread = |v: &[f64]| {
            let (lo, hi) = min_max(v);
            hi - lo
        };
        (b - a).abs() > spread(&nd).max(spread(&peer))
    }
}

/// The side-by-side rows of the single-stream tc runs that had the peer attached.
pub(crate) fn rows(runs: &[Run]) -> Vec<SideRow> {
    [Hook::TcIn, Hook::TcOut]
        .into_iter()
        .filter_map(|hook| {
            let rounds: Vec<(f64, f64, f64)> = runs
                .iter()
                .filter(|r| r.kind == Kind::Netdoctor(Config::Tc) && r.parallel == 1)
                .filter_map(|r| {
                    let floor = r.prog(Role::Floor, hook)?.ns_per_run()?;
                    let nd = r.prog(Role::Netdoctor, hook)?.ns_per_run()?;
                    let peer = r.prog(Role::Peer, hook)?.ns_per_run()?;
                    Some((floor, nd - floor, peer - floor))
                })
                .collect();
            (!rounds.is_empty()).then_some(SideRow { hook, rounds })
        })
        .collect()
}

fn stat(v: &[f64], decimals: usize) -> String {
    let (lo, hi) = min_max(v);
    match median(v) {
        Some(m) => format!("{m:.decimals$} [{lo:.decimals$}-{hi:.decimals$}]"),
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
    println!("  order on each hook: netdoctor, floor, NetObserv (its TC_ACT_OK ends the chain, so it runs last,");
    println!(
        "  on headers netdoctor already brought into cache: the comparison favours NetObserv)"
    );
    for r in rows {
        println!(
            "  {:<7} floor {} | Δ above floor: netdoctor {}, NetObserv {} | NetObserv/netdoctor {}",
            r.hook.name(),
            stat(&r.floor(), 0),
            stat(&r.netdoctor(), 0),
            stat(&r.peer(), 0),
            stat(&r.ratios(), 1),
        );
        for (i, (f, nd, p)) in r.rounds.iter().enumerate() {
            println!(
                "          round {}: floor {f:.0}, netdoctor Δ {nd:.0}, NetObserv Δ {p:.0}",
                i + 1
            );
        }
        if !r.beyond_noise() {
            println!("          the difference is within the spread between rounds: noise");
        }
    }
    println!("  target: NetObserv's Δ at least 10 times netdoctor's");
    println!();
}

pub(crate) fn json(rows: &[SideRow], note: Option<&str>) -> Value {
    json!({
        "skipped": note,
        "hooks": rows.iter().map(|r| json!({
            "hook": r.hook.name(),
            "floor_ns": r.floor(),
            "netdoctor_above_floor_ns": r.netdoctor(),
            "netobserv_above_floor_ns": r.peer(),
            "netobserv_over_netdoctor": r.ratios(),
            "median_netdoctor_above_floor_ns": median(&r.netdoctor()),
            "median_netobserv_above_floor_ns": median(&r.peer()),
            "median_ratio": median(&r.ratios()),
            "difference_beyond_round_spread": r.beyond_noise(),
        })).collect::<Vec<_>>(),
    })
}

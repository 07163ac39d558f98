//! The three paths side by side with NetObserv: per path and direction, netdoctor's and
//! NetObserv's Δ above the floor (median and range over the rounds, from the same packets
//! in the same runs) and whether the run met the targets by the median: netdoctor's Δ ≤
//! [`TARGET_NS_ABOVE_FLOOR`] and NetObserv's at least [`TARGET_PEER_RATIO`] times it. A
//! run on a busy machine (see [`crate::quiet`]) meets nothing: it is reported as busy.

use serde_json::{json, Value};

use crate::args::Config;
use crate::lab::NetPath;
use crate::packet::run::{Hook, Run};
use crate::quiet::Quiet;
use crate::sidebyside::{rows, stat, SideRow};
use crate::tables::median;
use crate::TARGET_NS_ABOVE_FLOOR;

/// NetObserv's Δ over netdoctor's, by the median of the rounds.
pub(crate) const TARGET_PEER_RATIO: f64 = 10.0;
/// Rounds a verdict needs.
pub(crate) const MIN_ROUNDS: usize = 5;

/// One path's side-by-side rows (default configuration: tc in and out).
#[derive(Debug, Clone)]
pub(crate) struct PathRows {
    pub(crate) path: NetPath,
    pub(crate) rows: Vec<SideRow>,
}

/// The rows of every path in `paths` from `runs`.
pub(crate) fn path_rows(runs: &[Run], paths: &[NetPath]) -> Vec<PathRows> {
    paths
        .iter()
        .map(|&path| {
            let mine: Vec<Run> = runs.iter().filter(|r| r.path == path).cloned().collect();
            PathRows {
                path,
                rows: rows(&mine, &[Config::Tc]),
            }
        })
        .collect()
}

/// The verdict of one row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    Met,
    NotMet,
    /// Fewer than [`MIN_ROUNDS`] rounds.
    TooFew,
    /// Busy machine: not counted.
    Busy,
}

impl Verdict {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Verdict::Met => "met",
            Verdict::NotMet => "NOT met",
            Verdict::TooFew => "not judged (fewer than 5 rounds)",
            Verdict::Busy => "busy: not counted, rerun",
        }
    }
}

pub(crate) fn verdict(row: &SideRow, quiet: &Quiet) -> Verdict {
    let (nd, ratio) = (median(&row.netdoctor()), median(&row.ratios()));
    if quiet.is_busy() {
        Verdict::Busy
    } else if row.rounds.len() < MIN_ROUNDS {
        Verdict::TooFew
    } else if nd.is_some_and(|n| n <= TARGET_NS_ABOVE_FLOOR)
        && ratio.is_some_and(|r| r >= TARGET_PEER_RATIO)
    {
        Verdict::Met
    } else {
        Verdict::NotMet
    }
}

/// The run's overall verdict: met only when every row of every selected path met both.
pub(crate) fn overall(paths: &[PathRows], quiet: &Quiet) -> Verdict {
    let all: Vec<Verdict> = paths
        .iter()
        .flat_map(|p| p.rows.iter().map(|r| verdict(r, quiet)))
        .collect();
    if quiet.is_busy() {
        Verdict::Busy
    } else if all.is_empty() || all.contains(&Verdict::TooFew) {
        Verdict::TooFew
    } else if all.iter().all(|v| *v == Verdict::Met) {
        Verdict::Met
    } else {
        Verdict::NotMet
    }
}

fn direction(hook: Hook) -> &'static str {
    if hook.ingress() {
        "in"
    } else {
        "out"
    }
}

pub(crate) fn print(paths: &[PathRows], quiet: &Quiet, note: Option<&str>) {
    println!();
    println!(
        "paths side by side with NetObserv (tc in+out, floor first, NetObserv last; ns per run above the floor, median [range] over rounds):"
    );
    println!("  machine: {}", quiet.summary());
    if let Some(note) = note {
        println!("  {note}");
        println!();
        return;
    }
    for p in paths {
        println!("  {}", p.path.describe());
    }
    println!(
        "  {:<10} {:<4} {:<6} {:<16} {:<18} {:<18} target (netdoctor Δ ≤ {TARGET_NS_ABOVE_FLOOR:.0} ns, ratio ≥ {TARGET_PEER_RATIO:.0})",
        "path", "dir", "rounds", "netdoctor Δ", "NetObserv Δ", "NetObserv/netdoctor"
    );
    for p in paths {
        if p.rows.is_empty() {
            println!("  {:<10} no run carried all three programs", p.path.name());
        }
        for r in &p.rows {
            println!(
                "  {:<10} {:<4} {:<6} {:<16} {:<18} {:<18} {}",
                p.path.name(),
                direction(r.hook),
                r.rounds.len(),
                stat(&r.netdoctor(), 0),
                stat(&r.peer(), 0),
                stat(&r.ratios(), 1),
                verdict(r, quiet).name()
            );
        }
    }
    println!("  run: {}", overall(paths, quiet).name());
    println!();
}

pub(crate) fn json(paths: &[PathRows], quiet: &Quiet, note: Option<&str>) -> Value {
    json!({
        "skipped": note,
        "machine": quiet.json(),
        "verdict": overall(paths, quiet).name(),
        "paths": paths.iter().map(|p| json!({
            "path": p.path.name(),
            "describe": p.path.describe(),
            "directions": p.rows.iter().map(|r| json!({
                "hook": r.hook.name(),
                "rounds": r.rounds.len(),
                "netdoctor_above_floor_ns": r.netdoctor(),
                "netobserv_above_floor_ns": r.peer(),
                "floor_ns": r.floor(),
                "median_netdoctor_above_floor_ns": median(&r.netdoctor()),
                "median_netobserv_above_floor_ns": median(&r.peer()),
                "median_ratio": median(&r.ratios()),
                "verdict": verdict(r, quiet).name(),
            })).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    })
}

//! Summaries over the packet section's runs: medians, throughput per configuration against
//! the baseline, per-program cost above the floor, CPU shares.

use crate::args::Config;
use crate::packet::run::{Hook, Kind, ProgRun, Role, Run};

/// Median ns/run of the empty tc programs over the packet section's single-stream runs.
pub(crate) fn packet_floor(runs: &[Run]) -> Option<f64> {
    let v: Vec<f64> = runs
        .iter()
        .filter(|r| r.parallel == 1)
        .flat_map(|r| r.programs.iter())
        .filter(|p| p.role == Role::Floor && p.hook != Hook::Xdp)
        .filter_map(ProgRun::ns_per_run)
        .collect();
    median(&v)
}

pub(crate) fn median(values: &[f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

pub(crate) fn min_max(values: &[f64]) -> (f64, f64) {
    values
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &v| {
            (lo.min(v), hi.max(v))
        })
}

#[derive(Debug, Clone)]
pub(crate) struct ThroughputRow {
    pub(crate) kind: Kind,
    pub(crate) parallel: u32,
    pub(crate) runs: Vec<f64>,
    pub(crate) median: f64,
    /// Median over the baseline's median.
    pub(crate) ratio: Option<f64>,
    /// For netdoctor in an XDP mode: median over the median of the same mode with only the
    /// empty programs attached. Native XDP on a veth costs the transfer its GSO super-packets
    /// whatever program is attached (the empty one keeps ~30 % of the baseline), so this,
    /// not `ratio`, is what netdoctor costs there.
    pub(crate) vs_empty: Option<f64>,
}

impl ThroughputRow {
    /// The ratio the target applies to: against the empty programs in the same mode where
    /// they ran, else against the baseline.
    pub(crate) fn judged(&self) -> Option<f64> {
        self.vs_empty.or(self.ratio)
    }
}

#[derive(Debug, Clone)]
pub(crate) struct ProgRow {
    pub(crate) config: Config,
    pub(crate) parallel: u32,
    pub(crate) hook: Hook,
    pub(crate) name: String,
    pub(crate) ns: Vec<f64>,
    pub(crate) floor_ns: Vec<f64>,
    pub(crate) median_ns: Option<f64>,
    pub(crate) median_floor: Option<f64>,
    /// Median over runs of (netdoctor − floor) when both come from the same run, else the
    /// difference of the medians.
    pub(crate) above_floor: Option<f64>,
    pub(crate) floor_same_run: bool,
    pub(crate) runs_per_s: Option<f64>,
    pub(crate) segments_per_run: Option<f64>,
    /// Median over runs of the program's run time above the floor (Δ × runs) as a share
    /// of the CPU time the machine spent busy in that run: what a CPU-bound transfer loses
    /// to it.
    pub(crate) cpu_share: Option<f64>,
}

/// Per configuration, the CPU share of each program that has one.
pub(crate) fn cpu_shares(rows: &[ProgRow]) -> Vec<(Config, Vec<(String, f64)>)> {
    let mut out: Vec<(Config, Vec<(String, f64)>)> = Vec::new();
    for r in rows {
        let Some(share) = r.cpu_share else { continue };
        match out.iter_mut().find(|(c, _)| *c == r.config) {
            Some((_, v)) => v.push((r.name.clone(), share)),
            None => out.push((r.config, vec![(r.name.clone(), share)])),
        }
    }
    out
}

pub(crate) fn throughput_rows(runs: &[Run], parallel: u32) -> Vec<ThroughputRow> {
    let mut kinds: Vec<Kind> = Vec::new();
    for r in runs.iter().filter(|r| r.parallel == parallel) {
        if !kinds.contains(&r.kind) {
            kinds.push(r.kind);
        }
    }
    let gbps = |k: Kind| -> Vec<f64> {
        runs.iter()
            .filter(|r| r.kind == k && r.parallel == parallel)
            .map(|r| r.gbps)
            .collect()
    };
    let base = median(&gbps(Kind::Baseline));
    kinds
        .into_iter()
        .filter_map(|k| {
            let v = gbps(k);
            let m = median(&v)?;
            let empty = match k {
                Kind::Netdoctor(c) => median(&gbps(Kind::Floor(c))),
                _ => None,
            };
            Some(ThroughputRow {
                kind: k,
                parallel,
                median: m,
                ratio: base
                    .filter(|b| *b > 0.0 && k != Kind::Baseline)
                    .map(|b| m / b),
                vs_empty: empty.filter(|e| *e > 0.0).map(|e| m / e),
                runs: v,
            })
        })
        .collect()
}

pub(crate) fn prog_rows(runs: &[Run], parallel: u32, configs: &[Config]) -> Vec<ProgRow> {
    let mut rows = Vec::new();
    for &config in configs {
        let nd_runs: Vec<&Run> = runs
            .iter()
            .filter(|r| r.kind == Kind::Netdoctor(config) && r.parallel == parallel)
            .collect();
        if nd_runs.is_empty() {
            continue;
        }
        let floor_runs: Vec<&Run> = runs
            .iter()
            .filter(|r| r.kind == Kind::Floor(config) && r.parallel == parallel)
            .collect();
        let mut hooks: Vec<Hook> = nd_runs
            .iter()
            .flat_map(|r| {
                r.programs
                    .iter()
                    .filter(|p| p.role == Role::Netdoctor)
                    .map(|p| p.hook)
            })
            .collect();
        hooks.sort();
        hooks.dedup();
        for hook in hooks {
            let ns: Vec<f64> = nd_runs
                .iter()
                .filter_map(|r| r.prog(Role::Netdoctor, hook)?.ns_per_run())
                .collect();
            let same_run = nd_runs.iter().any(|r| r.prog(Role::Floor, hook).is_some());
            let (floor_ns, above): (Vec<f64>, Option<f64>) = if same_run {
                let floor_ns: Vec<f64> = nd_runs
                    .iter()
                    .filter_map(|r| r.prog(Role::Floor, hook)?.ns_per_run())
                    .collect();
                let diffs: Vec<f64> = nd_runs
                    .iter()
                    .filter_map(|r| {
                        Some(
                            r.prog(Role::Netdoctor, hook)?.ns_per_run()?
                                - r.prog(Role::Floor, hook)?.ns_per_run()?,
                        )
                    })
                    .collect();
                (floor_ns, median(&diffs))
            } else {
                let floor_ns: Vec<f64> = floor_runs
                    .iter()
                    .filter_map(|r| r.prog(Role::Floor, hook)?.ns_per_run())
                    .collect();
                let above = median(&ns).zip(median(&floor_ns)).map(|(a, b)| a - b);
                (floor_ns, above)
            };
            let rates: Vec<f64> = nd_runs
                .iter()
                .filter_map(|r| {
                    let p = r.prog(Role::Netdoctor, hook)?;
                    (r.secs > 0).then(|| p.runs as f64 / f64::from(r.secs))
                })
                .collect();
            let segs: Vec<f64> = nd_runs
                .iter()
                .filter_map(|r| r.segments_per_run(hook))
                .collect();
            let median_floor = median(&floor_ns);
            let shares: Vec<f64> = nd_runs
                .iter()
                .filter_map(|r| {
                    let p = r.prog(Role::Netdoctor, hook)?;
                    let floor = match r.prog(Role::Floor, hook) {
                        Some(f) => f.ns_per_run()?,
                        None => median_floor?,
                    };
                    let above = (p.ns_per_run()? - floor).max(0.0) * p.runs as f64;
                    let busy = r.cpu_busy_ns.filter(|b| *b > 0)? as f64;
                    Some(above / busy)
                })
                .collect();
            let name = nd_runs
                .iter()
                .find_map(|r| r.prog(Role::Netdoctor, hook).map(|p| p.name.clone()))
                .unwrap_or_default();
            rows.push(ProgRow {
                config,
                parallel,
                hook,
                name,
                median_ns: median(&ns),
                median_floor,
                cpu_share: median(&shares),
                above_floor: above,
                floor_same_run: same_run,
                runs_per_s: median(&rates),
                segments_per_run: median(&segs),
                ns,
                floor_ns,
            });
        }
    }
    rows
}

//! The kernel lane: netdoctor on the kernels its users run. Each of Debian's 5.10, 6.1 and
//! 6.12 kernels is booted in a virtme-ng guest (qemu TCG) and runs every case of
//! `tests/vm/cases.sh` with the built binary; the host kernel runs the same cases. Every
//! kernel is checked against what it must give (lane_checks/cases.rs); all kernels run, and a
//! failure names the kernel, the case and shows the case's stderr (with -v: libbpf's and
//! the verifier's log) and its JSON. A kernel whose run fails runs once more, alone, and
//! fails the lane only if that run fails too (netem paths, iperf3 and TCG timing fail a run
//! now and then); the first run's failures are printed either way. The signals each kernel
//! gave are written to `target/kernel-matrix.md`, the source of the README's kernel table.

mod lane_checks;

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result};
use netdoctor_lab::ci;
use netdoctor_lab::kernel_lane::{self, Run, Signals};

/// What the checks made of one kernel's run.
struct Checked {
    /// The kernel table's row.
    row: String,
    /// The wall times of the run and its suites, a line each.
    times: String,
    /// Each failure with its evidence.
    failures: Vec<String>,
}

/// Checks every case of `run` against what its kernel must give.
fn check_run(run: &Run) -> Checked {
    let mut s = Signals::default();
    let mut failures = Vec::new();
    if let Some(e) = &run.error {
        let log = run.text("cases.log");
        let tail: Vec<&str> = log.lines().rev().take(30).collect();
        failures.push(format!(
            "kernel {} ({}): {e}\n{}",
            run.name,
            run.kernel(),
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        ));
    }
    // Development runs of some suites alone (kernel_lane::only_suites) have no base cases.
    let base = kernel_lane::only_suites().is_none();
    for (case, check) in lane_checks::cases::CASES.iter().filter(|_| base) {
        if let Err(e) = check(run, &mut s) {
            failures.push(format!(
                "kernel {} ({}), case {case}: {e:#}\n{}",
                run.name,
                run.kernel(),
                run.evidence(case)
            ));
        }
    }
    let mut more = lane_checks::Failures::default();
    if s.wireguard_mtu == Some(true) {
        let ok = lane_checks::wg_netlink::check(run);
        s.wireguard_netlink = Some(ok.is_ok());
        more.check("wgshow", run, || ok);
    }
    if kernel_lane::runs_suite(&run.name, "tunnels") {
        let (bonds, overlays) = lane_checks::tunnels::check(run, &mut more);
        (s.bonds, s.overlays) = (Some(bonds), Some(overlays));
    }
    if kernel_lane::runs_suite(&run.name, "limits") {
        s.limits = Some(lane_checks::limits::check(run, &mut more));
    }
    if kernel_lane::runs_suite(&run.name, "wg_path") {
        s.wg_path = lane_checks::wg_path::check(run, &mut more);
    }
    if kernel_lane::runs_suite(&run.name, "reorder") {
        s.reorder = Some(lane_checks::reorder::check(run, &mut more));
    }
    if kernel_lane::runs_suite(&run.name, "wan") {
        let (wan, estimates) = lane_checks::wan::check(run, &mut more);
        s.wan = Some(wan);
        println!("{estimates}");
    }
    for f in more.0 {
        failures.push(format!("kernel {} ({}), case {f}", run.name, run.kernel()));
    }
    let mut times = String::new();
    let suites = kernel_lane::suites(&run.name).split_whitespace();
    for suite in std::iter::once("base").chain(suites) {
        if let Some(t) = suite_time(&run.text(&format!("{suite}.time"))) {
            let _ = writeln!(times, "{}: {suite}: {t}", run.name);
        }
    }
    let _ = writeln!(times, "{}: {:.0} s", run.name, run.elapsed.as_secs_f64());
    Checked {
        row: s.row(run),
        times,
        failures,
    }
}

/// A suite's (or the base cases') wall time and the CPU time the machine was busy meanwhile,
/// from the two lines of its SUITE.time ("second busy-seconds" each; see tests/vm/cases.sh).
fn suite_time(text: &str) -> Option<String> {
    let stamps: Vec<Vec<u64>> = text
        .lines()
        .map(|l| {
            l.split_whitespace()
                .filter_map(|w| w.parse().ok())
                .collect()
        })
        .collect();
    match &stamps[..] {
        [start, end] => {
            let wall = end.first()?.checked_sub(*start.first()?)?;
            Some(match (start.get(1), end.get(1)) {
                (Some(a), Some(b)) => format!("{wall} s, {} s of CPU", b.saturating_sub(*a)),
                _ => format!("{wall} s"),
            })
        }
        _ => None,
    }
}

/// CPU seconds (user and system) of every child this process has waited for, their own
/// children included: the guests' qemu and the host's cases. The lane's wall time depends on
/// what else the machine runs; this does not.
fn children_cpu_s() -> f64 {
    use nix::sys::resource::{getrusage, UsageWho};
    getrusage(UsageWho::RUSAGE_CHILDREN).map_or(-1.0, |u| {
        let s = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 / 1e6;
        s(u.user_time()) + s(u.system_time())
    })
}

#[test]
fn kernel_lane() -> Result<()> {
    if !(ci::require_root_or_skip() && ci::require_bpf_or_skip()) {
        return Ok(());
    }
    if let Some(missing) = kernel_lane::missing_tools() {
        ci::skip(&format!("the kernel lane needs {missing}"));
        return Ok(());
    }
    let netdoctor = netdoctor_lab::netdoctor::binary()?;
    let work = tempfile::Builder::new()
        .prefix("nd-lane-")
        .tempdir_in("/tmp")?;
    // ND_LANE_KEEP=1 keeps every case file for a look afterwards.
    let mut work = work;
    if std::env::var_os("ND_LANE_KEEP").is_some() {
        work.disable_cleanup(true);
        println!("keeping the case files in {}", work.path().display());
    }
    let started = std::time::Instant::now();
    let (runs, mut failures) = kernel_lane::run_all(&netdoctor, work.path());
    let lane_time = started.elapsed();
    // Before any kernel runs again alone, whose CPU is not the lane's at once.
    let lane_cpu = children_cpu_s();
    let mut table = String::from(kernel_lane::TABLE_HEADER);
    let mut times = String::new();
    for first in &runs {
        let mut checked = check_run(first);
        if !checked.failures.is_empty() {
            // Netem paths, iperf3 and TCG timing make a run fail now and then where the
            // next one passes: such a kernel runs once more, alone, and fails the lane only
            // if it fails again. The first run's failures are printed either way.
            println!(
                "== kernel {}: {} failure(s) in the first run; running it once more\n\n{}\n",
                first.name,
                checked.failures.len(),
                checked.failures.join("\n\n")
            );
            let dir = work.path().join(format!("{}-again", first.name));
            let again = std::fs::create_dir_all(&dir)
                .map_err(anyhow::Error::from)
                .and_then(|()| match first.name.as_str() {
                    "host" => Ok(kernel_lane::run_host(&netdoctor, &dir)),
                    name => kernel_lane::run_guest(name, &netdoctor, &dir),
                });
            match again {
                Ok(run) => {
                    let second = check_run(&run);
                    let verdict = if second.failures.is_empty() {
                        "passed"
                    } else {
                        "failed again"
                    };
                    println!("== kernel {}: the second run {verdict}", first.name);
                    checked = second;
                }
                Err(e) => checked
                    .failures
                    .push(format!("kernel {}: {e:#}", first.name)),
            }
        }
        failures.extend(checked.failures);
        let _ = writeln!(table, "{}", checked.row);
        times.push_str(&checked.times);
    }
    let _ = writeln!(
        times,
        "the whole lane (every kernel at once): {:.0} s, {:.0} s of CPU (qemu and the host's \
         cases; two idle cores need at least half that)",
        lane_time.as_secs_f64(),
        lane_cpu
    );
    println!("{table}\nwall time per kernel (boot and every case):\n{times}");
    let out = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/kernel-matrix.md");
    std::fs::write(&out, format!("{table}\n{times}"))
        .with_context(|| format!("writing {}", out.display()))?;
    if failures.is_empty() {
        return Ok(());
    }
    // The whole evidence first, then one line per failure: CI shows a log's tail.
    println!(
        "== the kernel lane's failures, in full\n\n{}\n",
        failures.join("\n\n")
    );
    let summary: Vec<String> = failures.iter().map(|f| first_line(f)).collect();
    anyhow::bail!(
        "{} failure(s) (in full above):\n{}",
        failures.len(),
        summary.join("\n")
    )
}

/// A failure's first line, cut to 300 characters.
fn first_line(failure: &str) -> String {
    let line = failure.lines().next().unwrap_or_default();
    match line.char_indices().nth(300) {
        Some((at, _)) => format!("{}...", &line[..at]),
        None => line.to_owned(),
    }
}

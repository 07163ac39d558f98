//! SIGINT and SIGTERM during a one-shot command attached by netlink (what kernels before
//! 6.6 get): it detaches its tc filters and XDP and removes the clsact qdisc it created.
//! SIGTERM exits 143 with one line saying so; the first Ctrl-C during the observation of
//! `diagnose` or `flows` ends the observation, which is reported. Its twins: a clsact that was
//! there before stays, with someone else's filter on it.

use std::process::ExitStatus;
use std::time::Duration;

use anyhow::{ensure, Context, Result};
use netdoctor_lab::attached::{attached, Attached};
use netdoctor_lab::diagnosis::Diagnosis;
use netdoctor_lab::{lab_guard, BgProcess, Netns, PairTopology};
use nix::sys::signal::Signal;

use crate::dataplane_netns::helpers::{add_foreign_filter, has_clsact, start, IF};

/// Sends `signal` and waits (10 s at most); returns the exit status and stderr.
fn signal(process: &mut BgProcess, signal: Signal) -> Result<(ExitStatus, String)> {
    process.signal(signal)?;
    let status = process.wait_timeout(Duration::from_secs(10))?;
    Ok((status, process.stderr()?))
}

/// Requires exit code 130 (SIGINT) or 143 (SIGTERM) and the one line naming `signal`.
fn stopped_by(what: &str, (status, stderr): &(ExitStatus, String), signal: Signal) -> Result<()> {
    let code = match signal {
        Signal::SIGINT => 130,
        _ => 143,
    };
    ensure!(
        status.code() == Some(code),
        "`{what}` after {signal}: {status}, expected exit code {code}; stderr: {stderr}"
    );
    let line = format!("netdoctor: stopped by {signal}");
    ensure!(
        stderr.contains(&line),
        "`{what}`: no {line:?} on stderr: {stderr}"
    );
    Ok(())
}

/// Sends `signal`; requires its exit code within 10 s and the one line naming it.
fn stop(mut process: BgProcess, sig: Signal) -> Result<()> {
    let ended = signal(&mut process, sig)?;
    stopped_by(process.label(), &ended, sig)
}

/// Sends Ctrl-C to a diagnosis observing for 60 s; requires, within 20 s, its report of the
/// shorter window, saying so ([`Diagnosis::expect_ended_early`]).
fn ctrl_c_reports(what: &str, process: &mut BgProcess) -> Result<()> {
    process.signal(Signal::SIGINT)?;
    let status = process.wait_timeout(Duration::from_secs(20))?;
    let code = status
        .code()
        .with_context(|| format!("`{what}` was killed after Ctrl-C ({status})"))?;
    Diagnosis::parse(what, code, &process.stdout()?, &process.stderr()?)?.expect_ended_early(30.0)
}

/// A diagnosis attached by netlink, stopped by `sig` (SIGINT: its first Ctrl-C, which ends
/// the observation early): nothing left, then its exit code (SIGINT: its report).
fn diagnose_stopped(ns: &Netns, sig: Signal, more: &[&str]) -> Result<()> {
    let mut args = vec![
        "diagnose",
        IF,
        "--duration",
        "60s",
        "--no-probe",
        "--attach",
        "netlink",
        "--json",
    ];
    args.extend_from_slice(more);
    let what = args.join(" ");
    let mut process = start(ns, &args, "netdoctor: observing")?;
    let running = attached(ns, IF)?;
    ensure!(
        running.netlink_leftovers() == 2 && has_clsact(ns)?,
        "`{what}` while running: {running:#?}"
    );
    // A second of observation, so that the report has a window to show.
    std::thread::sleep(Duration::from_secs(1));
    let ended = if sig == Signal::SIGINT {
        ctrl_c_reports(&what, &mut process)?;
        None
    } else {
        Some(signal(&mut process, sig)?)
    };
    let left = attached(ns, IF)?;
    ensure!(left.nothing(), "after {sig}, `{what}` left: {left:#?}");
    ensure!(
        !has_clsact(ns)?,
        "after {sig}, `{what}` left its clsact qdisc: {}",
        ns.run(&["tc", "qdisc", "show", "dev", IF])?
    );
    ended.map_or(Ok(()), |ended| stopped_by(&what, &ended, sig))
}

#[test]
fn ctrl_c_and_sigterm_detach_netlink_attachments_and_report_or_exit_143() -> Result<()> {
    lab_guard!("tc");
    let pair = PairTopology::new(1500)?;
    let ns = &pair.a;
    // tc ingress and egress filters on a clsact netdoctor creates.
    diagnose_stopped(ns, Signal::SIGINT, &[])?;
    // Generic XDP on ingress, a tc filter on egress.
    let xdp = ["--ingress", "xdp", "--xdp-mode", "generic"];
    diagnose_stopped(ns, Signal::SIGTERM, &xdp)?;

    // flows and drops: SIGTERM stops them (flows detaching); the first SIGINT of a flows
    // observation ends the window, and it reports.
    let flows = [
        "flows",
        IF,
        "--duration",
        "60s",
        "--attach",
        "netlink",
        "--json",
    ];
    stop(start(ns, &flows, "netdoctor: watching")?, Signal::SIGTERM)?;
    ensure!(attached(ns, IF)?.nothing() && !has_clsact(ns)?);
    let drops = ["drops", "--duration", "60s"];
    stop(start(ns, &drops, "netdoctor: counting")?, Signal::SIGTERM)?;
    let mut watch = start(ns, &flows, "netdoctor: watching")?;
    watch.signal(Signal::SIGINT)?;
    let status = watch.wait_timeout(Duration::from_secs(20))?;
    ensure!(
        status.success() && watch.stdout()?.contains("\"counters\""),
        "flows after Ctrl-C: {status}, stdout {}, stderr {}",
        watch.stdout()?,
        watch.stderr()?
    );
    ensure!(attached(ns, IF)?.nothing() && !has_clsact(ns)?);
    Ok(())
}

#[test]
fn a_clsact_that_was_there_before_stays_after_sigint() -> Result<()> {
    lab_guard!("tc");
    let pair = PairTopology::new(1500)?;
    let ns = &pair.a;
    // Someone else's clsact, with their filter on it.
    ns.run(&["tc", "qdisc", "add", "dev", IF, "clsact"])?;
    add_foreign_filter(ns)?;
    let theirs = ns.run(&["tc", "filter", "show", "dev", IF, "ingress"])?;
    let args = [
        "diagnose",
        IF,
        "--duration",
        "60s",
        "--no-probe",
        "--attach",
        "netlink",
        "--json",
    ];
    let mut process = start(ns, &args, "netdoctor: observing")?;
    let running = attached(ns, IF)?;
    ensure!(running.tc_ingress.contains("nd_tc_ingress"), "{running:#?}");
    std::thread::sleep(Duration::from_secs(1));
    ctrl_c_reports(&args.join(" "), &mut process)?;
    let left = attached(ns, IF)?;
    ensure!(
        has_clsact(ns)?
            && left
                == Attached {
                    tc_ingress: theirs.trim().to_owned(),
                    ..Attached::default()
                },
        "their clsact and filter must stay, ours go: {left:#?}"
    );

    // The same clsact empty (theirs, from before netdoctor): it stays too.
    ns.run(&["tc", "filter", "del", "dev", IF, "ingress"])?;
    let process = start(ns, &args, "netdoctor: observing")?;
    stop(process, Signal::SIGTERM)?;
    ensure!(attached(ns, IF)?.nothing(), "{:#?}", attached(ns, IF)?);
    ensure!(
        has_clsact(ns)?,
        "an empty clsact that was there before netdoctor was removed"
    );
    Ok(())
}

//! SIGKILL leaves nothing attached (links); netlink leftovers are swept whatever their
//! handle, with the clsact qdisc they leave empty (not one with someone else's filter), and
//! a running netlink instance is spared.

use std::time::Duration;

use anyhow::{ensure, Result};
use netdoctor_lab::attached::{attached, wait_nothing_attached, Attached};
use netdoctor_lab::netdoctor::{self, Watch};
use netdoctor_lab::{lab_guard, traffic, Netns, PairTopology, PingOpts};
use nix::sys::signal::Signal;

use crate::dataplane_netns::helpers::{add_foreign_filter, has_clsact, ip, our_filters, start, IF};

fn kill9(watch: &mut Watch) -> Result<()> {
    let process = watch.process_mut();
    process.signal(Signal::SIGKILL)?;
    let status = process.wait_timeout(Duration::from_secs(10))?;
    ensure!(
        !status.success(),
        "netdoctor exited normally instead of dying: {status}"
    );
    Ok(())
}

#[test]
fn sigkill_leaves_no_link_attachment() -> Result<()> {
    lab_guard!("tc");
    let pair = PairTopology::new(1500)?;
    let ns = &pair.a;
    let ifname = PairTopology::IFNAME;
    assert!(attached(ns, ifname)?.nothing(), "fresh veth has programs");

    // tcx ingress + egress.
    let mut watch = Watch::start(ns, &["flows", ifname, "--duration", "60s"])?;
    let state = attached(ns, ifname)?;
    assert_eq!(
        state,
        Attached {
            tcx_ingress: vec!["nd_tc_ingress".into()],
            tcx_egress: vec!["nd_tc_egress".into()],
            ..Attached::default()
        },
        "while netdoctor runs"
    );
    kill9(&mut watch)?;
    wait_nothing_attached(ns, &[ifname], Duration::from_secs(3))?;

    // XDP link + tcx egress.
    let mut watch = Watch::start(
        ns,
        &["flows", ifname, "--duration", "60s", "--ingress", "xdp"],
    )?;
    let state = attached(ns, ifname)?;
    assert_eq!(
        state,
        Attached {
            tcx_egress: vec!["nd_tc_egress".into()],
            xdp: true,
            ..Attached::default()
        },
        "while netdoctor runs with --ingress xdp"
    );
    kill9(&mut watch)?;
    wait_nothing_attached(ns, &[ifname], Duration::from_secs(3))?;
    Ok(())
}

#[test]
fn sigkill_netlink_leftovers_are_swept_at_next_start() -> Result<()> {
    lab_guard!("tc");
    let pair = PairTopology::new(1500)?;
    let ns = &pair.a;
    let ifname = PairTopology::IFNAME;

    // Legacy clsact filters survive SIGKILL: this proves the checks see them.
    let mut watch = Watch::start(
        ns,
        &["flows", ifname, "--duration", "60s", "--attach", "netlink"],
    )?;
    let running = attached(ns, ifname)?;
    assert!(
        running.tc_ingress.contains("nd_tc_ingress")
            && running.tc_egress.contains("nd_tc_egress")
            && running.tcx_ingress.is_empty()
            && running.tcx_egress.is_empty()
            && !running.xdp,
        "--attach netlink while running: {running:#?}"
    );
    kill9(&mut watch)?;
    std::thread::sleep(Duration::from_millis(300));
    let left = attached(ns, ifname)?;
    assert_eq!(left, running, "netlink filters must survive SIGKILL");

    // The next start sweeps them; this one attaches netlink XDP + egress
    // filter, and is killed too.
    let mut watch = Watch::start(
        ns,
        &[
            "flows",
            ifname,
            "--duration",
            "60s",
            "--attach",
            "netlink",
            "--ingress",
            "xdp",
        ],
    )?;
    let warning = format!(
        "removed {} program(s) a previous netdoctor left attached",
        left.netlink_leftovers()
    );
    let stderr = watch.stderr()?;
    assert!(
        stderr.contains(&warning),
        "expected {warning:?} in {stderr}"
    );
    let running = attached(ns, ifname)?;
    assert!(
        running.xdp
            && running.tc_ingress.is_empty()
            && running.tc_egress.contains("nd_tc_egress")
            && running.tcx_ingress.is_empty()
            && running.tcx_egress.is_empty(),
        "--attach netlink --ingress xdp while running: {running:#?}"
    );
    kill9(&mut watch)?;
    std::thread::sleep(Duration::from_millis(300));
    let left = attached(ns, ifname)?;
    assert_eq!(left, running, "netlink XDP and filter must survive SIGKILL");
    assert_eq!(left.netlink_leftovers(), 2);

    // A normal run sweeps, warns, and leaves nothing when it exits.
    let out = netdoctor::run(
        Some(ns),
        &["flows", ifname, "--attach", "netlink", "--duration", "1s"],
        Duration::from_secs(60),
    )?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{}: {stderr}", out.status);
    let warning = format!(
        "removed {} program(s) a previous netdoctor left attached",
        left.netlink_leftovers()
    );
    assert!(
        stderr.contains(&warning),
        "expected {warning:?} in {stderr}"
    );
    let end = attached(ns, ifname)?;
    assert!(end.nothing(), "after a clean netlink run: {end:#?}");
    Ok(())
}
#[test]
fn sweep_spares_a_running_netlink_netdoctor() -> Result<()> {
    lab_guard!("tc", "ping");
    let pair = PairTopology::new(1500)?;
    let ns = &pair.a;
    let ifname = PairTopology::IFNAME;
    let first = Watch::start(
        ns,
        &[
            "flows",
            ifname,
            "--duration",
            "60s",
            "--attach",
            "netlink",
            "--json",
        ],
    )?;
    let before = attached(ns, ifname)?;
    assert_eq!(before.netlink_leftovers(), 2, "{before:#?}");

    // A second netdoctor on the same interface while the first still runs:
    // the first one's filters are in use, not leftovers of a dead process.
    let out = netdoctor::run(
        Some(ns),
        &["flows", ifname, "--duration", "1s"],
        Duration::from_secs(60),
    )?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{}: {stderr}", out.status);
    let after = attached(ns, ifname)?;
    let ping = traffic::ping(
        ns,
        PairTopology::B_IP,
        &PingOpts {
            count: 5,
            interval_secs: 0.02,
            ..PingOpts::default()
        },
    )?;
    let report = first.interrupt()?;
    let a = ip(PairTopology::A_IP)?;
    let b = ip(PairTopology::B_IP)?;
    let counted = report
        .flows
        .iter()
        .filter(|f| f.direction == "egress" && f.protocol == 1 && f.src == a && f.dst == b)
        .map(|f| f.packets)
        .sum::<u64>();
    println!(
        "second run's stderr: {}\nfilters of the running netdoctor after it: {after:#?}\n\
         the first netdoctor counted {counted} of {} echo requests sent afterwards",
        stderr.trim(),
        ping.transmitted
    );
    assert!(
        !stderr.contains("left attached"),
        "a running netdoctor's filters were swept as leftovers: {stderr}"
    );
    assert_eq!(after, before, "the running netdoctor lost its attachments");
    assert_eq!(
        counted,
        u64::from(ping.transmitted),
        "the running netdoctor stopped counting"
    );
    Ok(())
}

/// SIGKILL a netlink `flows`; the leftovers, clsact included.
fn killed_netlink_run(ns: &Netns) -> Result<Attached> {
    let flows = ["flows", IF, "--duration", "60s", "--attach", "netlink"];
    let mut process = start(ns, &flows, "netdoctor: watching")?;
    process.signal(Signal::SIGKILL)?;
    process.wait_timeout(Duration::from_secs(10))?;
    std::thread::sleep(Duration::from_millis(300));
    let left = attached(ns, IF)?;
    ensure!(
        left.netlink_leftovers() == 2 && has_clsact(ns)?,
        "after SIGKILL: {left:#?}"
    );
    Ok(left)
}

#[test]
fn the_sweep_removes_a_killed_netdoctors_clsact_only_when_empty() -> Result<()> {
    lab_guard!("tc");
    let pair = PairTopology::new(1500)?;
    let ns = &pair.a;
    let sweep = || {
        netdoctor::run(
            Some(ns),
            &["flows", IF, "--duration", "1s"],
            Duration::from_secs(60),
        )
    };
    // Only netdoctor's filters on it: the next start removes them and the clsact.
    killed_netlink_run(ns)?;
    let out = sweep()?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    ensure!(out.status.success(), "{}: {stderr}", out.status);
    ensure!(
        stderr.contains("removed 2 program(s) a previous netdoctor left attached, and the clsact qdisc it left empty"),
        "{stderr}"
    );
    ensure!(attached(ns, IF)?.nothing() && !has_clsact(ns)?);

    // Someone else's filter joined it meanwhile: the clsact stays, with that filter.
    killed_netlink_run(ns)?;
    add_foreign_filter(ns)?;
    let out = sweep()?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    ensure!(out.status.success(), "{}: {stderr}", out.status);
    let left = attached(ns, IF)?;
    ensure!(
        has_clsact(ns)?
            && left.tc_ingress.contains("u32")
            && !left.tc_ingress.contains("nd_tc")
            && left.tc_egress.is_empty(),
        "their filter and the clsact must stay: {left:#?}"
    );
    Ok(())
}

/// Starts `n` netlink `flows` at once, each with a filter of its own in each direction,
/// and kills them all: their leftovers.
fn killed_netlink_runs(ns: &Netns, n: usize) -> Result<()> {
    let flows = ["flows", IF, "--duration", "60s", "--attach", "netlink"];
    let mut running = Vec::new();
    for _ in 0..n {
        running.push(start(ns, &flows, "netdoctor: watching")?);
    }
    for mut process in running {
        process.signal(Signal::SIGKILL)?;
        process.wait_timeout(Duration::from_secs(10))?;
    }
    std::thread::sleep(Duration::from_millis(300));
    Ok(())
}

/// The handles of netdoctor's filters on [`IF`], ingress and egress; each direction's must
/// be `n` different ones.
fn our_handles(ns: &Netns, n: usize) -> Result<[Vec<String>; 2]> {
    let mut both = [Vec::new(), Vec::new()];
    for (i, (dir, name)) in [("ingress", "nd_tc_ingress"), ("egress", "nd_tc_egress")]
        .into_iter()
        .enumerate()
    {
        let mut handles = our_filters(ns, dir, name)?;
        handles.sort();
        handles.dedup();
        ensure!(
            handles.len() == n,
            "{n} {dir} filters of netdoctor at their own handles expected, got {handles:?}"
        );
        both[i] = handles;
    }
    Ok(both)
}

#[test]
fn the_sweep_removes_leftovers_at_every_handle_and_spares_a_live_one() -> Result<()> {
    lab_guard!("tc", "ping");
    let pair = PairTopology::new(1500)?;
    let ns = &pair.a;
    let sweep = || -> Result<String> {
        let out = netdoctor::run(
            Some(ns),
            &["flows", IF, "--duration", "1s"],
            Duration::from_secs(60),
        )?;
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        ensure!(out.status.success(), "{}: {stderr}", out.status);
        Ok(stderr)
    };

    // Two killed runs: four filters at two handles, all swept, and the clsact with them.
    killed_netlink_runs(ns, 2)?;
    our_handles(ns, 2)?;
    let stderr = sweep()?;
    ensure!(
        stderr.contains("removed 4 program(s) a previous netdoctor left attached, and the clsact qdisc it left empty"),
        "{stderr}"
    );
    ensure!(attached(ns, IF)?.nothing() && !has_clsact(ns)?);

    // A live netlink run beside a killed one: only the killed one's filters go, and the
    // clsact stays under the live one's, which go on counting.
    let live = Watch::start(
        ns,
        &[
            "flows",
            IF,
            "--duration",
            "60s",
            "--attach",
            "netlink",
            "--json",
        ],
    )?;
    let mine = our_handles(ns, 1)?;
    killed_netlink_runs(ns, 1)?;
    our_handles(ns, 2)?;
    let stderr = sweep()?;
    ensure!(
        stderr.contains("removed 2 program(s) a previous netdoctor left attached")
            && !stderr.contains("clsact qdisc it left empty"),
        "{stderr}"
    );
    ensure!(
        our_handles(ns, 1)? == mine,
        "the live run's filters must be all that is left"
    );
    ensure!(has_clsact(ns)?, "the clsact went from under the live run");
    let ping = traffic::ping(
        ns,
        PairTopology::B_IP,
        &PingOpts {
            count: 5,
            interval_secs: 0.02,
            ..PingOpts::default()
        },
    )?;
    let report = live.interrupt()?;
    let (a, b) = (ip(PairTopology::A_IP)?, ip(PairTopology::B_IP)?);
    let counted: u64 = report
        .flows
        .iter()
        .filter(|f| f.direction == "egress" && f.protocol == 1 && f.src == a && f.dst == b)
        .map(|f| f.packets)
        .sum();
    ensure!(
        counted == u64::from(ping.transmitted),
        "the live run counted {counted} of {} echo requests",
        ping.transmitted
    );
    ensure!(attached(ns, IF)?.nothing() && !has_clsact(ns)?);
    Ok(())
}

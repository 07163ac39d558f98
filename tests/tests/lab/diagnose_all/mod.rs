//! `netdoctor diagnose` with no interface, and with several: a host namespace with two
//! wireguard-go tunnels over one veth underlay (its default route), one of them with an MTU
//! that ignores WireGuard's 60 bytes of overhead. One process, one observation window:
//! one report per interface, the broken tunnel named with its finding, the healthy tunnel
//! and the default-route interface with none, the exit code from the worst, and the whole
//! run within `--duration` plus a second from the start of the window. Healthy twin: both
//! tunnels fit, exit 0 and no finding anywhere. The two tunnels share one path-MTU probe
//! toward their common endpoint address.

mod lab;

use std::time::Duration;

use anyhow::{ensure, Context, Result};
use netdoctor_lab::{lab_guard, netdoctor, Netns, PairTopology};

use lab::{
    lab_servers, load_both, report, reports, run_loaded, run_timed, worst_code, TwoTunnels, WINDOW,
};

#[test]
fn no_interface_names_the_broken_tunnel_in_one_window() -> Result<()> {
    lab_guard!("wireguard-go", "wg");
    let lab = TwoTunnels::new(1480)?;
    let (broken, healthy) = (lab.first.a.ifname(), lab.second.a.ifname());
    let window = format!("{}s", WINDOW.as_secs());
    let run = run_timed(&lab.pair.a, &["diagnose", "--duration", &window, "--json"])?;
    let (reports, worst) = reports(&run, 3)?;
    let b = report(&reports, broken)?;
    b.expect_finding("mtu.tunnel_exceeds_underlay", "critical")?;
    for iface in [healthy, PairTopology::IFNAME] {
        let d = report(&reports, iface)?;
        ensure!(
            d.findings().is_empty(),
            "{iface} is healthy but has findings:\n{}",
            d.describe()
        );
    }
    // Both tunnels' endpoints are on b's underlay address: one probe serves both, and
    // both reports have its path MTU.
    let probe_line = format!("probing the path MTU toward {}", PairTopology::B_IP);
    ensure!(
        run.stderr.matches(&probe_line).count() == 1,
        "expected one probe toward {}, stderr: {}",
        PairTopology::B_IP,
        run.stderr
    );
    for iface in [broken, healthy] {
        let d = report(&reports, iface)?;
        ensure!(
            d.fact("tunnel.path_mtu").as_i64() == Some(1500),
            "{iface}: probed path MTU {}",
            d.fact("tunnel.path_mtu")
        );
    }
    ensure!(worst == "critical", "worst is {worst}, expected critical");
    ensure!(
        run.code == 2 && run.code == worst_code(&reports),
        "exit {} is not the worst report's (critical: 2)",
        run.code
    );
    Ok(())
}

#[test]
fn several_named_interfaces_one_summary_line_each() -> Result<()> {
    lab_guard!("wireguard-go", "wg");
    let lab = TwoTunnels::new(1480)?;
    let (broken, healthy) = (lab.first.a.ifname(), lab.second.a.ifname());
    let window = format!("{}s", WINDOW.as_secs());
    let run = run_timed(
        &lab.pair.a,
        &["diagnose", healthy, broken, "--duration", &window],
    )?;
    let lines: Vec<&str> = run.stdout.lines().collect();
    let summary = |iface: &str| {
        lines
            .iter()
            .find(|l| l.trim_start().starts_with(&format!("{iface} ")))
            .copied()
            .unwrap_or_default()
    };
    ensure!(
        lines.first() == Some(&"2 interfaces observed for 3.0s, worst: CRITICAL"),
        "first line: {:?}",
        lines.first()
    );
    ensure!(
        summary(broken).contains("wireguard") && summary(broken).contains("CRITICAL"),
        "summary of {broken}: {:?}",
        summary(broken)
    );
    ensure!(
        summary(healthy).contains("OK") && summary(healthy).ends_with("no findings"),
        "summary of {healthy}: {:?}",
        summary(healthy)
    );
    ensure!(
        !run.stdout
            .contains(&format!("── {} ──", PairTopology::IFNAME)),
        "only the interfaces named are diagnosed"
    );
    // The findings are grouped under their interface: the broken one's under its header.
    let section = run
        .stdout
        .split(&format!("── {broken} ──"))
        .nth(1)
        .context("no section for the broken tunnel")?;
    ensure!(
        section.contains("CRITICAL mtu.tunnel_exceeds_underlay"),
        "{section}"
    );
    ensure!(run.code == 2, "exit {}, expected 2", run.code);
    Ok(())
}

#[test]
fn two_healthy_tunnels_exit_0_with_no_finding() -> Result<()> {
    lab_guard!("wireguard-go", "wg");
    let lab = TwoTunnels::new(1420)?;
    let window = format!("{}s", WINDOW.as_secs());
    let run = run_timed(
        &lab.pair.a,
        &["diagnose", "--all", "--duration", &window, "--json"],
    )?;
    let (reports, worst) = reports(&run, 3)?;
    for d in &reports {
        ensure!(d.findings().is_empty(), "a finding:\n{}", d.describe());
    }
    ensure!(worst.is_null(), "worst is {worst}, expected null");
    ensure!(run.code == 0, "exit {}, expected 0", run.code);
    Ok(())
}

#[test]
fn nothing_to_diagnose_exits_3_saying_what_to_do() -> Result<()> {
    lab_guard!(netns);
    // A namespace with only its loopback: no tunnel, no default route.
    let ns = Netns::new()?;
    let out = netdoctor::run(
        Some(&ns),
        &["diagnose", "--duration", "1s"],
        Duration::from_secs(60),
    )?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    ensure!(
        out.status.code() == Some(3)
            && stderr.contains("nothing to diagnose")
            && stderr.contains("netdoctor diagnose IFACE"),
        "expected exit 3 naming what to do, got {:?}: {stderr}",
        out.status.code()
    );
    ensure!(out.stdout.is_empty(), "no report: {:?}", out.stdout);
    Ok(())
}

/// Both tunnels loaded (iperf3 through each at 100 Mbit/s, both MTUs fitting) during a 5 s
/// window: still one window, the end within a second of it (probes and the per-interface
/// facts included), and no finding on any interface.
#[test]
fn two_loaded_tunnels_end_within_a_second_of_the_window() -> Result<()> {
    lab_guard!("wireguard-go", "wg", "iperf3");
    let lab = TwoTunnels::new(1420)?;
    let _servers = lab_servers(&lab)?;
    let args = ["diagnose", "--duration", "5s", "--json"];
    let run = run_loaded(&lab.pair.a, &args, Duration::from_secs(5), || {
        load_both(&lab)
    })?;
    let (reports, worst) = reports(&run, 3)?;
    for d in &reports {
        ensure!(d.problems().is_empty(), "a problem:\n{}", d.describe());
    }
    for wg in [&lab.first, &lab.second] {
        let d = report(&reports, wg.a.ifname())?;
        ensure!(
            d.fact("traffic.tx_segments").as_i64() > Some(1000),
            "{} carried iperf3's traffic:\n{}",
            wg.a.ifname(),
            d.describe()
        );
    }
    ensure!(worst.is_null() && run.code == 0, "exit {}", run.code);
    Ok(())
}

/// Both loaded, the first at 1480 on a 1500 underlay: its encapsulated packets are
/// fragmented on the shared underlay, and only it is blamed for the fragments; its
/// neighbour at 1420 (another peer, on the same underlay) has no finding.
#[test]
fn a_fragmenting_tunnel_is_not_blamed_on_its_neighbour() -> Result<()> {
    lab_guard!("wireguard-go", "wg", "iperf3");
    let lab = TwoTunnels::with_second_peer(1480, "10.201.0.3")?;
    let _servers = lab_servers(&lab)?;
    let args = ["diagnose", "--duration", "5s", "--json", "--no-probe"];
    let run = run_loaded(&lab.pair.a, &args, Duration::from_secs(5), || {
        load_both(&lab)
    })?;
    let (reports, _) = reports(&run, 3)?;
    let broken = report(&reports, lab.first.a.ifname())?;
    broken.expect_finding("mtu.underlay_fragmentation", "warning")?;
    ensure!(
        broken.fact("tunnel.underlay_fragments").as_i64() > Some(100),
        "the broken tunnel's fragments:\n{}",
        broken.describe()
    );
    let healthy = report(&reports, lab.second.a.ifname())?;
    ensure!(
        healthy.problems().is_empty()
            && healthy.fact("tunnel.underlay_fragments").as_i64() == Some(0),
        "the neighbour is blamed:\n{}",
        healthy.describe()
    );
    Ok(())
}

//! `netdoctor diagnose` with no interface, and with several: a host namespace with two
//! wireguard-go tunnels over one veth underlay (its default route), one of them with an MTU
//! that ignores WireGuard's 60 bytes of overhead. One process, one observation window:
//! one report per interface, the broken tunnel named with its finding, the healthy tunnel
//! and the default-route interface with none, the exit code from the worst, and the whole
//! run within `--duration` plus a second from the start of the window. Healthy twin: both
//! tunnels fit, exit 0 and no finding anywhere. The two tunnels share one path-MTU probe
//! toward their common endpoint address.

use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use netdoctor_lab::diagnosis::Diagnosis;
use netdoctor_lab::observe::{Wall, OBSERVING};
use netdoctor_lab::{
    lab_guard, netdoctor, traffic, Iperf3Opts, Iperf3Server, Netns, PairTopology, WgConfig,
    WgTunnel,
};
use serde_json::Value;

/// The observation window of every run here.
const WINDOW: Duration = Duration::from_secs(3);

/// Two WireGuard tunnels from side a to side b of one veth pair, a's default route over
/// the veth.
struct TwoTunnels {
    // Declared first: dropped (wireguard-go stopped) before the namespaces.
    first: WgTunnel,
    second: WgTunnel,
    pair: PairTopology,
}

impl TwoTunnels {
    /// The first tunnel with MTU `first_mtu`, the second with 1420 (what fits 1500 with
    /// room to spare), both to b's address on the veth.
    fn new(first_mtu: u32) -> Result<Self> {
        Self::with_second_peer(first_mtu, PairTopology::B_IP)
    }

    /// [`TwoTunnels::new`] with the second tunnel's peer at `second_peer`, another address
    /// of b on the veth (added here when it is not b's first).
    fn with_second_peer(first_mtu: u32, second_peer: &str) -> Result<Self> {
        let pair = PairTopology::new(1500)?;
        if second_peer != PairTopology::B_IP {
            let addr = format!("{second_peer}/24");
            pair.b
                .run(&["ip", "addr", "add", &addr, "dev", PairTopology::IFNAME])?;
        }
        pair.a.run(&[
            "ip",
            "route",
            "add",
            "default",
            "via",
            PairTopology::B_IP,
            "dev",
            PairTopology::IFNAME,
        ])?;
        let tunnel = |mtu, subnet: u8, listen_port, peer: &str| {
            let config = WgConfig {
                mtu,
                a_addr: format!("10.{subnet}.0.1/24"),
                b_addr: format!("10.{subnet}.0.2/24"),
                listen_port,
                ..WgConfig::default()
            };
            WgTunnel::new(&pair.a, PairTopology::A_IP, &pair.b, peer, &config)
        };
        let first = tunnel(first_mtu, 250, 51820, PairTopology::B_IP)?;
        let second = tunnel(1420, 251, 51821, second_peer)?;
        Ok(TwoTunnels {
            first,
            second,
            pair,
        })
    }
}

/// One run of `netdoctor ARGS` in `ns`: exit code, stdout, stderr and how long it took
/// from the start of its observation.
struct Run {
    label: String,
    code: i32,
    stdout: String,
    stderr: String,
    wall: Wall,
}

fn run_timed(ns: &Netns, args: &[&str]) -> Result<Run> {
    run_loaded(ns, args, WINDOW, || Ok(()))
}

/// [`run_timed`] with a `window` and `load` (the traffic) run on another thread once the
/// observation began.
fn run_loaded<F>(ns: &Netns, args: &[&str], window: Duration, load: F) -> Result<Run>
where
    F: FnOnce() -> Result<()> + Send,
{
    let bin = netdoctor::binary()?;
    let label = format!("netdoctor {} (in {})", args.join(" "), ns.name());
    let spawned = Instant::now();
    let mut process = ns.spawn_command(&label, ns.command(&bin.to_string_lossy(), args))?;
    process.wait_for_output(OBSERVING, netdoctor::START_TIMEOUT)?;
    let observing = Instant::now();
    let (status, exited, load) = std::thread::scope(|scope| {
        let traffic = scope.spawn(load);
        let status = process.wait_timeout(window + Duration::from_secs(60));
        let exited = Instant::now();
        let load = traffic
            .join()
            .unwrap_or_else(|_| Err(anyhow::anyhow!("the traffic thread panicked")));
        (status, exited, load)
    });
    let status = status?;
    load.context("traffic during the observation")?;
    let code = status
        .code()
        .with_context(|| format!("`{label}` was killed ({status})"))?;
    let run = Run {
        code,
        stdout: process.stdout()?,
        stderr: process.stderr()?,
        wall: Wall {
            window,
            setup: observing - spawned,
            observed_to_exit: exited - observing,
        },
        label,
    };
    eprintln!(
        "{}: exit {}, setup {:.2} s, observation to exit {:.2} s\n{}",
        run.label,
        run.code,
        run.wall.setup.as_secs_f64(),
        run.wall.observed_to_exit.as_secs_f64(),
        run.stdout
    );
    ensure!(
        run.stderr.matches(OBSERVING).count() == 1,
        "`{}`: expected one observation window, stderr: {}",
        run.label,
        run.stderr
    );
    run.wall.check(&run.label)?;
    Ok(run)
}

/// The reports of a several-interface `--json` document, each checked against the
/// single report's schema, by interface name; and its `worst`.
fn reports(run: &Run) -> Result<(Vec<Diagnosis>, Value)> {
    let doc: Value = serde_json::from_str(&run.stdout)
        .with_context(|| format!("`{}` printed no JSON: {}", run.label, run.stderr))?;
    let names = doc["interfaces"]
        .as_array()
        .context("no interfaces array")?;
    let reports = doc["reports"].as_array().context("no reports array")?;
    ensure!(
        names.len() == reports.len(),
        "{} interfaces but {} reports",
        names.len(),
        reports.len()
    );
    let mut parsed = Vec::new();
    for (name, r) in names.iter().zip(reports) {
        let d = Diagnosis::parse(
            format!("{} / {name}", run.label),
            run.code,
            &r.to_string(),
            &run.stderr,
        )?;
        ensure!(d.json["interface"] == *name, "report order: {name}");
        parsed.push(d);
    }
    Ok((parsed, doc["worst"].clone()))
}

fn report<'a>(reports: &'a [Diagnosis], iface: &str) -> Result<&'a Diagnosis> {
    reports
        .iter()
        .find(|d| d.json["interface"] == iface)
        .with_context(|| format!("no report for {iface}"))
}

/// The worst exit code of `reports` (0 without a finding).
fn worst_code(reports: &[Diagnosis]) -> i32 {
    reports
        .iter()
        .map(Diagnosis::expected_code)
        .max()
        .unwrap_or(0)
}

#[test]
fn no_interface_names_the_broken_tunnel_in_one_window() -> Result<()> {
    lab_guard!("wireguard-go", "wg");
    let lab = TwoTunnels::new(1480)?;
    let (broken, healthy) = (lab.first.a.ifname(), lab.second.a.ifname());
    let window = format!("{}s", WINDOW.as_secs());
    let run = run_timed(&lab.pair.a, &["diagnose", "--duration", &window, "--json"])?;
    let (reports, worst) = reports(&run)?;
    let names: Vec<&Value> = reports.iter().map(|d| &d.json["interface"]).collect();
    ensure!(
        reports.len() == 3,
        "expected the two tunnels and the default route's {}, got {names:?}",
        PairTopology::IFNAME
    );
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
    let (reports, worst) = reports(&run)?;
    ensure!(
        reports.len() == 3,
        "expected 3 reports, got {}",
        reports.len()
    );
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

/// iperf3 through both tunnels at 100 Mbit/s for 3 s, to the servers `lab_servers` started.
fn load_both(lab: &TwoTunnels) -> Result<()> {
    let a = &lab.pair.a;
    std::thread::scope(|scope| {
        let sends = [(&lab.first, 5311), (&lab.second, 5312)].map(|(wg, port)| {
            scope.spawn(move || {
                let opts = Iperf3Opts {
                    port,
                    duration_secs: 3,
                    bitrate: Some("100M".into()),
                    ..Iperf3Opts::new(wg.b.ip())
                };
                traffic::iperf3_client(a, &opts)
            })
        });
        for send in sends {
            let report = send
                .join()
                .unwrap_or_else(|_| Err(anyhow::anyhow!("iperf3 thread panicked")))?;
            ensure!(report.received_bytes > 0, "iperf3 moved nothing");
        }
        Ok(())
    })
}

/// The iperf3 servers [`load_both`] sends to.
fn lab_servers(lab: &TwoTunnels) -> Result<[Iperf3Server; 2]> {
    Ok([
        Iperf3Server::start(&lab.pair.b, 5311)?,
        Iperf3Server::start(&lab.pair.b, 5312)?,
    ])
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
    let (reports, worst) = reports(&run)?;
    ensure!(
        reports.len() == 3,
        "expected 3 reports, got {}",
        reports.len()
    );
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
    let (reports, _) = reports(&run)?;
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

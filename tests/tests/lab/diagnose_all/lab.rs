//! The lab of `diagnose_all`: two wireguard-go tunnels over one veth (a's default route),
//! `netdoctor diagnose` run once with its wall time checked against the window, and its
//! several-interface JSON document split into one checked report per interface.

use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use netdoctor_lab::diagnosis::Diagnosis;
use netdoctor_lab::observe::{Wall, OBSERVING};
use netdoctor_lab::{
    netdoctor, traffic, Iperf3Opts, Iperf3Server, Netns, PairTopology, WgConfig, WgTunnel,
};
use serde_json::Value;

/// The observation window of every run here.
pub const WINDOW: Duration = Duration::from_secs(3);

/// Two WireGuard tunnels from side a to side b of one veth pair, a's default route over
/// the veth.
pub struct TwoTunnels {
    // Declared first: dropped (wireguard-go stopped) before the namespaces.
    pub first: WgTunnel,
    pub second: WgTunnel,
    pub pair: PairTopology,
}

impl TwoTunnels {
    /// The first tunnel with MTU `first_mtu`, the second with 1420 (what fits 1500 with
    /// room to spare), both to b's address on the veth.
    pub fn new(first_mtu: u32) -> Result<Self> {
        Self::with_second_peer(first_mtu, PairTopology::B_IP)
    }

    /// [`TwoTunnels::new`] with the second tunnel's peer at `second_peer`, another address
    /// of b on the veth (added here when it is not b's first).
    pub fn with_second_peer(first_mtu: u32, second_peer: &str) -> Result<Self> {
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
pub struct Run {
    pub label: String,
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    pub wall: Wall,
}

pub fn run_timed(ns: &Netns, args: &[&str]) -> Result<Run> {
    run_loaded(ns, args, WINDOW, || Ok(()))
}

/// [`run_timed`] with a `window` and `load` (the traffic) run on another thread once the
/// observation began.
pub fn run_loaded<F>(ns: &Netns, args: &[&str], window: Duration, load: F) -> Result<Run>
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

/// The `n` reports of a several-interface `--json` document (the two tunnels and the
/// default route's interface, unless the run names interfaces), each checked against the
/// single report's schema, by interface name; and its `worst`.
pub fn reports(run: &Run, n: usize) -> Result<(Vec<Diagnosis>, Value)> {
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
    ensure!(
        reports.len() == n,
        "expected {n} reports (the two tunnels and the default route's {}), got {names:?}",
        PairTopology::IFNAME
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

pub fn report<'a>(reports: &'a [Diagnosis], iface: &str) -> Result<&'a Diagnosis> {
    reports
        .iter()
        .find(|d| d.json["interface"] == iface)
        .with_context(|| format!("no report for {iface}"))
}

/// The worst exit code of `reports` (0 without a finding).
pub fn worst_code(reports: &[Diagnosis]) -> i32 {
    reports
        .iter()
        .map(Diagnosis::expected_code)
        .max()
        .unwrap_or(0)
}

/// iperf3 through both tunnels at 100 Mbit/s for 3 s, to the servers `lab_servers` started.
pub fn load_both(lab: &TwoTunnels) -> Result<()> {
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
pub fn lab_servers(lab: &TwoTunnels) -> Result<[Iperf3Server; 2]> {
    Ok([
        Iperf3Server::start(&lab.pair.b, 5311)?,
        Iperf3Server::start(&lab.pair.b, 5312)?,
    ])
}

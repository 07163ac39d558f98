//! `tunnel.daemon_cpu_bound` on a real userspace tunnel: wireguard-go between two
//! namespaces, side `a`'s daemon held by a cgroup to 10 % of one core (its own limit,
//! whatever else the machine runs: pinned to a core alone, it would get only what the
//! other work on that core leaves), carrying iperf3 from `a` to `b`.
//!
//! - Unlimited TCP: `netdoctor diagnose` names wireguard-go (pid, its CPU share of one core
//!   and of its limit, the quota as the limit, the tunnel's Mbit/s) and the fix names the
//!   quota, then kernel WireGuard; the agent reports the same finding from its own windows.
//! - The twin, the same tunnel and quota at a fixed 5 Mbit/s: no finding, a low share.
//!
//! Needs root, BPF, a cgroup hierarchy with the CPU controller, wireguard-go, wg and
//! iperf3; skips elsewhere, fails under CI=true. Build the binary first: `cargo build -p
//! netdoctor`.

use std::time::Duration;

use anyhow::{ensure, Context, Result};
use netdoctor_lab::agent::Agent;
use netdoctor_lab::cgroup::CpuQuota;
use netdoctor_lab::diagnosis::Diagnosis;
use netdoctor_lab::{
    lab_guard, observe, traffic, wg_over_pair, Iperf3Opts, Iperf3Report, Iperf3Server,
    PairTopology, WgTunnel,
};

const TOOLS: &[&str] = &["wireguard-go", "wg", "iperf3"];
const FINDING: &str = "tunnel.daemon_cpu_bound";
/// What side `a`'s wireguard-go may use, percent of one core.
/// Low enough that the daemon gets all of it while a loaded 2-core machine shares its
/// cores among half a dozen runnable tasks.
const QUOTA_PERCENT: u32 = 10;
const WINDOW: Duration = Duration::from_secs(3);

/// A wireguard-go tunnel whose side `a` daemon is in a cgroup of [`QUOTA_PERCENT`].
struct Held {
    quota: CpuQuota,
    wg: WgTunnel,
    pair: PairTopology,
}

fn held() -> Result<Held> {
    let (pair, wg) = wg_over_pair(1500, 1420)?;
    let quota = CpuQuota::new(QUOTA_PERCENT)?;
    quota.add(wg.a.pid())?;
    Ok(Held { quota, wg, pair })
}

impl Held {
    /// iperf3 from `a` to `b` through the tunnel at `bitrate` (None: as fast as it goes)
    /// for the whole observation, which starts once the transfer runs.
    fn diagnose_under(&self, bitrate: Option<&str>) -> Result<(Diagnosis, Iperf3Report)> {
        let _server = Iperf3Server::start(&self.pair.b, 5201)?;
        std::thread::scope(|s| {
            let client = s.spawn(|| {
                let mut opts = Iperf3Opts::new(self.wg.b.ip());
                opts.duration_secs = 8;
                opts.bitrate = bitrate.map(str::to_owned);
                traffic::iperf3_client(&self.pair.a, &opts)
            });
            std::thread::sleep(Duration::from_secs(1));
            let diagnosed = observe::diagnose_during(
                &self.pair.a,
                self.wg.a.ifname(),
                WINDOW,
                &["--no-probe"],
                || Ok(()),
            );
            let report = client
                .join()
                .map_err(|_| anyhow::anyhow!("the iperf3 thread panicked"))?;
            let (d, ()) = diagnosed?;
            let report = report.context("iperf3 through the tunnel")?;
            println!(
                "wireguard-go at {QUOTA_PERCENT} % of a core ({}), iperf3 {}: {:.1} Mbit/s; \
                 daemon {} % of one core, {} % of its limit; tunnel {} Mbit/s; host {} % busy",
                self.quota.path().display(),
                bitrate.unwrap_or("unlimited"),
                report.received_bits_per_second / 1e6,
                d.fact("tunnel.daemon_cpu_percent"),
                d.fact("tunnel.daemon_cpu_of_limit_percent"),
                d.fact("tunnel.throughput_mbps"),
                d.fact("host.cpu_busy_percent"),
            );
            Ok((d, report))
        })
    }
}

/// The facts name side `a`'s wireguard-go, measured, with the quota as its limit.
fn assert_measured(d: &Diagnosis, h: &Held) -> Result<f64> {
    let pid = i64::from(h.wg.a.pid());
    ensure!(
        d.fact("tunnel.daemon") == "wireguard-go"
            && d.fact("tunnel.daemon_pid").as_i64() == Some(pid)
            && d.fact("tunnel.daemon_uid").as_i64() == Some(0),
        "the daemon is wireguard-go, pid {pid}, root's: {}",
        d.describe()
    );
    ensure!(
        d.fact("tunnel.daemon_cpu_limited_by") == "quota"
            && d.fact("tunnel.daemon_cpu_limit_percent").as_f64() == Some(f64::from(QUOTA_PERCENT)),
        "the limit is the cgroup's {QUOTA_PERCENT} %: {}",
        d.describe()
    );
    let busy = d.f64("/facts/host/cpu_busy_percent")?;
    ensure!((0.0..=100.0).contains(&busy), "host busy {busy} %");
    d.f64("/facts/tunnel/daemon_cpu_of_limit_percent")
}

#[test]
fn a_userspace_daemon_at_its_cpu_limit_is_named_with_its_share() -> Result<()> {
    lab_guard!(tools = TOOLS);
    let h = held()?;
    let (d, report) = h.diagnose_under(None)?;
    let share = assert_measured(&d, &h)?;
    let f = d.expect_finding(FINDING, "warning")?;
    ensure!(share >= 90.0, "share of its limit {share} %: {f}");
    let summary = f["summary"].as_str().unwrap_or_default();
    let pid = h.wg.a.pid();
    ensure!(
        summary.starts_with(&format!("wireguard-go (pid {pid}) serving "))
            && summary.contains("its cgroup's CPU quota")
            && summary.contains(" Mbit/s"),
        "{summary}"
    );
    let fix = f["fix"].as_str().unwrap_or_default();
    ensure!(
        fix.starts_with("First lift its cgroup's CPU quota")
            && fix.contains("Use kernel WireGuard instead of wireguard-go"),
        "{fix}"
    );
    // The tunnel's throughput (both directions, link counters) against what iperf3 moved.
    let mbps = d.f64("/facts/tunnel/throughput_mbps")?;
    let iperf = report.received_bits_per_second / 1e6;
    ensure!(
        mbps >= 1.0 && mbps >= iperf * 0.5 && mbps <= iperf * 2.0,
        "the tunnel carried {mbps} Mbit/s by its counters, iperf3 {iperf:.1}"
    );
    Ok(())
}

#[test]
fn the_same_tunnel_at_a_small_fixed_rate_is_not_blamed() -> Result<()> {
    lab_guard!(tools = TOOLS);
    let h = held()?;
    let (d, _) = h.diagnose_under(Some("5M"))?;
    let share = assert_measured(&d, &h)?;
    d.assert_none_of(&[FINDING])?;
    ensure!(
        share < 60.0,
        "at 5 Mbit/s wireguard-go used {share} % of its limit: {}",
        d.describe()
    );
    // The tunnel carried traffic: the CPU, not the traffic gate, keeps the rule quiet.
    let mbps = d.f64("/facts/tunnel/throughput_mbps")?;
    ensure!(mbps >= 1.0, "the tunnel carried {mbps} Mbit/s");
    Ok(())
}

/// The agent measures the daemon over each of its windows (the previous window's end is
/// the next one's start) and reports the same finding.
#[test]
fn the_agent_reports_the_daemon_from_its_own_windows() -> Result<()> {
    lab_guard!(tools = TOOLS);
    let h = held()?;
    let ifname = h.wg.a.ifname().to_owned();
    let agent = Agent::start(
        &h.pair.a,
        &["--no-probe", "--interval", "2s", "--interfaces", &ifname],
    )?;
    let _server = Iperf3Server::start(&h.pair.b, 5201)?;
    let finding = std::thread::scope(|s| {
        let client = s.spawn(|| {
            let mut opts = Iperf3Opts::new(h.wg.b.ip());
            opts.duration_secs = 12;
            traffic::iperf3_client(&h.pair.a, &opts)
        });
        let path = format!("/api/v1/findings?interface={ifname}&state=active");
        let found = agent.poll(&path, Duration::from_secs(11), FINDING, |r| {
            r.items().iter().find(|f| f["id"] == FINDING).cloned()
        });
        let _ = client.join();
        found
    })?;
    let pid = h.wg.a.pid();
    ensure!(
        finding["severity"] == "warning"
            && finding["evidence"]["pid"].as_i64() == Some(i64::from(pid))
            && finding["evidence"]["limited_by"] == "quota",
        "{finding:#}"
    );
    let iface = agent.get_json(&format!("/api/v1/interfaces/{ifname}"))?;
    ensure!(
        iface["facts"]["tunnel"]["daemon_pid"].as_i64() == Some(i64::from(pid)),
        "{iface:#}"
    );
    Ok(())
}

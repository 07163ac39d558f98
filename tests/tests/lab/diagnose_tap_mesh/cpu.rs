//! fastd out of CPU: side `a`'s fastd held by a cgroup to 10 % of one core (its own limit,
//! whatever else the machine runs) under iperf3 through the mesh. netdoctor names it,
//! single-threaded (one thread ran), with the method it prefers read from its
//! configuration, and does not advise the method it already uses.

use anyhow::{ensure, Context, Result};
use netdoctor_lab::cgroup::CpuQuota;
use netdoctor_lab::lab_guard;

use crate::diagnose_tap_mesh::config::{FASTD_TOOLS, UNDERLAY_MTU};
use crate::diagnose_tap_mesh::fastd::FASTD_METHOD;
use crate::diagnose_tap_mesh::mesh::{unique_ifname, Daemon, TapMesh};

const FINDING: &str = "tunnel.daemon_cpu_bound";
/// What side `a`'s fastd may use, percent of one core.
const QUOTA_PERCENT: u32 = 10;

#[test]
fn fastd_held_to_its_cpu_quota_is_named_single_threaded() -> Result<()> {
    lab_guard!(tools = FASTD_TOOLS);
    // The largest MTU that fits fastd's TAP overhead: no MTU finding beside this one.
    let mtu = (UNDERLAY_MTU - 66) as u32;
    let mesh = TapMesh::new(Daemon::Fastd(FASTD_METHOD), mtu, &unique_ifname())?;
    let pid = mesh.a_pid().context("side a's fastd")?;
    let quota = CpuQuota::new(QUOTA_PERCENT)?;
    quota.add(pid)?;
    let (d, report, _) = mesh.diagnose_under_load()?;
    println!(
        "fastd at {QUOTA_PERCENT} % of a core: iperf3 {:.1} Mbit/s; daemon {} % of one core, {} % of its \
         limit, {} of {} threads ran; tunnel {} Mbit/s",
        report.received_bits_per_second / 1e6,
        d.fact("tunnel.daemon_cpu_percent"),
        d.fact("tunnel.daemon_cpu_of_limit_percent"),
        d.fact("tunnel.daemon_busy_threads"),
        d.fact("tunnel.daemon_threads"),
        d.fact("tunnel.throughput_mbps"),
    );
    ensure!(
        d.fact("tunnel.daemon") == "fastd"
            && d.fact("tunnel.daemon_pid").as_i64() == Some(i64::from(pid))
            && d.fact("tunnel.daemon_busy_threads").as_i64() == Some(1)
            && d.fact("tunnel.daemon_cpu_limited_by") == "quota"
            && d.fact("tunnel.methods") == &serde_json::json!([FASTD_METHOD]),
        "fastd (pid {pid}), one thread that ran, the quota, its method: {}",
        d.describe()
    );
    let f = d.expect_finding(FINDING, "warning")?;
    let fix = f["fix"].as_str().unwrap_or_default();
    ensure!(
        fix.starts_with("First lift its cgroup's CPU quota")
            && fix.contains("already prefers salsa2012+umac")
            && !fix.contains("offer a cheaper method first"),
        "{fix}"
    );
    drop(quota);
    Ok(())
}

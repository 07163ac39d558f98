//! tailscaled's default MTU 1280 on the 1500-byte underlay, on a direct path: a trade-off
//! stated as info with exit 0 (`mtu.tailscale_default`) while the traffic is light (pings,
//! the path probed at 1500) or the path was not probed (the direct twin in `main`), and the
//! `mtu.tunnel_undersized` warning with Tailscale's fix when a bulk transfer's full-size
//! segments pay for it on the path probed at 1500.

use std::time::Instant;

use anyhow::{ensure, Result};
use netdoctor_lab::tailscale::TailscaleMesh;
use netdoctor_lab::{observe, traffic};

use crate::common_mesh::{Diagnosis, MTU_FINDINGS};
use crate::diagnose_tailscale::{diagnose_under_load_with, ready, WINDOW};

/// tailscaled's default MTU stated as info, with the trade-off and `because` in its text and
/// TS_DEBUG_MTU=1440 in its fix: no MTU warning, exit 0.
pub(crate) fn expect_info(d: &Diagnosis, because: &str) -> Result<()> {
    let mtu: Vec<&str> = d
        .ids()
        .into_iter()
        .filter(|i| MTU_FINDINGS.contains(i))
        .collect();
    ensure!(mtu.is_empty(), "MTU findings {mtu:?}:\n{}", d.describe());
    let f = d.expect_finding("mtu.tailscale_default", "info")?;
    let summary = f["summary"].as_str().unwrap_or_default();
    ensure!(
        summary.contains("runs at tailscaled's default MTU 1280 where 1440 would fit")
            && summary.contains("a trade-off, not a fault")
            && summary.contains("without path-MTU discovery")
            && summary.contains(because),
        "summary {summary}"
    );
    let fix = f["fix"].as_str().unwrap_or_default();
    ensure!(fix.contains("TS_DEBUG_MTU=1440"), "fix {fix}");
    d.expect_healthy()
}

#[test]
fn tailscale_lane_default_mtu_is_info_unless_the_traffic_pays_for_it() -> Result<()> {
    if !ready() {
        return Ok(());
    }
    let started = Instant::now();
    let mesh = TailscaleMesh::new(false)?;
    mesh.wait_for_path(true)?;
    let probed = |d: &Diagnosis| -> Result<()> {
        ensure!(
            d.i64("/facts/tunnel/path_mtu")? == 1500 && d.i64("/facts/tunnel/max_mtu")? == 1440,
            "the direct path was not probed at 1500: {}{}",
            d.describe(),
            mesh.logs()
        );
        Ok(())
    };

    // Light traffic (pings) over the path probed at 1500: info, exit 0.
    let b_ip = mesh.tailscale_ip_of_b()?;
    let window = observe::window(WINDOW)?;
    let (light, ping) = observe::diagnose_during(&mesh.ns_a, &mesh.a.ifname, window, &[], || {
        let opts = traffic::PingOpts {
            count: 10,
            interval_secs: 0.3,
            ..traffic::PingOpts::default()
        };
        traffic::ping(&mesh.ns_a, &b_ip, &opts)
    })?;
    ensure!(ping.received > 0, "b unreachable: {}", ping.output);
    probed(&light)?;
    expect_info(&light, "this observation's traffic did not pay much for it")?;

    // A bulk transfer: full-size segments at 1280 on a path that fits 1440: the warning.
    let bulk = diagnose_under_load_with(&mesh, &[])?;
    probed(&bulk)?;
    let share = bulk.f64("/facts/traffic/full_size_share")?;
    let full = bulk.i64("/facts/traffic/full_size_segments")?;
    ensure!(
        share >= 0.5 && full as f64 >= 1000.0 * bulk.f64("/facts/traffic/duration_s")?,
        "iperf3's segments were not full-size at 1280 ({full}, {:.0} %): {}",
        share * 100.0,
        bulk.describe()
    );
    let f = bulk.expect_finding("mtu.tunnel_undersized", "warning")?;
    let (summary, fix) = (
        f["summary"].as_str().unwrap_or_default(),
        f["fix"].as_str().unwrap_or_default(),
    );
    ensure!(
        summary.contains("the traffic pays for tailscaled's default")
            && summary.contains("over a path probed at 1500 bytes"),
        "summary {summary}"
    );
    ensure!(
        fix.starts_with(&format!("ip link set dev {} mtu 1440", mesh.a.ifname))
            && fix.contains("TS_DEBUG_MTU=1440"),
        "fix {fix}"
    );
    bulk.assert_none_of(&["mtu.tailscale_default"])?;
    println!(
        "default MTU: light {:?}, bulk {:?} ({full} full-size segments, {:.0} %); {:.0} s",
        light.ids(),
        bulk.ids(),
        share * 100.0,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

//! Seed 2: a PMTU blackhole, the router dropping its own ICMP frag-needed.

use std::time::Duration;

use anyhow::{ensure, Result};
use netdoctor_lab::{lab_guard, BgProcess, Iperf3Server, LineConfig, LineTopology};
use serde_json::Value;

use crate::common_mesh::{diagnose, join, mtu_fix, Diagnosis};
use crate::seed_scenarios::flow_fields::flow_f64;

/// client — router — server; the router's hop to the server has MTU 1400 (the server's
/// own interface keeps 1500) and, when `filter_icmp`, the router drops the ICMP
/// frag-needed it generates. A bulk upload runs from the client during the diagnosis of
/// the client's interface.
fn blackhole_scenario(filter_icmp: bool) -> Result<Diagnosis> {
    let line = LineTopology::new(&LineConfig::default())?;
    line.router.set_mtu(LineTopology::ROUTER_SERVER_IF, 1400)?;
    if filter_icmp {
        line.router.run(&[
            "iptables",
            "-A",
            "OUTPUT",
            "-p",
            "icmp",
            "--icmp-type",
            "fragmentation-needed",
            "-j",
            "DROP",
        ])?;
    }
    let _server = Iperf3Server::start(&line.server, 5201)?;
    let _upload: BgProcess = line.client.spawn(&[
        "iperf3",
        "-c",
        LineTopology::SERVER_IP,
        "-t",
        "20",
        "--connect-timeout",
        "3000",
    ])?;
    std::thread::sleep(Duration::from_secs(1));
    diagnose(&line.client, LineTopology::CLIENT_IF, "4s", &[])
}

#[test]
fn seed_2_pmtu_blackhole() -> Result<()> {
    lab_guard!("iperf3", "iptables", "ping");
    let (broken, healthy) = std::thread::scope(|s| -> Result<(Diagnosis, Diagnosis)> {
        let broken = s.spawn(|| blackhole_scenario(true));
        let healthy = s.spawn(|| blackhole_scenario(false));
        Ok((
            join(broken, "ICMP filtered")?,
            join(healthy, "ICMP allowed")?,
        ))
    })?;

    let f = broken.finding("pmtu.blackhole")?;
    ensure!(
        f.get("severity").and_then(Value::as_str) == Some("critical"),
        "severity: {f}"
    );
    let bulk = broken.bulk_flow()?;
    println!(
        "blackhole: bulk upload {} bit/s during the window; healthy twin {} bit/s",
        flow_f64(bulk, "throughput_bps")?,
        flow_f64(healthy.bulk_flow()?, "throughput_bps")?
    );
    ensure!(
        broken.bool("/facts/probe/blackhole")?
            && broken.i64("/facts/probe/path_mtu")? == 1400
            && broken.str("/facts/probe/target")? == LineTopology::SERVER_IP
            && broken.i64("/facts/traffic/too_big_received")? == 0,
        "probe facts: {}",
        broken.describe()
    );
    ensure!(
        bulk.get("full_size_retransmits").and_then(Value::as_i64) > Some(0)
            && flow_f64(bulk, "throughput_bps")? < 100_000.0,
        "the upload did not stall on full-size segments: {bulk}"
    );
    let fix = f.get("fix").and_then(Value::as_str).unwrap_or_default();
    ensure!(
        fix.contains(&mtu_fix(LineTopology::CLIENT_IF, 1400)),
        "fix {fix:?} does not name the probed 1400"
    );

    // PMTUD working: the router's ICMP shrinks the connection to 1400 and data flows.
    healthy.assert_none_of(&["pmtu.blackhole"])?;
    let bulk = healthy.bulk_flow()?;
    ensure!(
        flow_f64(bulk, "throughput_bps")? > 1e6
            && bulk.get("pmtu").and_then(Value::as_i64) == Some(1400),
        "healthy twin's upload: {}",
        healthy.describe()
    );
    Ok(())
}

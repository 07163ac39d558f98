//! `pmtu.blackhole` on the 1400 hop: found by the probe and, without it (`--no-probe`), in
//! the stalled connection; each beside its twin where PMTUD works.

use anyhow::{ensure, Result};
use netdoctor_lab::{lab_guard, LineTopology};
use serde_json::Value;

use crate::diagnose_mtu::hop_path::{blackhole_line, diagnose_bulk_transfer, HOP_MTU};
use crate::diagnose_mtu::report::{expect_evidence, expect_fix, str_or, MtuChecks, DURATION};

#[test]
fn pmtu_blackhole_stalls_a_bulk_transfer_and_the_probe_finds_it() -> Result<()> {
    lab_guard!("iperf3", "nft");
    let line = blackhole_line(true)?;
    let d = diagnose_bulk_transfer(&line, None, DURATION, &[])?;
    let f = d.expect("pmtu.blackhole", "critical")?;
    expect_evidence(&d, f, "probe_blackhole", &true.into())?;
    expect_evidence(&d, f, "probe_path_mtu", &i64::from(HOP_MTU).into())?;
    expect_evidence(&d, f, "probe_target", &LineTopology::SERVER_IP.into())?;
    expect_evidence(&d, f, "too_big_received", &0.into())?;
    expect_fix(&d, f, &format!("mtu {HOP_MTU}"))?;
    // The connection really stalled on full-size segments: the probe was aimed at it.
    let stalled = d.fact("flows").as_array().into_iter().flatten().any(|f| {
        str_or(&f["name"]).ends_with(&format!("{}:5201", LineTopology::SERVER_IP))
            && f["full_size_retransmits"].as_i64().unwrap_or(0) > 0
            && f["pmtu"] == 1500
    });
    ensure!(
        stalled,
        "no flow toward the server retransmitting full-size segments at pmtu 1500\n{}",
        d.describe()
    );
    ensure!(
        line.frag_needed_dropped()? > 0,
        "the router never generated (and dropped) a frag-needed: no blackhole was built"
    );
    Ok(())
}

/// Twin: the same path with ICMP allowed; PMTUD works, no blackhole.
#[test]
fn working_pmtud_on_the_same_path_is_no_blackhole() -> Result<()> {
    lab_guard!("iperf3");
    let line = blackhole_line(false)?;
    let d = diagnose_bulk_transfer(&line, Some("100M"), DURATION, &[])?;
    d.expect_absent("pmtu.blackhole")?;
    ensure!(
        d.fact("probe.blackhole") == &Value::Bool(false),
        "the probe must not see a blackhole\n{}",
        d.describe()
    );
    // The transfer ran and learnt the smaller path MTU from the router's ICMP.
    let learnt = d.fact("flows").as_array().into_iter().flatten().any(|f| {
        f["pmtu"] == i64::from(HOP_MTU) && f["throughput_bps"].as_f64().unwrap_or(0.0) > 1e6
    });
    ensure!(
        learnt && d.fact_i64("traffic.too_big_received")? > 0,
        "expected a flow at pmtu {HOP_MTU} moving data and frag-needed received\n{}",
        d.describe()
    );
    d.expect_healthy()
}

/// Without the probe (`--no-probe`), the rule falls back on the connections: full-size
/// segments resent in vain, no too-big message. A 5 s window holds at least three
/// retransmission timeouts (0.2 + 0.4 + 0.8 + 1.6 s).
#[test]
fn pmtu_blackhole_without_probe_is_seen_in_the_stalled_connection() -> Result<()> {
    lab_guard!("iperf3", "nft");
    let line = blackhole_line(true)?;
    let d = diagnose_bulk_transfer(&line, None, "5s", &["--no-probe"])?;
    ensure!(
        d.fact("probe.ran") == &Value::Bool(false),
        "--no-probe must not probe\n{}",
        d.describe()
    );
    let f = d.expect("pmtu.blackhole", "critical")?;
    expect_evidence(&d, f, "probe_blackhole", &false.into())?;
    expect_evidence(&d, f, "too_big_received", &0.into())?;
    ensure!(
        f["evidence"]["stalled_connections"].as_i64().unwrap_or(0) >= 1,
        "the stalled transfer is the evidence\n{}",
        d.describe()
    );
    Ok(())
}

/// Twin of the fallback: PMTUD works, the transfer adapts and moves data.
#[test]
fn working_pmtud_without_probe_is_no_blackhole() -> Result<()> {
    lab_guard!("iperf3");
    let line = blackhole_line(false)?;
    let d = diagnose_bulk_transfer(&line, Some("100M"), "5s", &["--no-probe"])?;
    ensure!(
        d.fact_i64("traffic.too_big_received")? > 0 && d.fact_i64("traffic.tcp_segments")? > 1000,
        "the transfer ran and the router's frag-needed arrived\n{}",
        d.describe()
    );
    d.expect_healthy()
}

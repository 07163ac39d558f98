//! Scenario 1, `tcp.cubic_on_lossy_path` (flow scope): CUBIC on a lossy path is found and
//! the finding names the connection; BBR on the same loss and CUBIC without loss are not
//! flagged.

use std::net::SocketAddr;

use anyhow::{ensure, Context, Result};
use netdoctor_lab::diagnosis::Diagnosis;
use netdoctor_lab::{lab_guard, Direction, Iperf3Report, Iperf3Server, PacketLoss, PairTopology};
use serde_json::Value;

use crate::diagnose_gateway::report::{as_bool, as_f64, as_i64, as_str, get, short, WarningsOnly};
use crate::diagnose_gateway::scenario::{diagnose_during, iperf, IPERF_PORT, TCP_WINDOW_SECS};

/// Loss (percent) on the receiver's ingress for the CUBIC scenarios.
const CUBIC_LOSS_PERCENT: u8 = 4;

/// The row of `facts.flows` for the iperf3 data connection from `a` toward the server:
/// the one toward `server:5201` that sent the most.
fn iperf_flow<'a>(d: &'a Diagnosis, server: &str) -> Result<&'a Value> {
    let remote = format!("{server}:{IPERF_PORT}");
    let flows = d.at("/facts/flows")?.as_array().context("flows")?;
    flows
        .iter()
        .filter(|f| {
            f.get("name")
                .and_then(Value::as_str)
                .and_then(|n| n.rsplit(" -> ").next())
                == Some(remote.as_str())
        })
        .max_by_key(|f| f.get("data_segs_sent").and_then(Value::as_i64).unwrap_or(0))
        .with_context(|| {
            format!(
                "no connection toward {remote} in facts.flows:\n{}",
                d.describe()
            )
        })
}

/// Runs a CUBIC or BBR iperf3 from `pair.a` to `pair.b` while diagnosing `pair.a`'s eth0.
/// `--no-probe` when the path is lossy: the probe sends each size twice, and random loss of
/// both at 1500 bytes would be read as a blackhole (see the report), which is not what
/// these scenarios are about.
fn cubic_scenario(pair: &PairTopology, cc: &str, lossy: bool) -> Result<(Diagnosis, Iperf3Report)> {
    let extra: &[&str] = if lossy { &["--no-probe"] } else { &[] };
    let (d, report) = diagnose_during(
        &pair.a,
        PairTopology::IFNAME,
        TCP_WINDOW_SECS,
        extra,
        || iperf(&pair.a, PairTopology::B_IP, Some(cc), TCP_WINDOW_SECS),
    )?;
    ensure!(
        report.sender_congestion.as_deref() == Some(cc),
        "iperf3 did not use {cc}: {:?}",
        report.sender_congestion
    );
    ensure!(
        as_bool(d.at("/facts/host")?, "bbr_available")?,
        "bbr is not available on this kernel, the rule cannot apply:\n{}",
        d.describe()
    );
    Ok((d, report))
}

#[test]
fn cubic_on_lossy_path_is_found_and_names_the_connection() -> Result<()> {
    lab_guard!("iperf3", "nft");
    let pair = PairTopology::new(1500)?;
    let _server = Iperf3Server::start(&pair.b, IPERF_PORT)?;
    let loss = PacketLoss::add(
        &pair.b,
        PairTopology::IFNAME,
        Direction::Ingress,
        CUBIC_LOSS_PERCENT,
    )?;
    let (d, report) = cubic_scenario(&pair, "cubic", true)?;
    ensure!(
        loss.dropped_packets()? > 0 && report.retransmits.unwrap_or(0) > 0,
        "the loss did not bite: dropped {:?}, iperf3 retransmits {:?}",
        loss.dropped_packets(),
        report.retransmits
    );

    let found = d.all("tcp.cubic_on_lossy_path");
    ensure!(
        found.len() == 1,
        "expected exactly one tcp.cubic_on_lossy_path (the iperf3 data connection):\n{}",
        d.describe()
    );
    let finding = d.expect_finding("tcp.cubic_on_lossy_path", "warning")?;
    // Flow scope: the subject names the connection, local -> remote.
    let subject = as_str(finding, "subject")?;
    let (local, remote) = subject
        .split_once(" -> ")
        .with_context(|| format!("subject {subject:?} is not `local -> remote`"))?;
    let local: SocketAddr = local
        .parse()
        .with_context(|| format!("subject {subject:?}: local end"))?;
    let remote: SocketAddr = remote
        .parse()
        .with_context(|| format!("subject {subject:?}: remote end"))?;
    ensure!(
        local.ip().to_string() == PairTopology::A_IP
            && remote.ip().to_string() == PairTopology::B_IP
            && remote.port() == IPERF_PORT
            && local.port() != IPERF_PORT,
        "subject {subject:?} does not name the iperf3 connection {}:* -> {}:{IPERF_PORT}",
        PairTopology::A_IP,
        PairTopology::B_IP
    );
    ensure!(
        as_str(finding, "summary")?.contains(subject),
        "summary does not name the connection: {}",
        short(finding)
    );
    let evidence = get(finding, "evidence")?;
    ensure!(
        as_str(evidence, "cc")? == "cubic"
            && as_f64(evidence, "retrans_ratio")? >= 0.01
            && as_i64(evidence, "segments_sent")? >= 100
            && as_i64(evidence, "retransmits")? > 0,
        "evidence does not show a lossy cubic flow: {}",
        short(evidence)
    );
    // The flow fact the finding is about.
    let flow = iperf_flow(&d, PairTopology::B_IP)?;
    ensure!(
        as_str(flow, "name")? == subject && as_str(flow, "cc")? == "cubic",
        "facts.flows disagrees with the finding: {}",
        short(flow)
    );
    // Only warnings here (tcp.high_retransmits may accompany it): exit 1.
    d.expect_warnings_only()?;
    Ok(())
}

#[test]
fn cubic_on_lossy_path_is_absent_with_bbr_on_the_same_loss() -> Result<()> {
    lab_guard!("iperf3", "nft");
    let pair = PairTopology::new(1500)?;
    let _server = Iperf3Server::start(&pair.b, IPERF_PORT)?;
    let _loss = PacketLoss::add(
        &pair.b,
        PairTopology::IFNAME,
        Direction::Ingress,
        CUBIC_LOSS_PERCENT,
    )?;
    let (d, _) = cubic_scenario(&pair, "bbr", true)?;
    // Same loss: the flow meets every other condition of the rule.
    let flow = iperf_flow(&d, PairTopology::B_IP)?;
    ensure!(
        as_str(flow, "cc")? == "bbr"
            && as_i64(flow, "data_segs_sent")? >= 100
            && as_f64(flow, "retrans_ratio")? >= 0.01,
        "the bbr flow should be as lossy as the cubic one: {}\n{}",
        short(flow),
        d.describe()
    );
    ensure!(
        d.all("tcp.cubic_on_lossy_path").is_empty(),
        "tcp.cubic_on_lossy_path reported for a bbr connection:\n{}",
        d.describe()
    );
    // bbr still retransmits under loss: tcp.high_retransmits is legitimate here.
    Ok(())
}

#[test]
fn cubic_without_loss_is_healthy() -> Result<()> {
    lab_guard!("iperf3");
    let pair = PairTopology::new(1500)?;
    let _server = Iperf3Server::start(&pair.b, IPERF_PORT)?;
    let (d, _) = cubic_scenario(&pair, "cubic", false)?;
    let flow = iperf_flow(&d, PairTopology::B_IP)?;
    ensure!(
        as_str(flow, "cc")? == "cubic" && as_i64(flow, "data_segs_sent")? >= 100,
        "the cubic flow was not observed: {}",
        short(flow)
    );
    d.expect_healthy()?;
    Ok(())
}

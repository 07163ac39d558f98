//! Scenario 2, `tcp.high_retransmits` on a forwarded path (passive detection on the
//! router), and the same path without loss healthy.

use anyhow::{ensure, Result};
use netdoctor_lab::diagnosis::Diagnosis;
use netdoctor_lab::{lab_guard, Direction, Iperf3Server, LineConfig, LineTopology, PacketLoss};

use crate::diagnose_gateway::report::{as_f64, as_i64, get, short, WarningsOnly};
use crate::diagnose_gateway::scenario::{diagnose_during, iperf, IPERF_PORT, TCP_WINDOW_SECS};

/// Loss (percent) on the forwarded path.
const FORWARDED_LOSS_PERCENT: u8 = 5;

/// iperf3 client → server through the router while diagnosing the router's client-side
/// interface; optional loss on the server's ingress (after the router, so the router
/// forwards both the lost segments and their retransmissions).
fn forwarded_tcp(loss_percent: Option<u8>) -> Result<Diagnosis> {
    let line = LineTopology::new(&LineConfig::default())?;
    let _server = Iperf3Server::start(&line.server, IPERF_PORT)?;
    let loss = loss_percent
        .map(|p| PacketLoss::add(&line.server, LineTopology::SERVER_IF, Direction::Ingress, p))
        .transpose()?;
    let (d, report) = diagnose_during(
        &line.router,
        LineTopology::ROUTER_CLIENT_IF,
        TCP_WINDOW_SECS,
        &[],
        || iperf(&line.client, LineTopology::SERVER_IP, None, TCP_WINDOW_SECS),
    )?;
    if let Some(loss) = &loss {
        ensure!(
            loss.dropped_packets()? > 0 && report.retransmits.unwrap_or(0) > 0,
            "the loss did not bite: dropped {:?}, iperf3 retransmits {:?}",
            loss.dropped_packets(),
            report.retransmits
        );
    }
    // The router has no local TCP connection: whatever it finds is passive.
    ensure!(
        d.at("/facts/flows")?.as_array().is_some_and(Vec::is_empty),
        "the router has no local sockets, facts.flows must be empty:\n{}",
        d.describe()
    );
    ensure!(
        as_i64(d.at("/facts/traffic")?, "tcp_segments")? >= 1000,
        "the forwarded iperf3 traffic was not seen on the router:\n{}",
        d.describe()
    );
    Ok(d)
}

#[test]
fn high_retransmits_on_a_forwarded_lossy_path() -> Result<()> {
    lab_guard!("iperf3", "nft");
    let d = forwarded_tcp(Some(FORWARDED_LOSS_PERCENT))?;
    let finding = d.expect_finding("tcp.high_retransmits", "warning")?;
    let evidence = get(finding, "evidence")?;
    let traffic = d.at("/facts/traffic")?;
    ensure!(
        as_i64(evidence, "tcp_segments")? >= 1000
            && as_i64(evidence, "tcp_retransmits")? > 0
            && as_f64(evidence, "tcp_retrans_ratio")? > 0.02
            && as_i64(evidence, "tcp_retransmits")? == as_i64(traffic, "tcp_retransmits")?,
        "evidence does not show > 2 % retransmissions: {}",
        short(evidence)
    );
    d.expect_warnings_only()?;
    Ok(())
}

#[test]
fn forwarded_path_without_loss_is_healthy() -> Result<()> {
    lab_guard!("iperf3");
    let d = forwarded_tcp(None)?;
    d.expect_healthy()?;
    Ok(())
}

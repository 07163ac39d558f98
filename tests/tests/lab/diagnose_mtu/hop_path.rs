//! PMTU blackhole: client — router — server, router→server hop 1400. The line, its filter
//! of the router's ICMP frag-needed, DF pings across it and a bulk transfer diagnosed on it.

use anyhow::Result;
use netdoctor_lab::diagnosis::Diagnosis;
use netdoctor_lab::observe::Wall;
use netdoctor_lab::{traffic, Iperf3Server, LineConfig, LineTopology, PingOpts};

use crate::diagnose_mtu::report::diagnose_for;

/// Path MTU between client and server in [`blackhole_line`].
pub(crate) const HOP_MTU: u32 = 1400;

/// client — router — server with the router's interface toward the server at
/// [`HOP_MTU`] while the server's own interface stays at 1500 (so its SYN-ACK announces
/// MSS 1460 and does not hide the problem). With `filter_icmp`, the router drops the
/// ICMP frag-needed messages it generates itself (nft output rule, counted).
pub(crate) fn blackhole_line(filter_icmp: bool) -> Result<LineTopology> {
    let line = LineTopology::new(&LineConfig::default())?;
    line.router
        .set_mtu(LineTopology::ROUTER_SERVER_IF, HOP_MTU)?;
    if filter_icmp {
        line.drop_router_frag_needed()?;
    }
    Ok(line)
}

/// DF pings of exactly `size` IP bytes from client to server.
pub(crate) fn df_ping(line: &LineTopology, size: u32) -> Result<traffic::PingReport> {
    traffic::ping(
        &line.client,
        LineTopology::SERVER_IP,
        &PingOpts {
            count: 2,
            interval_secs: 0.2,
            size: Some(size - 28),
            dont_fragment: true,
            reply_timeout_secs: 1,
        },
    )
}

/// Diagnoses the client's interface for `duration` while a bulk TCP transfer client →
/// server runs (started when the observation window opens, unlimited when `rate` is
/// None).
pub(crate) fn diagnose_bulk_transfer(
    line: &LineTopology,
    rate: Option<&str>,
    duration: &str,
    extra: &[&str],
) -> Result<Diagnosis> {
    diagnose_bulk_transfer_timed(line, rate, duration, extra).map(|(d, _)| d)
}

/// [`diagnose_bulk_transfer`], and how long it took.
pub(crate) fn diagnose_bulk_transfer_timed(
    line: &LineTopology,
    rate: Option<&str>,
    duration: &str,
    extra: &[&str],
) -> Result<(Diagnosis, Wall)> {
    let _server = Iperf3Server::start(&line.server, 5201)?;
    let (d, _client, wall) = diagnose_for(
        &line.client,
        LineTopology::CLIENT_IF,
        duration,
        extra,
        || {
            let mut argv = vec![
                "iperf3",
                "-c",
                LineTopology::SERVER_IP,
                "-p",
                "5201",
                "-t",
                "10",
            ];
            if let Some(rate) = rate {
                argv.extend(["-b", rate]);
            }
            line.client.spawn(&argv)
        },
    )?;
    Ok((d, wall))
}

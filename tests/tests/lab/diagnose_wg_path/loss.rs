//! Underlay loss of what a peer sends, measured where it arrives: 5 % and 1 % dropped at
//! random on the sending side's underlay (before the receiver's hooks see the packets),
//! steady UDP inside the tunnel, the receiving side diagnosed; a clean twin.

use std::time::Duration;

use anyhow::{ensure, Context, Result};
use netdoctor_lab::diagnosis::Diagnosis;
use netdoctor_lab::loss::{Direction, PacketLoss};
use netdoctor_lab::udp_stream::{udp_stream, UdpReport, UdpStream};
use netdoctor_lab::{lab_guard, netdoctor, observe};

use crate::diagnose_wg_path::lab::{peer_f64, peer_i64, Lab};

/// The observation; the traffic lasts a second longer, so it spans the whole window.
const WINDOW: Duration = Duration::from_secs(8);
/// UDP datagrams of 1200 bytes at 16 Mbit/s, about 1,670 per second, ~13,000 in the window
/// (at 5 % the measured loss's standard deviation is 0.2 points). No handshake: iperf3's
/// could be lost and stall it past the window.
const RATE: u64 = 16_000_000;

/// Steady UDP from a to b through the tunnel for `secs`.
fn stream(lab: &Lab, port: u16, secs: u64) -> Result<UdpReport> {
    let mut s = UdpStream::new(lab.wg.b.ip(), port, RATE);
    s.duration = Duration::from_secs(secs);
    udp_stream(lab.a(), lab.b(), &s)
}

/// Diagnoses b's side while a sends steady UDP to b through the tunnel, with `percent` of
/// a's underlay packets dropped at random on their way out; with `renew`, a starts a fresh
/// handshake as the traffic starts (b's round trip as responder falls in the window).
fn diagnose_receiver(
    lab: &Lab,
    percent: u8,
    renew: bool,
) -> Result<(Diagnosis, Option<PacketLoss>)> {
    let loss = (percent > 0)
        .then(|| {
            PacketLoss::add_matching(
                lab.a(),
                lab.a_if(),
                Direction::Egress,
                percent,
                &["udp", "dport", "51820"],
            )
        })
        .transpose()?;
    let (d, report) = observe::diagnose_during(lab.b(), lab.wg.b.ifname(), WINDOW, &[], || {
        if renew {
            lab.renew_session()?;
        }
        stream(lab, 5201, WINDOW.as_secs() + 1)
    })?;
    eprintln!(
        "udp: {} of {} datagrams lost inside the tunnel; nft dropped {:?} packets",
        report.sent - report.received.min(report.sent),
        report.sent,
        loss.as_ref().map(PacketLoss::dropped_packets)
    );
    Ok((d, loss))
}

/// The measured loss is within a point of `percent`, over enough messages, and
/// `wireguard.underlay_loss` says so exactly when the rule's thresholds are met.
fn expect_loss(lab: &Lab, d: &Diagnosis, percent: f64) -> Result<f64> {
    let measured = peer_f64(d, "underlay_loss_percent")?;
    let expected = peer_i64(d, "underlay_expected")?;
    let received = peer_i64(d, "underlay_received")?;
    let lost = peer_i64(d, "underlay_lost")?;
    ensure!(
        expected > 8_000 && received + lost == expected,
        "expected {expected} messages, received {received}, lost {lost}:\n{}",
        d.describe()
    );
    ensure!(
        (measured - percent).abs() <= 1.0,
        "measured {measured:.2} % underlay loss with {percent} % injected:\n{}",
        d.describe()
    );
    let found = d.all("wireguard.underlay_loss");
    if measured >= 1.0 && lost >= 10 {
        let severity = if measured >= 5.0 {
            "critical"
        } else {
            "warning"
        };
        let f = d.expect_finding("wireguard.underlay_loss", severity)?;
        let ev = &f["evidence"];
        ensure!(
            ev["expected"] == expected
                && ev["received"] == received
                && (ev["loss_percent"].as_f64().unwrap_or(-1.0) - measured).abs() < 0.01
                && ev["endpoint"] == lab.a_endpoint()
                && ev["peer"].as_str().is_some_and(|k| !k.is_empty()),
            "evidence names the peer, its endpoint, the loss and the counts:\n{}",
            d.describe()
        );
    } else {
        ensure!(found.is_empty(), "no finding below 1 %:\n{}", d.describe());
    }
    Ok(measured)
}

#[test]
fn five_percent_underlay_loss_reads_as_five_percent_on_the_receiving_side() -> Result<()> {
    lab_guard!("wireguard-go", "wg", "nft");
    let lab = Lab::over_pair()?;
    let (d, _loss) = diagnose_receiver(&lab, 5, false)?;
    expect_loss(&lab, &d, 5.0)?;
    // What reaches the tunnel interface is what the underlay delivered: no TCP inside.
    d.assert_none_of(&["tcp.high_retransmits", "tcp.cubic_on_lossy_path"])?;

    // `flows` on the tunnel interface watches its underlay and shows the same per peer.
    let flows = std::thread::scope(|s| {
        let traffic = s.spawn(|| {
            std::thread::sleep(Duration::from_millis(500));
            stream(&lab, 5202, 5)
        });
        let out = netdoctor::run(
            Some(lab.b()),
            &["flows", lab.wg.b.ifname(), "--duration", "5s", "--json"],
            Duration::from_secs(30),
        );
        let _ = traffic.join();
        out
    })?;
    let json: serde_json::Value =
        serde_json::from_slice(&flows.stdout).context("flows --json output")?;
    let row = json["wireguard_paths"]
        .as_array()
        .and_then(|rows| rows.iter().find(|r| r["endpoint"] == lab.a_endpoint()))
        .with_context(|| format!("flows: no path from a's endpoint in {json}"))?;
    let loss = row["loss_percent"].as_f64().unwrap_or(-1.0);
    ensure!(
        (loss - 5.0).abs() <= 1.5 && row["expected"].as_u64().unwrap_or(0) > 3_000,
        "flows measured {loss:.2} % ({row})"
    );
    Ok(())
}

#[test]
fn one_percent_underlay_loss_and_a_clean_twin() -> Result<()> {
    lab_guard!("wireguard-go", "wg", "nft");
    let lab = Lab::over_pair()?;
    let (d, loss) = diagnose_receiver(&lab, 1, false)?;
    expect_loss(&lab, &d, 1.0)?;
    drop(loss);

    let (d, _) = diagnose_receiver(&lab, 0, true)?;
    let measured = expect_loss(&lab, &d, 0.0)?;
    ensure!(
        measured < 0.2,
        "the clean twin reads {measured:.2} % loss:\n{}",
        d.describe()
    );
    // The fresh handshake's round trip, timed on b (the responder): a veth, well under
    // 100 ms even with userspace WireGuard on a busy machine.
    let rtt = peer_f64(&d, "rtt_ms")?;
    ensure!(
        rtt > 0.0 && rtt < 100.0 && peer_i64(&d, "rtt_age_s")? <= WINDOW.as_secs() as i64,
        "handshake round trip {rtt} ms:\n{}",
        d.describe()
    );
    d.expect_healthy()
}

/// The tunnel over IPv6 through a router (IPv4 inside): 5 % of a's WireGuard packets
/// dropped on a's underlay read as 5 % on b, the endpoint in brackets; the clean twin reads
/// none and has no finding.
#[test]
fn five_percent_loss_over_an_ipv6_underlay_through_a_router_and_a_clean_twin() -> Result<()> {
    lab_guard!("wireguard-go", "wg", "nft");
    let lab = Lab::over_router6()?;
    let (d, loss) = diagnose_receiver(&lab, 5, false)?;
    expect_loss(&lab, &d, 5.0)?;
    drop(loss);
    let (d, _) = diagnose_receiver(&lab, 0, false)?;
    let measured = expect_loss(&lab, &d, 0.0)?;
    ensure!(
        measured < 0.2,
        "the clean twin reads {measured:.2} % loss:\n{}",
        d.describe()
    );
    d.expect_healthy()
}

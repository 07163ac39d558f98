//! The agent's per-peer path series on a real tunnel: on the receiving side, a clean path
//! reads no loss and a fresh handshake's round trip; with 5 % of the peer's packets dropped
//! on its underlay the peer's loss gauge reads 5 % (each 2 s window holds ~3,300 messages),
//! and the history's samples keep the lossy windows per peer.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{ensure, Result};
use netdoctor_lab::agent::{self, Agent};
use netdoctor_lab::loss::{Direction, PacketLoss};
use netdoctor_lab::udp_stream::{udp_stream, UdpStream};
use netdoctor_lab::{lab_guard, PairTopology};

use crate::diagnose_wg_path::lab::Lab;

/// The peer's series, if present and from a window that ended after `after` (UNIX
/// seconds): (loss ratio, messages, handshake RTT s).
fn peer_series(text: &str, iface: &str, peer: &str, after: f64) -> Option<(f64, f64, Option<f64>)> {
    let samples = agent::parse_metrics(text).ok()?;
    let value = |name: &str, labels: &[(&str, &str)]| {
        agent::find_metric(&samples, name, labels)
            .first()
            .map(|m| m.value)
    };
    if value("netdoctor_last_evaluation_timestamp_seconds", &[])? < after {
        return None;
    }
    let one = |name: &str| value(name, &[("interface", iface), ("peer", peer)]);
    Some((
        one("netdoctor_wireguard_peer_underlay_loss_ratio")?,
        one("netdoctor_wireguard_peer_underlay_messages")?,
        one("netdoctor_wireguard_peer_handshake_rtt_seconds"),
    ))
}

/// a sends b steady UDP through the tunnel for `secs` (16 Mbit/s of 1200-byte datagrams,
/// with no handshake that loss could stall) while `check` polls b's metrics.
fn with_traffic<T>(
    lab: &Lab,
    port: u16,
    secs: u64,
    check: impl FnOnce() -> Result<T>,
) -> Result<T> {
    std::thread::scope(|s| {
        let client = s.spawn(|| {
            let mut stream = UdpStream::new(lab.wg.b.ip(), port, 16_000_000);
            stream.duration = Duration::from_secs(secs);
            udp_stream(lab.a(), lab.b(), &stream)
        });
        let out = check();
        let _ = client.join();
        out
    })
}

fn unix_s() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

#[test]
fn agent_exposes_each_peers_underlay_loss_and_handshake_rtt() -> Result<()> {
    lab_guard!("wireguard-go", "wg", "nft");
    let lab = Lab::over_pair()?;
    let agent = Agent::start(lab.b(), &["--no-probe", "--interval", "2s"])?;
    let (iface, peer) = (lab.wg.b.ifname(), lab.wg.a.public_key());
    // A fresh handshake the agent sees: a initiates, b responds, a's data confirms.
    lab.renew_session()?;

    // The clean twin: a busy window reads no loss, and b's round trip as responder.
    let (loss, messages, rtt) = with_traffic(&lab, 5201, 8, || {
        agent.poll(
            "/metrics",
            Duration::from_secs(10),
            "a clean busy window",
            |r| {
                let (loss, messages, rtt) = peer_series(&r.text, iface, peer, 0.0)?;
                (messages > 2_000.0 && rtt.is_some()).then_some((loss, messages, rtt))
            },
        )
    })?;
    let rtt = rtt.unwrap_or(-1.0);
    eprintln!("agent, clean: loss {loss} of {messages} messages, handshake RTT {rtt} s");
    // A message in flight when a window ends counts as lost in it (and as received in the
    // next, whose loss cannot go below 0): a few of ~3,300 at most.
    ensure!(
        loss < 0.005 && rtt > 0.0 && rtt < 0.1,
        "clean path: loss {loss} of {messages} messages, handshake RTT {rtt} s"
    );

    // 5 % of a's WireGuard packets dropped on a's underlay; a window that began after it
    // (the interval is 2 s) and carried the traffic.
    let _loss = PacketLoss::add_matching(
        lab.a(),
        PairTopology::IFNAME,
        Direction::Egress,
        5,
        &["udp", "dport", "51820"],
    )?;
    let after = unix_s() + 2.5;
    let (loss, messages) = with_traffic(&lab, 5202, 10, || {
        agent.poll(
            "/metrics",
            Duration::from_secs(12),
            "a lossy busy window",
            |r| {
                let (loss, messages, _) = peer_series(&r.text, iface, peer, after)?;
                (messages > 2_000.0).then_some((loss, messages))
            },
        )
    })?;
    eprintln!("agent, 5 % dropped: loss {loss} of {messages} messages");
    ensure!(
        (loss - 0.05).abs() <= 0.015,
        "5 % dropped: the agent reads {loss} of {messages} messages lost"
    );

    // The history keeps each window's peer paths: the lossy windows are in the samples.
    let page = agent.get_json(&format!("/api/v1/samples?interface={iface}&limit=1000"))?;
    let lossy_windows = page["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s["wireguard_peers"].as_array()?.first().cloned())
        .filter(|p| {
            p["peer"] == peer
                && p["expected"].as_i64() > Some(2_000)
                && p["loss_percent"]
                    .as_f64()
                    .is_some_and(|l| (l - 5.0).abs() <= 1.5)
        })
        .count();
    ensure!(lossy_windows >= 1, "no lossy window in the samples: {page}");
    Ok(())
}

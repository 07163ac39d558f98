//! Scenario 5, `wireguard.handshake_stale`: a peer that never answers is critical, a working
//! tunnel healthy.

use anyhow::{ensure, Context, Result};
use netdoctor_lab::diagnosis::Diagnosis;
use netdoctor_lab::{lab_guard, PairTopology, WgConfig, WgInterface, WgTunnel};
use serde_json::Value;

use crate::diagnose_gateway::report::{as_i64, as_str, get, short};
use crate::diagnose_gateway::scenario::{
    diagnose_during, mostly_answered, ping_window, WG_WINDOW_SECS,
};

const WG_A: &str = "10.250.0.1/24";
const WG_B: &str = "10.250.0.2/24";
const WG_B_IP: &str = "10.250.0.2";
const WG_PORT: u16 = 51820;

/// The `facts.peers` entry with public key `key`.
fn peer<'a>(d: &'a Diagnosis, key: &str) -> Result<&'a Value> {
    d.at("/facts/peers")?
        .as_array()
        .context("peers")?
        .iter()
        .find(|p| p.get("name").and_then(Value::as_str) == Some(key))
        .with_context(|| format!("no peer {key} in facts.peers:\n{}", d.describe()))
}

#[test]
fn wireguard_peer_that_never_answers_is_critical() -> Result<()> {
    lab_guard!("wireguard-go", "wg", "ping");
    let pair = PairTopology::new(1500)?;
    // b listens on the endpoint but does not know a's public key: it drops every
    // initiation, as with a wrong key on either side.
    let b = WgInterface::new(&pair.b, WG_B, WG_PORT, 1420)?;
    let a = WgInterface::new(&pair.a, WG_A, WG_PORT, 1420)?;
    let endpoint = format!("{}:{WG_PORT}", PairTopology::B_IP);
    a.add_peer(
        b.public_key(),
        Some(&endpoint),
        &format!("{WG_B_IP}/32"),
        None,
    )?;
    let (d, ping) = diagnose_during(&pair.a, a.ifname(), WG_WINDOW_SECS, &[], || {
        ping_window(&pair.a, WG_B_IP, WG_WINDOW_SECS)
    })?;
    ensure!(
        ping.transmitted > 0 && ping.received == 0,
        "nothing may cross a tunnel without handshake: {}",
        ping.output
    );
    ensure!(
        a.latest_handshake()?.is_none(),
        "a handshake completed although b does not know a: {}",
        a.show()?
    );
    let finding = d.expect_finding("wireguard.handshake_stale", "critical")?;
    let subject = as_str(finding, "subject")?;
    ensure!(
        subject == format!("peer {}", b.public_key()),
        "tunnel scope: subject {subject:?} must name the peer {}",
        b.public_key()
    );
    let evidence = get(finding, "evidence")?;
    ensure!(
        as_i64(evidence, "initiations_sent")? > 0
            && as_i64(evidence, "responses_received")? == 0
            && as_str(evidence, "endpoint")? == endpoint,
        "evidence does not show unanswered initiations toward {endpoint}: {}",
        short(evidence)
    );
    let p = peer(&d, b.public_key())?;
    ensure!(
        as_i64(p, "initiations_sent")? > 0
            && as_i64(p, "responses_received")? == 0
            && as_i64(p, "handshake_age_s")? == -1,
        "peer facts must show initiations, no response, no handshake ever: {}",
        short(p)
    );
    ensure!(
        as_str(d.at("/facts/tunnel")?, "kind")? == "wireguard",
        "the interface was not recognised as WireGuard:\n{}",
        d.describe()
    );
    ensure!(
        d.code == 2,
        "a critical finding must exit 2:\n{}",
        d.describe()
    );
    Ok(())
}

#[test]
fn wireguard_working_tunnel_is_healthy() -> Result<()> {
    lab_guard!("wireguard-go", "wg", "ping");
    let pair = PairTopology::new(1500)?;
    let wg = WgTunnel::new(
        &pair.a,
        PairTopology::A_IP,
        &pair.b,
        PairTopology::B_IP,
        &WgConfig::default(),
    )?;
    let (d, ping) = diagnose_during(&pair.a, wg.a.ifname(), WG_WINDOW_SECS, &[], || {
        ping_window(&pair.a, wg.b.ip(), WG_WINDOW_SECS)
    })?;
    ensure!(
        mostly_answered(&ping),
        "pings across the working tunnel must be answered: {}",
        ping.output
    );
    let p = peer(&d, wg.b.public_key())?;
    ensure!(
        as_i64(p, "handshake_age_s")? >= 0
            && as_i64(p, "handshake_age_s")? <= 180
            && as_i64(p, "rx_bytes_delta")? > 0
            && as_i64(p, "tx_bytes_delta")? > 0,
        "peer facts must show a recent handshake and traffic both ways: {}",
        short(p)
    );
    ensure!(
        d.all("wireguard.handshake_stale").is_empty(),
        "wireguard.handshake_stale on a working tunnel:\n{}",
        d.describe()
    );
    d.expect_healthy()?;
    Ok(())
}

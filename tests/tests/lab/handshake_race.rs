//! A WireGuard tunnel that comes up while netdoctor watches is never reported with a
//! stale handshake, wherever in the observation its first handshake falls: at the start,
//! in the middle, and in the last moments, where the observation can end between the
//! initiation and its response.
//!
//! Each round: two namespaces, wireguard-go on both with each other's keys and no traffic
//! yet (so no handshake), `diagnose` of a's interface for [`WINDOW`]; one ping from a at
//! the round's offset into the observation starts the handshake. The healthy twin of
//! `diagnose_gateway`'s peer that never answers, which must still be reported.
//!
//! Needs root, BPF, wireguard-go and wg; skips elsewhere, fails under CI=true.

use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use netdoctor_lab::diagnosis::Diagnosis;
use netdoctor_lab::traffic::{self, PingOpts};
use netdoctor_lab::{lab_guard, netdoctor, PairTopology, WgInterface};

/// The observation.
const WINDOW: Duration = Duration::from_secs(2);
/// When the first ping goes out, in milliseconds after the observation began: early, in
/// the middle, and densely around the end, where the race was.
const OFFSETS_MS: &[u64] = &[
    100, 1000, 1800, 1900, 1950, 1960, 1970, 1975, 1980, 1985, 1990, 1995, 2000, 2010, 2050,
];
const OBSERVING: &str = "netdoctor: observing";
const PORT: u16 = 51820;

fn round(offset: Duration) -> Result<(Diagnosis, Option<u64>)> {
    let pair = PairTopology::new(1500)?;
    let a = WgInterface::new(&pair.a, "10.250.0.1/24", PORT, 1420)?;
    let b = WgInterface::new(&pair.b, "10.250.0.2/24", PORT, 1420)?;
    a.add_peer(
        b.public_key(),
        Some(&format!("{}:{PORT}", PairTopology::B_IP)),
        "10.250.0.2/32",
        None,
    )?;
    b.add_peer(a.public_key(), None, "10.250.0.1/32", None)?;
    ensure!(
        a.latest_handshake()?.is_none(),
        "a handshake before any traffic: {}",
        a.show()?
    );

    let bin = netdoctor::binary()?;
    let window = format!("{}ms", WINDOW.as_millis());
    let args = [
        "diagnose",
        a.ifname(),
        "--duration",
        &window,
        "--no-probe",
        "--json",
    ];
    let label = format!("netdoctor {}", args.join(" "));
    let mut process = pair
        .a
        .spawn_command(&label, pair.a.command(&bin.to_string_lossy(), args))?;
    process.wait_for_output(OBSERVING, netdoctor::START_TIMEOUT)?;
    let began = Instant::now();
    std::thread::sleep(offset.saturating_sub(began.elapsed()));
    let ping = traffic::ping(
        &pair.a,
        "10.250.0.2",
        &PingOpts {
            count: 1,
            reply_timeout_secs: 3,
            ..PingOpts::default()
        },
    )?;
    let status = process.wait_timeout(WINDOW + Duration::from_secs(60))?;
    let code = status.code().context("diagnose was killed")?;
    let d = Diagnosis::parse(label, code, &process.stdout()?, &process.stderr()?)?;
    ensure!(
        ping.received == 1,
        "the tunnel did not come up: {}\n{}",
        ping.output,
        a.show()?
    );
    Ok((d, a.latest_handshake()?))
}

#[test]
fn a_handshake_completing_during_the_observation_is_never_stale() -> Result<()> {
    lab_guard!("wireguard-go", "wg", "ping");
    let mut false_alarms = Vec::new();
    for ms in OFFSETS_MS {
        let (d, handshake) = round(Duration::from_millis(*ms))?;
        ensure!(handshake.is_some(), "ping at {ms} ms: no handshake");
        let peer = &d.fact("peers")[0];
        println!(
            "first ping {ms} ms into a {} ms observation: handshake_in_window {}, \
             initiations {}, responses {}, handshake_age_s {}, findings {:?}",
            WINDOW.as_millis(),
            peer["handshake_in_window"],
            peer["initiations_sent"],
            peer["responses_received"],
            peer["handshake_age_s"],
            d.ids()
        );
        if !d.all("wireguard.handshake_stale").is_empty() {
            false_alarms.push(format!("ping at {ms} ms:\n{}", d.describe()));
        }
    }
    ensure!(
        false_alarms.is_empty(),
        "wireguard.handshake_stale on a tunnel that came up while netdoctor watched:\n{}",
        false_alarms.join("\n")
    );
    Ok(())
}

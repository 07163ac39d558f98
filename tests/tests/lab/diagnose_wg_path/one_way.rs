//! A path that passes one direction only: after the handshake, the router between a and b
//! drops b's WireGuard packets to a (both ends' hooks see their packets leave) while a keeps
//! sending. Both ends are diagnosed at once: b answers a's handshake initiations and no data
//! follows (what b sends does not arrive), a sends and nothing comes back while its
//! initiations go unanswered (what b sends does not arrive). With the rule removed the next
//! handshake completes and neither end reports it.

use std::time::Duration;

use anyhow::{ensure, Result};
use netdoctor_lab::diagnosis::Diagnosis;
use netdoctor_lab::loss::{Direction, PacketLoss};
use netdoctor_lab::{lab_guard, observe, traffic, LineTopology, PingOpts};

use crate::diagnose_wg_path::lab::{peer_i64, Lab, Underlay};

const ID: &str = "wireguard.one_way_path";

/// a pings b through the tunnel for `secs` (5 a second) while a and b are diagnosed for
/// `window`; with `renew`, a starts a fresh handshake first (a second in, so both ends
/// watch it). Returns (a's report, b's report).
fn diagnose_both(
    lab: &Lab,
    window: Duration,
    secs: u32,
    renew: bool,
) -> Result<(Diagnosis, Diagnosis)> {
    std::thread::scope(|s| {
        let b = s
            .spawn(|| observe::diagnose_during(lab.b(), lab.wg.b.ifname(), window, &[], || Ok(())));
        let a = observe::diagnose_during(lab.a(), lab.wg.a.ifname(), window, &[], || {
            if renew {
                std::thread::sleep(Duration::from_secs(1));
                lab.renew_session()?;
            }
            let opts = PingOpts {
                count: secs * 5,
                interval_secs: 0.2,
                reply_timeout_secs: 1,
                ..PingOpts::default()
            };
            traffic::ping(lab.a(), lab.wg.b.ip(), &opts)
        });
        let b = b
            .join()
            .map_err(|_| anyhow::anyhow!("b's diagnosis panicked"))?;
        Ok((a?.0, b?.0))
    })
}

#[test]
fn one_way_path_is_found_from_both_ends_and_clears_when_the_rule_goes() -> Result<()> {
    lab_guard!("wireguard-go", "wg", "nft", "ping");
    let lab = Lab::over_router()?;
    let Underlay::Line(line) = &lab.underlay else {
        unreachable!("over_router builds a line");
    };
    // What b sends to a, dropped as it enters the router: after b's hooks, before a's.
    let drop_b_to_a = PacketLoss::add_matching(
        &line.router,
        LineTopology::ROUTER_SERVER_IF,
        Direction::Ingress,
        100,
        &["udp", "sport", "51820"],
    )?;
    // a hears nothing for 15 s (WireGuard's keepalive 10 s + rekey timeout 5 s), then retries
    // a handshake every 5 s: two unanswered attempts need ~26 s.
    let (a, b) = diagnose_both(&lab, Duration::from_secs(28), 29, false)?;
    let fb = b.expect_finding(ID, "critical")?;
    ensure!(
        fb["evidence"]["broken_direction"] == "outbound"
            && fb["evidence"]["responses_unconfirmed"]
                .as_i64()
                .unwrap_or(0)
                >= 2,
        "b: its answers never confirmed:\n{}",
        b.describe()
    );
    let fa = a.expect_finding(ID, "critical")?;
    ensure!(
        fa["evidence"]["broken_direction"] == "inbound"
            && fa["evidence"]["initiations_unanswered"]
                .as_i64()
                .unwrap_or(0)
                >= 2
            && fa["evidence"]["rx_data_packets"] == 0
            && fa["evidence"]["tx_data_packets"].as_i64().unwrap_or(0) > 50,
        "a: sends, nothing back:\n{}",
        a.describe()
    );
    eprintln!(
        "nft dropped {} of b's packets",
        drop_b_to_a.dropped_packets()?
    );

    drop(drop_b_to_a);
    // The twin: the same path once the rule is gone, a fresh handshake in the window.
    let (a, b) = diagnose_both(&lab, Duration::from_secs(10), 9, true)?;
    for (side, d) in [("a", &a), ("b", &b)] {
        ensure!(
            d.all(ID).is_empty()
                && peer_i64(d, "handshakes_answered")? >= 1
                && peer_i64(d, "underlay_received")? > 0,
            "{side}: the path works both ways again:\n{}",
            d.describe()
        );
    }
    Ok(())
}

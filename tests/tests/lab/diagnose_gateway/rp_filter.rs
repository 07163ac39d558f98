//! Scenario 4, `rpfilter.drops`: strict reverse-path filtering with asymmetric routing is
//! critical, loose mode healthy.

use anyhow::{ensure, Context, Result};
use netdoctor_lab::diagnosis::Diagnosis;
use netdoctor_lab::{lab_guard, stats, LineConfig, LineTopology, Netns};

use crate::diagnose_gateway::report::{as_i64, get, short};
use crate::diagnose_gateway::scenario::{diagnose_during, PING_WINDOW_SECS};

/// Spoofed/asymmetric source: the client sends from 10.200.9.1, a prefix the router
/// routes via its *server-side* interface. Arriving on eth0 (client side), strict
/// rp_filter drops it (IP_RPFILTER); loose mode accepts it (a route exists) and forwards.
const ASYMMETRIC_SRC: &str = "10.200.9.1";
const ASYMMETRIC_NET: &str = "10.200.9.0/24";

/// Echo requests the server's stack received (`IcmpInEchos`).
fn echos_received(ns: &Netns) -> Result<u64> {
    stats::net_counters(ns)?
        .get("IcmpInEchos")
        .copied()
        .context("no IcmpInEchos counter")
}

fn rp_filter_scenario(mode: &str) -> Result<(Diagnosis, u64)> {
    let line = LineTopology::new(&LineConfig::default())?;
    line.client
        .add_addr(LineTopology::CLIENT_IF, &format!("{ASYMMETRIC_SRC}/32"))?;
    line.router
        .add_route(ASYMMETRIC_NET, LineTopology::SERVER_IP)?;
    // ARP from the client must use its link address: with the default arp_announce=0 it
    // would announce 10.200.9.1, which strict rp_filter also refuses (the router would
    // never answer ARP and no IP packet would arrive at all).
    line.client.sysctl("net.ipv4.conf.all.arp_announce", "2")?;
    line.client.sysctl(
        &format!("net.ipv4.conf.{}.arp_announce", LineTopology::CLIENT_IF),
        "2",
    )?;
    // The kernel applies max(all, iface): set both.
    line.router.sysctl("net.ipv4.conf.all.rp_filter", mode)?;
    line.router.sysctl(
        &format!("net.ipv4.conf.{}.rp_filter", LineTopology::ROUTER_CLIENT_IF),
        mode,
    )?;
    let echos_before = echos_received(&line.server)?;
    let count = (PING_WINDOW_SECS * 5 + 5).to_string();
    let (d, _) = diagnose_during(
        &line.router,
        LineTopology::ROUTER_CLIENT_IF,
        PING_WINDOW_SECS,
        &[],
        || {
            // No reply ever comes back (the server answers toward 10.200.9.1, which
            // nobody owns): the exit status of ping is irrelevant.
            line.client.output(&[
                "ping",
                "-n",
                "-c",
                &count,
                "-i",
                "0.2",
                "-W",
                "1",
                "-I",
                ASYMMETRIC_SRC,
                LineTopology::SERVER_IP,
            ])
        },
    )?;
    let echos = echos_received(&line.server)?.saturating_sub(echos_before);
    Ok((d, echos))
}

#[test]
fn strict_rp_filter_with_asymmetric_routing_is_critical() -> Result<()> {
    lab_guard!("ping", "sysctl");
    let (d, echos) = rp_filter_scenario("1")?;
    ensure!(
        echos == 0,
        "strict rp_filter should stop every spoofed echo at the router, the server got {echos}"
    );
    let finding = d.expect_finding("rpfilter.drops", "critical")?;
    let evidence = get(finding, "evidence")?;
    let dropped = as_i64(evidence, "dropped")?;
    let by_reason = get(d.at("/facts/drops")?, "by_reason")?;
    ensure!(
        dropped > 0
            && as_i64(by_reason, "IP_RPFILTER")? == dropped
            && as_i64(evidence, "rp_filter")? == 1,
        "evidence does not show IP_RPFILTER drops under strict mode: {} / {}",
        short(evidence),
        short(by_reason)
    );
    ensure!(
        d.code == 2,
        "a critical finding must exit 2:\n{}",
        d.describe()
    );
    Ok(())
}

#[test]
fn loose_rp_filter_with_asymmetric_routing_is_healthy() -> Result<()> {
    lab_guard!("ping", "sysctl");
    let (d, echos) = rp_filter_scenario("2")?;
    ensure!(
        echos > 0,
        "loose rp_filter must let the spoofed echoes through to the server:\n{}",
        d.describe()
    );
    ensure!(
        as_i64(d.at("/facts/host")?, "rp_filter")? == 2
            && as_i64(d.at("/facts/drops")?, "rpfilter")? == 0,
        "loose mode: rp_filter fact must be 2 and no IP_RPFILTER drop:\n{}",
        d.describe()
    );
    ensure!(
        d.all("rpfilter.drops").is_empty(),
        "rpfilter.drops in loose mode:\n{}",
        d.describe()
    );
    d.expect_healthy()?;
    Ok(())
}

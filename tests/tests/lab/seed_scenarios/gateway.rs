//! Seed 4: a gateway with forwarding off; strict rp_filter with asymmetric routing.

use anyhow::{ensure, Result};
use netdoctor_lab::veth::{create_veth, VethEnd};
use netdoctor_lab::{lab_guard, traffic, BgProcess, LineConfig, LineTopology, Netns, PingOpts};
use serde_json::Value;

use crate::common_mesh::{diagnose, join, Diagnosis};

/// Pings the server from the client through the router for ~`secs` seconds.
fn background_ping(from: &Netns, to: &str, secs: u32) -> Result<BgProcess> {
    let count = (secs * 10).to_string();
    from.spawn(&["ping", "-n", "-i", "0.1", "-c", &count, "-W", "1", to])
}

fn forwarding_scenario(forwarding: bool) -> Result<(Diagnosis, traffic::PingReport)> {
    let line = LineTopology::new(&LineConfig {
        forwarding,
        ..LineConfig::default()
    })?;
    let _ping = background_ping(&line.client, LineTopology::SERVER_IP, 20)?;
    let d = diagnose(
        &line.router,
        LineTopology::ROUTER_CLIENT_IF,
        "3s",
        &["--no-probe"],
    )?;
    let check = traffic::ping(&line.client, LineTopology::SERVER_IP, &PingOpts::default())?;
    Ok((d, check))
}

#[test]
fn seed_4_gateway_forwarding_disabled() -> Result<()> {
    lab_guard!("ping");
    let ((broken, broken_ping), (healthy, healthy_ping)) = std::thread::scope(|s| {
        let broken = s.spawn(|| forwarding_scenario(false));
        let healthy = s.spawn(|| forwarding_scenario(true));
        Ok::<_, anyhow::Error>((
            join(broken, "forwarding off")?,
            join(healthy, "forwarding on")?,
        ))
    })?;
    ensure!(
        broken_ping.received == 0 && healthy_ping.all_received(),
        "scenario: pings through the gateway with forwarding off {}/{}, on {}/{}",
        broken_ping.received,
        broken_ping.transmitted,
        healthy_ping.received,
        healthy_ping.transmitted
    );
    let f = broken.finding("forwarding.disabled")?;
    ensure!(
        f.get("severity").and_then(Value::as_str) == Some("critical")
            && f.get("fix")
                .and_then(Value::as_str)
                .is_some_and(|fix| fix.contains("net.ipv4.ip_forward=1")),
        "finding: {f}"
    );
    ensure!(
        broken.i64("/facts/drops/forwarding")? >= 10 && !broken.bool("/facts/host/ip_forward")?,
        "drops/host facts: {}",
        broken.describe()
    );
    healthy.assert_none_of(&["forwarding.disabled"])?;
    ensure!(
        healthy.i64("/facts/drops/forwarding")? == 0,
        "healthy twin: {}",
        healthy.describe()
    );
    Ok(())
}

/// The line plus a second router — server link (router eth2 10.200.9.1 — server eth1
/// 10.200.9.2). The client pings 10.200.9.2: the request goes router → eth2, but the
/// server answers from 10.200.9.2 over its default route (eth0 → router eth1). With strict
/// rp_filter the router drops those answers on eth1 (the way back to 10.200.9.2 is eth2).
/// The server announces its eth0 address in ARP (`arp_announce=2`): otherwise its ARP
/// requests would carry 10.200.9.2 too, the router's rp_filter would ignore them, and no
/// answer would ever leave the server.
fn rp_filter_scenario(mode: &str) -> Result<(Diagnosis, traffic::PingReport)> {
    let line = LineTopology::new(&LineConfig::default())?;
    create_veth(
        VethEnd::ns(&line.router, "eth2").addr("10.200.9.1/24"),
        VethEnd::ns(&line.server, "eth1").addr("10.200.9.2/24"),
    )?;
    line.server.sysctl("net.ipv4.conf.all.arp_announce", "2")?;
    for key in ["all", "eth1"] {
        line.server
            .sysctl(&format!("net.ipv4.conf.{key}.rp_filter"), "0")?;
        line.router
            .sysctl(&format!("net.ipv4.conf.{key}.rp_filter"), mode)?;
    }
    let _ping = background_ping(&line.client, "10.200.9.2", 20)?;
    let d = diagnose(
        &line.router,
        LineTopology::ROUTER_SERVER_IF,
        "3s",
        &["--no-probe"],
    )?;
    let check = traffic::ping(&line.client, "10.200.9.2", &PingOpts::default())?;
    Ok((d, check))
}

#[test]
fn seed_4_gateway_rp_filter_strict_with_asymmetric_routing() -> Result<()> {
    lab_guard!("ping");
    let ((strict, strict_ping), (loose, loose_ping)) = std::thread::scope(|s| {
        let strict = s.spawn(|| rp_filter_scenario("1"));
        let loose = s.spawn(|| rp_filter_scenario("2"));
        Ok::<_, anyhow::Error>((
            join(strict, "rp_filter strict")?,
            join(loose, "rp_filter loose")?,
        ))
    })?;
    ensure!(
        strict_ping.received == 0 && loose_ping.all_received(),
        "scenario: asymmetric pings with rp_filter strict {}/{}, loose {}/{}",
        strict_ping.received,
        strict_ping.transmitted,
        loose_ping.received,
        loose_ping.transmitted
    );
    let f = strict.finding("rpfilter.drops")?;
    ensure!(
        f.get("fix")
            .and_then(Value::as_str)
            .is_some_and(|fix| fix.contains("rp_filter=2")),
        "finding: {f}"
    );
    ensure!(
        strict.i64("/facts/drops/rpfilter")? >= 10 && strict.i64("/facts/host/rp_filter")? == 1,
        "drops/host facts: {}",
        strict.describe()
    );
    loose.assert_none_of(&["rpfilter.drops"])?;
    Ok(())
}

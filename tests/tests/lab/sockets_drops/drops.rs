//! Kernel drop reasons (`netdoctor drops --json`): forwarding disabled on the router
//! shows IP_INADDRERRORS drops, as many as its SNMP counter.

use std::time::Duration;

use anyhow::{ensure, Context, Result};
use netdoctor_lab::netdoctor::{self, str_field, u64_field};
use netdoctor_lab::{
    lab_guard, stats, traffic, BgProcess, LineConfig, LineTopology, Netns, PingOpts,
};
use nix::sys::signal::Signal;
use serde_json::Value;

use crate::sockets_drops::helpers::f64_field;

/// `netdoctor drops ARGS` in the background inside `ns`, once its probe is attached.
fn start_drops(ns: &Netns, args: &[&str]) -> Result<BgProcess> {
    let bin = netdoctor::binary()?;
    let command = ns.command(&bin.to_string_lossy(), args);
    let mut process = ns.spawn_command(&format!("netdoctor {}", args.join(" ")), command)?;
    process.wait_for_output("netdoctor: counting kernel drops", netdoctor::START_TIMEOUT)?;
    Ok(process)
}

/// Ctrl-C, then the `--json` document.
fn stop_drops(mut process: BgProcess) -> Result<Value> {
    process.signal(Signal::SIGINT)?;
    let status = process.wait_timeout(Duration::from_secs(20))?;
    let stdout = process.stdout()?;
    ensure!(
        status.success(),
        "`{}` exited with {status}: {} {}",
        process.label(),
        process.stderr()?,
        stdout
    );
    let json: Value = serde_json::from_str(&stdout)
        .with_context(|| format!("drops output is not JSON: {stdout}"))?;
    f64_field(&json, "duration_s")?;
    u64_field(&json, "unclassified")?;
    for d in json
        .get("drops")
        .and_then(Value::as_array)
        .context("`drops` missing or not an array")?
    {
        str_field(d, "interface")?;
        str_field(d, "reason")?;
        for key in [
            "ifindex",
            "reason_code",
            "ethertype",
            "protocol",
            "packets",
            "bytes",
        ] {
            u64_field(d, key)?;
        }
    }
    Ok(json)
}

fn drop_entries(json: &Value) -> Vec<&Value> {
    json.get("drops")
        .and_then(Value::as_array)
        .map(|a| a.iter().collect())
        .unwrap_or_default()
}

#[test]
fn forwarding_disabled_shows_ip_inaddrerrors_on_the_router() -> Result<()> {
    lab_guard!("ping");
    let line = LineTopology::new(&LineConfig {
        forwarding: false,
        ..LineConfig::default()
    })?;
    // Neighbours resolved first, so every echo request reaches the router at once.
    traffic::ping(
        &line.client,
        LineTopology::ROUTER_CLIENT_SIDE_IP,
        &PingOpts::default(),
    )?;
    let all = start_drops(&line.router, &["drops", "--duration", "60s", "--json"])?;
    let server_side = start_drops(
        &line.router,
        &[
            "drops",
            "--interface",
            LineTopology::ROUTER_SERVER_IF,
            "--duration",
            "60s",
            "--json",
        ],
    )?;
    let before = stats::net_counters(&line.router)?;
    let ping = traffic::ping(
        &line.client,
        LineTopology::SERVER_IP,
        &PingOpts {
            count: 20,
            interval_secs: 0.05,
            ..PingOpts::default()
        },
    )?;
    let after = stats::net_counters(&line.router)?;
    let all = stop_drops(all)?;
    let server_side = stop_drops(server_side)?;
    let kernel = after.get("IpInAddrErrors").copied().unwrap_or(0)
        - before.get("IpInAddrErrors").copied().unwrap_or(0);
    println!("ping: {}", ping.output.trim());
    println!("IpInAddrErrors +{kernel}; netdoctor drops: {all:#}");
    assert_eq!(ping.received, 0, "the router must not forward");
    assert!(ping.transmitted >= 20, "{ping:?}");

    let entries: Vec<&Value> = drop_entries(&all)
        .into_iter()
        .filter(|d| d.get("reason").and_then(Value::as_str) == Some("IP_INADDRERRORS"))
        .collect();
    ensure!(
        entries.len() == 1,
        "expected one IP_INADDRERRORS entry, got {entries:?}"
    );
    let d = entries[0];
    assert_eq!(str_field(d, "interface")?, LineTopology::ROUTER_CLIENT_IF);
    assert_eq!(u64_field(d, "protocol")?, 1, "ICMP: {d}");
    assert_eq!(u64_field(d, "ethertype")?, 0x0800, "{d}");
    let packets = u64_field(d, "packets")?;
    // Every echo request is dropped once, with this reason, by the router; its SNMP
    // counter saw the same packets (its window is inside netdoctor's). Nothing else
    // is routed to a foreign address here, so no slack is needed.
    assert_eq!(packets, u64::from(ping.transmitted), "{d}");
    assert_eq!(packets, kernel, "IpInAddrErrors delta vs netdoctor: {d}");
    assert!(
        u64_field(d, "bytes")? >= packets * 84,
        "each echo request is ≥ 84 bytes of IP: {d}"
    );

    // --interface filters: nothing of the client side on the server side.
    for d in drop_entries(&server_side) {
        assert_eq!(
            str_field(d, "interface")?,
            LineTopology::ROUTER_SERVER_IF,
            "{server_side:#}"
        );
        assert_ne!(
            str_field(d, "reason")?,
            "IP_INADDRERRORS",
            "{server_side:#}"
        );
    }
    Ok(())
}

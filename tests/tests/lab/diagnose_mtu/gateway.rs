//! Gateway without MSS clamping: LAN client (1500) → gateway → WireGuard (1420) → remote.
//! `mss.clamp_missing` with connections in the window and without, beside clamped twins.

use std::time::Duration;

use anyhow::{ensure, Context, Result};
use netdoctor_lab::diagnosis::Diagnosis;
use netdoctor_lab::{
    lab_guard, traffic, Iperf3Server, LineConfig, LineTopology, WgConfig, WgTunnel,
};
use serde_json::Value;

use crate::diagnose_mtu::report::{
    diagnose_idle, diagnose_with, expect_evidence, expect_fix, iperf3, str_or, MtuChecks,
};

/// Rate of the LAN client's traffic through the gateway: only its SYNs matter, and two
/// wireguard-go daemons share the two cores.
const GATEWAY_RATE: &str = "10M";

/// LAN client — gateway — remote, with a WireGuard tunnel (MTU 1420) between gateway and
/// remote over their link; the remote routes the LAN subnet back through the tunnel
/// (AllowedIPs include it), so the client reaches the remote's tunnel address.
struct Gateway {
    // Declared first: wireguard-go stops before the namespaces go.
    wg: WgTunnel,
    line: LineTopology,
}

const LAN_SUBNET: &str = "10.200.1.0/24";

impl Gateway {
    fn new() -> Result<Gateway> {
        let line = LineTopology::new(&LineConfig::default())?;
        let config = WgConfig {
            mtu: 1420,
            ..WgConfig::default()
        };
        let wg = WgTunnel::new(
            &line.router,
            LineTopology::ROUTER_SERVER_SIDE_IP,
            &line.server,
            LineTopology::SERVER_IP,
            &config,
        )?;
        wg.b.add_peer(
            wg.a.public_key(),
            Some(&format!(
                "{}:{}",
                LineTopology::ROUTER_SERVER_SIDE_IP,
                wg.a.listen_port()
            )),
            &format!("{}/32,{LAN_SUBNET}", wg.a.ip()),
            None,
        )?;
        line.server
            .ip(&["route", "replace", LAN_SUBNET, "dev", wg.b.ifname()])?;
        traffic::wait_for_ping(&line.client, wg.b.ip(), Duration::from_secs(5))
            .context("LAN client → remote through the tunnel")?;
        Ok(Gateway { wg, line })
    }

    /// The clamping rule the finding's fix proposes, on the gateway.
    fn clamp(&self) -> Result<()> {
        self.clamp_oifname(self.wg.a.ifname())
    }

    /// The clamping rule of the fix, for packets leaving through `oifname`.
    fn clamp_oifname(&self, oifname: &str) -> Result<()> {
        let gw = &self.line.router;
        gw.run(&["nft", "add", "table", "inet", "mssfix"])?;
        gw.run(&[
            "nft",
            "add",
            "chain",
            "inet",
            "mssfix",
            "forward",
            "{ type filter hook forward priority mangle; }",
        ])?;
        gw.run(&[
            "nft", "add", "rule", "inet", "mssfix", "forward", "oifname", oifname, "tcp", "flags",
            "syn", "tcp", "option", "maxseg", "size", "set", "rt", "mtu",
        ])?;
        Ok(())
    }

    /// Diagnoses the gateway's wg interface while the LAN client opens TCP connections
    /// through the tunnel (iperf3 at a modest rate).
    fn diagnose(&self) -> Result<Diagnosis> {
        let _server = Iperf3Server::start(&self.line.server, 5201)?;
        let (d, report) = diagnose_with(&self.line.router, self.wg.a.ifname(), &[], || {
            iperf3(&self.line.client, self.wg.b.ip(), 5201, GATEWAY_RATE)
        })?;
        ensure!(
            report.received_bytes > 0,
            "no data from the LAN client through the tunnel: {:?}",
            report.json
        );
        Ok(d)
    }
}

/// Facts both gateway diagnoses share.
fn expect_gateway_facts(d: &Diagnosis) -> Result<()> {
    let checks: [(&str, Value); 5] = [
        ("iface.mtu", 1420.into()),
        ("iface.is_tunnel", true.into()),
        ("iface.lan_mtu", 1500.into()),
        ("host.ip_forward", true.into()),
        (
            "tunnel.underlay_iface",
            LineTopology::ROUTER_SERVER_IF.into(),
        ),
    ];
    for (path, expected) in checks {
        ensure!(
            d.fact(path) == &expected,
            "facts.{path} is {}, expected {expected}\n{}",
            d.fact(path),
            d.describe()
        );
    }
    Ok(())
}

#[test]
fn gateway_without_mss_clamping_into_a_1420_tunnel() -> Result<()> {
    lab_guard!("wireguard-go", "wg", "iperf3", "nft", "ping");
    let gw = Gateway::new()?;
    let d = gw.diagnose()?;
    expect_gateway_facts(&d)?;
    let f = d.expect("mss.clamp_missing", "warning")?;
    expect_evidence(&d, f, "tunnel_mtu", &1420.into())?;
    expect_evidence(&d, f, "lan_mtu", &1500.into())?;
    expect_evidence(&d, f, "largest_syn_mss", &1460.into())?;
    expect_evidence(&d, f, "mss_limit", &1380.into())?;
    let over = f["evidence"]["flows_over_limit"].as_i64().unwrap_or(0);
    ensure!(
        over >= 1,
        "flows_over_limit {over}: the LAN client's SYN (MSS 1460) crossed the tunnel\n{}",
        d.describe()
    );
    expect_fix(&d, f, &format!("oifname \"{}\"", gw.wg.a.ifname()))?;
    expect_fix(&d, f, "maxseg size set rt mtu")?;
    Ok(())
}

/// Twin: the same gateway with the clamping rule from the fix.
#[test]
fn gateway_with_mss_clamping_is_healthy() -> Result<()> {
    lab_guard!("wireguard-go", "wg", "iperf3", "nft", "ping");
    let gw = Gateway::new()?;
    gw.clamp()?;
    let d = gw.diagnose()?;
    expect_gateway_facts(&d)?;
    // The rule is seen, and it works: forwarded SYNs leave with MSS 1420 - 40.
    ensure!(
        d.fact("host.mss_clamping") == &Value::Bool(true)
            && d.fact_i64("traffic.syn_mss_max")? == 1380
            && d.fact_i64("traffic.syn_mss_over_limit")? == 0,
        "expected clamping detected and SYN MSS 1380 on the tunnel\n{}",
        d.describe()
    );
    d.expect_healthy()
}

/// A clamping rule that covers another interface (here the LAN side) does not clamp the
/// tunnel: the SYNs still leave it with MSS 1460, and the finding must stay.
#[test]
fn gateway_with_clamping_on_another_interface_still_lacks_it() -> Result<()> {
    lab_guard!("wireguard-go", "wg", "iperf3", "nft", "ping");
    let gw = Gateway::new()?;
    gw.clamp_oifname(LineTopology::ROUTER_CLIENT_IF)?;
    let d = gw.diagnose()?;
    expect_gateway_facts(&d)?;
    ensure!(
        d.fact_i64("traffic.syn_mss_max")? == 1460
            && d.fact_i64("traffic.syn_mss_over_limit")? >= 1,
        "the LAN client's SYNs leave the tunnel unclamped (MSS 1460)\n{}",
        d.describe()
    );
    d.expect("mss.clamp_missing", "warning")?;
    Ok(())
}

/// The configuration alone shows the risk: no connection starts while netdoctor watches
/// (a gateway whose connections all began before), and the warning is there, without
/// any SYN as evidence; a clamp on another interface exists but does not count.
#[test]
fn gateway_without_clamping_warns_with_no_connection_in_the_window() -> Result<()> {
    lab_guard!("wireguard-go", "wg", "nft", "ping");
    let gw = Gateway::new()?;
    gw.clamp_oifname(LineTopology::ROUTER_CLIENT_IF)?;
    let d = diagnose_idle(&gw.line.router, gw.wg.a.ifname())?;
    expect_gateway_facts(&d)?;
    ensure!(
        d.fact_i64("traffic.syn_mss_max")? == 0 && d.fact_i64("traffic.syn_mss_over_limit")? == 0,
        "a SYN crossed the tunnel although no connection started\n{}",
        d.describe()
    );
    let f = d.expect("mss.clamp_missing", "warning")?;
    expect_evidence(&d, f, "clamping_rule_present", &true.into())?;
    expect_evidence(&d, f, "clamping_rule_covering", &"".into())?;
    expect_evidence(&d, f, "flows_over_limit", &0.into())?;
    ensure!(
        str_or(&f["summary"]).contains("do not cover it"),
        "the summary should say the existing rule misses the tunnel: {}",
        str_or(&f["summary"])
    );
    expect_fix(&d, f, &format!("oifname \"{}\"", gw.wg.a.ifname()))?;
    Ok(())
}

/// Twin: the same idle gateway with the clamp on the tunnel: nothing to report.
#[test]
fn gateway_with_clamping_is_healthy_with_no_connection_in_the_window() -> Result<()> {
    lab_guard!("wireguard-go", "wg", "nft", "ping");
    let gw = Gateway::new()?;
    gw.clamp()?;
    let d = diagnose_idle(&gw.line.router, gw.wg.a.ifname())?;
    expect_gateway_facts(&d)?;
    ensure!(
        d.fact("host.mss_clamp_covers") == &Value::Bool(true)
            && str_or(d.fact("host.mss_clamp_rule")).contains(gw.wg.a.ifname()),
        "the clamp on the tunnel unseen\n{}",
        d.describe()
    );
    d.expect_healthy()
}

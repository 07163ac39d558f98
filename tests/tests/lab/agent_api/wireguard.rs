//! 1. The API against a WireGuard lab with traffic.
//!
//! Health, interfaces, flows, drops, metrics and diagnoses, checked against the lab's
//! MTUs, addresses and ports.

use std::time::Duration;

use anyhow::{bail, ensure, Result};
use netdoctor_lab::agent::{self, Agent, Auth};
use netdoctor_lab::attached;
use netdoctor_lab::{lab_guard, traffic, wg_over_pair, Iperf3Opts, Iperf3Server, PairTopology};

use crate::agent_api::diagnose::diagnose_once_at_a_time;
use crate::agent_api::helpers::{expect_error, find, interfaces, now_ms};
use crate::agent_api::lab::{CC, SEEN, UNDERLAY_MTU, WG_MTU};
use crate::agent_api::while_traffic::check_while_traffic_runs;

#[test]
fn agent_api_reports_a_wireguard_lab_with_traffic() -> Result<()> {
    lab_guard!("ping", "iperf3", "wireguard-go", "wg");
    let (pair, wg) = wg_over_pair(UNDERLAY_MTU, WG_MTU)?;
    let _server = Iperf3Server::start(&pair.b, 5201)?;
    let agent = Agent::start(&pair.a, &["--no-probe"])?;
    let wg_name = wg.a.ifname();
    let eth0 = PairTopology::IFNAME;

    // Health.
    let r = agent.request("GET", "/healthz", Auth::Missing)?;
    ensure!(
        r.status == 200 && r.json["status"] == "ok",
        "{}",
        r.describe()
    );
    let r = agent.get("/readyz")?;
    ensure!(
        r.status == 200
            && r.json["status"] == "ready"
            && r.json["interval_s"].as_f64() == Some(1.0)
            && r.json["now_ms"]
                .as_i64()
                .is_some_and(|t| t.abs_diff(now_ms()) < 10_000)
            && r.json["notes"].is_array(),
        "{}",
        r.describe()
    );

    // Interfaces: both, with their real MTUs, kinds and indexes, watched, hooks attached.
    let wg_index = attached::ifindex(&pair.a, wg_name)?;
    let eth0_index = attached::ifindex(&pair.a, eth0)?;
    agent.poll(
        "/api/v1/interfaces",
        Duration::from_secs(5),
        "wg and veth watched",
        |r| {
            let list = interfaces(r);
            let ok = |name: &str, kind: &str, mtu: u32, index: u32| {
                find(list, "name", name).is_some_and(|i| {
                    i["kind"] == kind
                        && i["mtu"] == mtu
                        && i["index"] == index
                        && i["up"] == true
                        && i["watched"] == true
                        && i["hooks"]["ingress"].is_string()
                        && i["hooks"]["egress"].is_string()
                        && i["hooks"]["method"].is_string()
                })
            };
            (r.status == 200
                && ok(wg_name, "wireguard", WG_MTU, wg_index)
                && ok(eth0, "veth", UNDERLAY_MTU, eth0_index)
                && find(list, "name", "lo").is_some_and(|lo| {
                    lo["watched"] == false && lo["hooks"].is_null() && lo["facts"].is_null()
                }))
            .then_some(())
        },
    )?;

    // One interface, with the facts of the last window.
    let one = agent.poll(
        &format!("/api/v1/interfaces/{wg_name}"),
        Duration::from_secs(10),
        "wg interface with facts",
        |r| (r.status == 200 && r.json["facts"].is_object()).then(|| r.json.clone()),
    )?;
    let facts = &one["facts"];
    ensure!(
        one["name"] == wg_name
            && one["mtu"] == WG_MTU
            && facts["iface"]["name"] == wg_name
            && facts["iface"]["mtu"] == WG_MTU
            && facts["tunnel"]["kind"] == "wireguard"
            && facts["tunnel"]["overhead_expected"] == 60
            && facts["tunnel"]["underlay_iface"] == eth0
            && facts["tunnel"]["underlay_mtu"] == UNDERLAY_MTU
            && facts["tunnel"]["max_mtu"] == UNDERLAY_MTU - 60
            && one["counters"]["ingress"]["packets"].is_u64()
            && one["rates"]["rx_bps"].is_number()
            && one["updated_ms"].is_i64(),
        "GET /api/v1/interfaces/{wg_name}: {one}"
    );
    expect_error(
        &agent.get("/api/v1/interfaces/ndnosuch0")?,
        404,
        "unknown_interface",
        None,
    )?;

    // Traffic: iperf3 with cubic through the tunnel, checked while it runs.
    let mut opts = Iperf3Opts::new(wg.b.ip());
    opts.duration_secs = 10;
    opts.congestion = Some(CC.to_owned());
    // Userspace WireGuard on two busy cores: a moderate rate keeps it loss-free.
    opts.bitrate = Some("20M".to_owned());
    let (iperf, seen) = std::thread::scope(|s| {
        let client = s.spawn(|| traffic::iperf3_client(&pair.a, &opts));
        let seen = check_while_traffic_runs(&agent, wg_name, wg.b.ip());
        let iperf = match client.join() {
            Ok(r) => r,
            Err(_) => Err(anyhow::anyhow!("iperf3 thread panicked")),
        };
        (iperf, seen)
    });
    let iperf = iperf?;
    seen?;
    ensure!(
        iperf.sender_congestion.as_deref() == Some(CC),
        "iperf3 did not use {CC}: {:?}",
        iperf.sender_congestion
    );

    // The WireGuard underlay flow on the veth, recognised by its message shape.
    let port = u64::from(wg.a.listen_port());
    let flows = agent.poll(
        &format!("/api/v1/flows?interface={eth0}&limit=1000"),
        SEEN,
        "WireGuard flows on the underlay",
        |r| {
            let out = r.items().iter().find(|f| {
                f["direction"] == "egress"
                    && f["src"] == PairTopology::A_IP
                    && f["dst"] == PairTopology::B_IP
            })?;
            let back = r.items().iter().find(|f| {
                f["direction"] == "ingress"
                    && f["src"] == PairTopology::B_IP
                    && f["dst"] == PairTopology::A_IP
            })?;
            (r.status == 200 && out["wireguard"]["data"].as_u64() > Some(0))
                .then(|| (r.clone(), out.clone(), back.clone()))
        },
    )?;
    let (page, out, back) = flows;
    for f in [&out, &back] {
        ensure!(
            f["interface"] == eth0
                && f["encap"] == "wireguard"
                && f["protocol"] == 17
                && f["src_port"] == port
                && f["dst_port"] == port
                && f["bytes"].as_u64() > Some(0),
            "underlay flow: {f}"
        );
    }
    ensure!(
        page.json["total"].as_u64() >= Some(2)
            && page.json["limit"] == 1000
            && page.json["offset"] == 0
            && page.items().iter().all(|f| f["interface"] == eth0),
        "flows page filtered on {eth0}: {}",
        page.describe()
    );

    // Drops answer (nothing is dropped on purpose here: the shape is what counts).
    let drops = agent.get_json("/api/v1/drops")?;
    ensure!(drops["drops"].is_array(), "GET /api/v1/drops: {drops}");
    for d in drops["drops"].as_array().into_iter().flatten() {
        ensure!(
            d["interface"].is_string()
                && d["reason"].is_string()
                && d["packets_total"].is_u64()
                && d["packets_last_window"].is_u64(),
            "drop entry: {d}"
        );
    }

    // Metrics with the lab's figures.
    let metrics = agent::parse_metrics(&agent.metrics()?)?;
    let one_metric = |name: &str, labels: &[(&str, &str)]| -> Result<f64> {
        match agent::find_metric(&metrics, name, labels).as_slice() {
            [m] => Ok(m.value),
            other => bail!("{name}{labels:?}: expected one sample, got {other:?}"),
        }
    };
    ensure!(
        one_metric("netdoctor_interface_mtu_bytes", &[("interface", wg_name)])?
            == f64::from(WG_MTU)
    );
    ensure!(
        one_metric(
            "netdoctor_interface_info",
            &[("interface", wg_name), ("kind", "wireguard")]
        )? == 1.0
    );
    ensure!(
        one_metric(
            "netdoctor_tunnel_overhead_bytes",
            &[("interface", wg_name), ("source", "expected")]
        )? == 60.0
    );
    // Bytes sent through the tunnel: at least iperf3's payload (the last window may lag).
    agent.poll(
        "/metrics",
        SEEN,
        "tx bytes on the wg interface >= iperf3's",
        |r| {
            let samples = agent::parse_metrics(&r.text).ok()?;
            let tx = agent::find_metric(
                &samples,
                "netdoctor_interface_bytes_total",
                &[("interface", wg_name), ("direction", "tx")],
            );
            (tx.len() == 1 && tx[0].value >= iperf.sent_bytes as f64).then_some(())
        },
    )?;

    diagnose_once_at_a_time(&agent, wg_name)?;
    ensure!(
        agent.get("/healthz")?.status == 200,
        "agent stopped serving; stderr: {}",
        agent.stderr()
    );
    Ok(())
}

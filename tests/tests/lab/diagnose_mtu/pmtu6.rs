//! The IPv6 path-MTU blackhole: client — router — server over IPv6, router→server hop
//! 1280 (the IPv6 minimum). IPv6 routers never fragment, so when the router's ICMPv6
//! packet-too-big is dropped every larger packet vanishes. `netdoctor probe` on it, and
//! `pmtu.blackhole` in a bulk transfer found by the probe and, without it, in the stalled
//! connection; each beside the twin where the packet-too-big arrives.

use anyhow::{ensure, Result};
use netdoctor_lab::diagnosis::Diagnosis;
use netdoctor_lab::{lab_guard, Iperf3Server, LineConfig, LineTopology};
use serde_json::{json, Value};

use crate::diagnose_mtu::probe_command::probe;
use crate::diagnose_mtu::report::{
    diagnose_for, expect_evidence, expect_fix, str_or, MtuChecks, DURATION,
};

/// Path MTU between client and server in [`blackhole_line6`]: the IPv6 minimum.
pub(crate) const HOP_MTU6: u32 = 1280;

/// client — router — server with IPv6, the router's interface toward the server at
/// [`HOP_MTU6`] (the server's own stays at 1500, so its SYN-ACK announces MSS 1440). With
/// `filter_icmp`, the router drops the ICMPv6 packet-too-big it generates (counted).
pub(crate) fn blackhole_line6(filter_icmp: bool) -> Result<LineTopology> {
    let line = LineTopology::new(&LineConfig::default())?;
    line.add_ipv6()?;
    line.router
        .set_mtu(LineTopology::ROUTER_SERVER_IF, HOP_MTU6)?;
    if filter_icmp {
        line.drop_router_packet_too_big()?;
    }
    Ok(line)
}

/// Diagnoses the client's interface for `duration` while `iperf3 -6` sends client →
/// server (unlimited when `rate` is None).
fn diagnose_bulk_transfer6(
    line: &LineTopology,
    rate: Option<&str>,
    duration: &str,
    extra: &[&str],
) -> Result<Diagnosis> {
    let _server = Iperf3Server::start(&line.server, 5201)?;
    let (d, _client, _) = diagnose_for(
        &line.client,
        LineTopology::CLIENT_IF,
        duration,
        extra,
        || {
            let mut argv = vec![
                "iperf3",
                "-6",
                "-c",
                LineTopology::SERVER_IP6,
                "-p",
                "5201",
                "-t",
                "10",
            ];
            if let Some(rate) = rate {
                argv.extend(["-b", rate]);
            }
            line.client.spawn(&argv)
        },
    )?;
    Ok(d)
}

/// Whether a flow toward the server's port 5201 has `pmtu` and passes `check`.
fn flow_to_server(d: &Diagnosis, pmtu: u32, check: impl Fn(&Value) -> bool) -> bool {
    let to = format!("[{}]:5201", LineTopology::SERVER_IP6);
    d.fact("flows")
        .as_array()
        .into_iter()
        .flatten()
        .any(|f| str_or(&f["name"]).ends_with(&to) && f["pmtu"] == i64::from(pmtu) && check(f))
}

#[test]
fn ipv6_probe_command_finds_the_1280_hop_blackholed_or_reported() -> Result<()> {
    lab_guard!("nft", "ping");
    // Blackhole: sizes above 1280 vanish, nobody reports them.
    let line = blackhole_line6(true)?;
    let p = probe(&line.client, LineTopology::SERVER_IP6)?;
    ensure!(
        p["blackhole"] == true
            && p["path_mtu"] == i64::from(HOP_MTU6)
            && p["max_size"] == 1500
            && p["too_big"] == json!([]),
        "IPv6 blackhole: expected path_mtu {HOP_MTU6}, blackhole, no too_big: {p}"
    );
    ensure!(
        line.packet_too_big_dropped()? > 0,
        "the router never generated (and dropped) a packet-too-big: no blackhole was built"
    );
    drop(line);

    // Twin: the router's packet-too-big arrives and names the hop's MTU.
    let line = blackhole_line6(false)?;
    let p = probe(&line.client, LineTopology::SERVER_IP6)?;
    ensure!(
        p["blackhole"] == false
            && p["path_mtu"] == i64::from(HOP_MTU6)
            && p["too_big"]
                == json!([{ "from": LineTopology::ROUTER_CLIENT_SIDE_IP6, "mtu": HOP_MTU6 }]),
        "IPv6 with PMTUD: expected path_mtu {HOP_MTU6}, too_big from {} with mtu {HOP_MTU6}: {p}",
        LineTopology::ROUTER_CLIENT_SIDE_IP6
    );
    Ok(())
}

#[test]
fn ipv6_pmtu_blackhole_stalls_a_bulk_transfer_and_the_probe_finds_it() -> Result<()> {
    lab_guard!("iperf3", "nft");
    let line = blackhole_line6(true)?;
    let d = diagnose_bulk_transfer6(&line, None, DURATION, &[])?;
    let f = d.expect("pmtu.blackhole", "critical")?;
    expect_evidence(&d, f, "probe_blackhole", &true.into())?;
    expect_evidence(&d, f, "probe_path_mtu", &i64::from(HOP_MTU6).into())?;
    expect_evidence(&d, f, "probe_target", &LineTopology::SERVER_IP6.into())?;
    expect_evidence(&d, f, "too_big_received", &0.into())?;
    expect_fix(&d, f, &format!("mtu {HOP_MTU6}"))?;
    // The fix names the message IPv6 needs, as an nft rule of the right family.
    expect_fix(&d, f, "icmpv6 type packet-too-big accept")?;
    ensure!(
        !str_or(&f["fix"]).contains("frag-needed"),
        "an IPv6 path needs no IPv4 frag-needed rule\n{}",
        d.describe()
    );
    ensure!(
        flow_to_server(&d, 1500, |f| f["full_size_retransmits"]
            .as_i64()
            .unwrap_or(0)
            > 0),
        "no IPv6 flow toward the server retransmitting full-size segments at pmtu 1500\n{}",
        d.describe()
    );
    ensure!(
        line.packet_too_big_dropped()? > 0,
        "the router never generated (and dropped) a packet-too-big: no blackhole was built"
    );
    Ok(())
}

/// Twin: the same path with the packet-too-big delivered; PMTUD works, no blackhole.
#[test]
fn ipv6_working_pmtud_on_the_same_path_is_no_blackhole() -> Result<()> {
    lab_guard!("iperf3");
    let line = blackhole_line6(false)?;
    let d = diagnose_bulk_transfer6(&line, Some("100M"), DURATION, &[])?;
    d.expect_absent("pmtu.blackhole")?;
    ensure!(
        d.fact("probe.blackhole") == &Value::Bool(false),
        "the probe must not see a blackhole\n{}",
        d.describe()
    );
    ensure!(
        flow_to_server(&d, HOP_MTU6, |f| f["throughput_bps"]
            .as_f64()
            .unwrap_or(0.0)
            > 1e6)
            && d.fact_i64("traffic.too_big_received")? > 0,
        "expected an IPv6 flow at pmtu {HOP_MTU6} moving data and a packet-too-big received\n{}",
        d.describe()
    );
    d.expect_healthy()
}

/// Without the probe (`--no-probe`): full-size segments resent in vain, no packet-too-big.
#[test]
fn ipv6_pmtu_blackhole_without_probe_is_seen_in_the_stalled_connection() -> Result<()> {
    lab_guard!("iperf3", "nft");
    let line = blackhole_line6(true)?;
    let d = diagnose_bulk_transfer6(&line, None, "5s", &["--no-probe"])?;
    ensure!(
        d.fact("probe.ran") == &Value::Bool(false),
        "--no-probe must not probe\n{}",
        d.describe()
    );
    let f = d.expect("pmtu.blackhole", "critical")?;
    expect_evidence(&d, f, "too_big_received", &0.into())?;
    ensure!(
        f["evidence"]["stalled_connections"].as_i64().unwrap_or(0) >= 1,
        "the stalled IPv6 transfer is the evidence\n{}",
        d.describe()
    );
    Ok(())
}

/// Twin of the fallback: the packet-too-big arrives, the transfer adapts and moves data.
#[test]
fn ipv6_working_pmtud_without_probe_is_no_blackhole() -> Result<()> {
    lab_guard!("iperf3");
    let line = blackhole_line6(false)?;
    let d = diagnose_bulk_transfer6(&line, Some("100M"), "5s", &["--no-probe"])?;
    ensure!(
        d.fact_i64("traffic.too_big_received")? > 0 && d.fact_i64("traffic.tcp_segments")? > 1000,
        "the IPv6 transfer ran and the router's packet-too-big arrived\n{}",
        d.describe()
    );
    d.expect_healthy()
}

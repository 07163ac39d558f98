//! What the API shows while iperf3 runs through the WireGuard lab: its connection in
//! `/api/v1/sockets` and samples with traffic both ways.

use anyhow::{ensure, Result};
use netdoctor_lab::agent::Agent;

use crate::agent_api::lab::{CC, SEEN, WG_MTU};

/// While iperf3 runs: its connection in `/api/v1/sockets` with the congestion control
/// asked for, and samples of the wg interface with traffic both ways.
pub(crate) fn check_while_traffic_runs(
    agent: &Agent,
    wg_name: &str,
    server_ip: &str,
) -> Result<()> {
    let remote = format!("{server_ip}:5201");
    let socket = agent.poll(
        &format!("/api/v1/sockets?interface={wg_name}&limit=1000"),
        SEEN,
        "iperf3 connection in /api/v1/sockets",
        |r| {
            r.items()
                .iter()
                .find(|s| s["remote"] == remote.as_str() && s["cc"] == CC)
                .cloned()
        },
    )?;
    ensure!(
        socket["interface"] == wg_name
            && socket["local"]
                .as_str()
                .is_some_and(|l| l.starts_with("10.250.0.1:"))
            && socket["state"].is_string()
            && socket["srtt_us"].is_u64()
            && socket["mss"]
                .as_u64()
                .is_some_and(|m| m > 0 && m <= u64::from(WG_MTU) - 40),
        "iperf3 socket: {socket}"
    );
    let sample = agent.poll(
        &format!("/api/v1/samples?interface={wg_name}&limit=1000"),
        SEEN,
        "a sample of the wg interface with rx and tx traffic",
        |r| {
            r.items()
                .iter()
                .find(|s| s["rx_bps"].as_f64() > Some(0.0) && s["tx_bps"].as_f64() > Some(0.0))
                .cloned()
        },
    )?;
    ensure!(
        sample["interface"] == wg_name
            && sample["mtu"] == WG_MTU
            && sample["window_s"]
                .as_f64()
                .is_some_and(|w| (0.5..5.0).contains(&w))
            && sample["rx_pps"].as_f64() > Some(0.0)
            && sample["tx_pps"].as_f64() > Some(0.0)
            && sample["overhead_expected"] == 60
            && sample["ts_ms"].is_i64()
            && sample["size_buckets"].is_object(),
        "sample: {sample}"
    );
    Ok(())
}

//! Diagnoses over the API on the WireGuard lab: one at a time (a second one is `busy`),
//! and the report they answer with.

use std::sync::Barrier;

use anyhow::{bail, ensure, Result};
use netdoctor_lab::agent::{Agent, Reply};

use crate::agent_api::helpers::expect_error;
use crate::agent_api::lab::{UNDERLAY_MTU, WG_MTU};

/// Two diagnoses started at once: one report, one 429 `busy`; then, the first one done,
/// another runs (the slot is released), and an unknown interface is a 404.
pub(crate) fn diagnose_once_at_a_time(agent: &Agent, wg_name: &str) -> Result<()> {
    let path = format!("/api/v1/diagnose/{wg_name}?duration=2s&probe=false");
    let barrier = Barrier::new(2);
    let replies: Vec<Result<Reply>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..2)
            .map(|_| {
                s.spawn(|| {
                    barrier.wait();
                    agent.post(&path)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("POST thread panicked")))
            })
            .collect()
    });
    let replies = replies.into_iter().collect::<Result<Vec<_>>>()?;
    let (ok, busy): (Vec<&Reply>, Vec<&Reply>) = replies.iter().partition(|r| r.status == 200);
    let ([report], [busy]) = (ok.as_slice(), busy.as_slice()) else {
        bail!(
            "two concurrent diagnoses: expected one 200 and one 429, got:\n{}",
            replies
                .iter()
                .map(Reply::describe)
                .collect::<Vec<_>>()
                .join("\n")
        );
    };
    expect_error(busy, 429, "busy", None)?;
    ensure!(
        busy.retry_after.parse::<u64>().is_ok_and(|s| s > 0),
        "429 without a Retry-After in seconds: {:?}",
        busy.retry_after
    );
    check_report(report, wg_name)?;

    // The slot is free again.
    let again = agent.post(&format!(
        "/api/v1/diagnose/{wg_name}?duration=1s&probe=false"
    ))?;
    check_report(&again, wg_name)?;
    expect_error(
        &agent.post("/api/v1/diagnose/ndnosuch0?duration=1s&probe=false")?,
        404,
        "unknown_interface",
        None,
    )?;
    Ok(())
}

fn check_report(r: &Reply, wg_name: &str) -> Result<()> {
    let j = &r.json;
    ensure!(
        r.status == 200
            && j["interface"] == wg_name
            && j["kind"] == "wireguard"
            && j["facts"]["iface"]["mtu"] == WG_MTU
            && j["facts"]["tunnel"]["underlay_mtu"] == UNDERLAY_MTU
            && j["findings"].is_array()
            && j["notes"].is_array()
            && j["duration_s"].as_f64().is_some_and(|d| d >= 0.9),
        "diagnosis report: {}",
        r.describe()
    );
    ensure!(
        j["facts"]["probe"]["ran"] != true,
        "probe=false, but the report says the probe ran: {}",
        j["facts"]["probe"]
    );
    Ok(())
}

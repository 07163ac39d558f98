//! 4. kill -9: nothing attached, the history intact, served after a restart.

use std::time::Duration;

use ::netdoctor::daemon::store::{FindingQuery, SampleQuery, StateFilter};
use anyhow::{bail, ensure, Context, Result};
use netdoctor_lab::agent::Agent;
use netdoctor_lab::attached;
use netdoctor_lab::{lab_guard, traffic, PairTopology, PingOpts};
use serde_json::Value;

use crate::agent_lifecycle::helpers::{open_store, with_id};
use crate::agent_lifecycle::lab::{mtu_lab, EXCEEDS, OVERSIZED_MTU, SETTLE};

#[test]
fn agent_killed_with_sigkill_leaves_nothing_attached_and_its_history_intact() -> Result<()> {
    lab_guard!("ping", "wireguard-go", "wg", "tc");
    let (pair, wg) = mtu_lab(OVERSIZED_MTU)?;
    let ns = &pair.a;
    let name = wg.a.ifname();
    let eth0 = PairTopology::IFNAME;
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("history").join("netdoctor.db");
    let db_arg = db.to_string_lossy().into_owned();
    let args = ["--no-probe", "--interval", "1s", "--database", &db_arg];
    let mut agent = Agent::start(ns, &args)?;

    // Traffic while it writes a sample per second and refreshes the finding.
    let (finding, samples) = std::thread::scope(|s| -> Result<(Value, Vec<i64>)> {
        let pinger = s.spawn(|| {
            let opts = PingOpts {
                count: 40,
                interval_secs: 0.1,
                size: Some(1000),
                ..PingOpts::default()
            };
            traffic::ping(ns, wg.b.ip(), &opts)
        });
        let finding = agent.poll(
            &format!("/api/v1/findings?interface={name}"),
            SETTLE,
            "the finding, evaluated 3 times",
            |r| {
                with_id(r, EXCEEDS)
                    .first()
                    .filter(|f| f["evaluations"].as_u64() >= Some(3))
                    .map(|f| (*f).clone())
            },
        );
        let samples = agent.poll(
            &format!("/api/v1/samples?interface={name}&limit=1000"),
            SETTLE,
            "4 samples with traffic",
            |r| {
                let items = r.items();
                (items.len() >= 4 && items.iter().any(|s| s["tx_bps"].as_f64() > Some(0.0)))
                    .then(|| items.iter().filter_map(|s| s["ts_ms"].as_i64()).collect())
            },
        );
        match pinger.join() {
            Ok(p) => {
                p?;
            }
            Err(_) => bail!("ping thread panicked"),
        }
        Ok((finding?, samples?))
    })?;
    let opened_ms = finding["opened_ms"].as_i64().context("opened_ms")?;

    // While it runs, its programs are on both interfaces.
    for ifname in [eth0, name] {
        let a = attached::attached(ns, ifname)?;
        ensure!(
            !a.tcx_ingress.is_empty() && !a.tcx_egress.is_empty(),
            "agent running, but nothing in the tcx chains of {ifname}: {a:?}"
        );
    }

    let status = agent.kill9()?;
    ensure!(
        !status.success() && status.code().is_none(),
        "the agent was not killed by SIGKILL: {status}"
    );
    attached::wait_nothing_attached(ns, &["lo", eth0, name], Duration::from_secs(3))?;

    // The database: intact, with what was written before the kill.
    let evaluations_at_kill;
    {
        let store = open_store(&db)?;
        let check = store.integrity_check()?;
        ensure!(check == "ok", "integrity_check after kill -9: {check}");
        let found = store.findings(&FindingQuery {
            interface: Some(name.to_owned()),
            state: StateFilter::All,
            ..FindingQuery::default()
        })?;
        let rows: Vec<_> = found.items.iter().filter(|f| f.id == EXCEEDS).collect();
        ensure!(
            rows.len() == 1 && rows[0].opened_ms == opened_ms && rows[0].evaluations >= 3,
            "{EXCEEDS} in the database after kill -9: {rows:?}"
        );
        evaluations_at_kill = rows[0].evaluations;
        let stored = store.samples(&SampleQuery {
            interface: Some(name.to_owned()),
            limit: 1000,
            ..SampleQuery::default()
        })?;
        let stored_ts: Vec<i64> = stored.items.iter().map(|s| s.ts_ms).collect();
        let missing: Vec<_> = samples.iter().filter(|t| !stored_ts.contains(t)).collect();
        ensure!(
            missing.is_empty(),
            "samples served before the kill are missing from the database: {missing:?} (stored {stored_ts:?})"
        );
    }

    // Restarted on the same database: the history is served, the finding continues.
    let agent = Agent::start(ns, &args)?;
    let served = agent.get_json(&format!("/api/v1/samples?interface={name}&limit=1000"))?;
    let served_ts: Vec<i64> = served["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s["ts_ms"].as_i64())
        .collect();
    let missing: Vec<_> = samples.iter().filter(|t| !served_ts.contains(t)).collect();
    ensure!(
        missing.is_empty(),
        "samples from before the kill not served after the restart: {missing:?} (served {served_ts:?})"
    );
    let continued = agent.poll(
        &format!("/api/v1/findings?state=all&interface={name}"),
        SETTLE,
        "the finding from before the kill, refreshed after the restart",
        |r| {
            let rows = with_id(r, EXCEEDS);
            match rows.as_slice() {
                [f] if f["evaluations"].as_u64() > Some(evaluations_at_kill) => Some((*f).clone()),
                _ => None,
            }
        },
    )?;
    ensure!(
        continued["opened_ms"] == opened_ms && continued["state"] == "active",
        "after the restart: {continued}"
    );
    Ok(())
}

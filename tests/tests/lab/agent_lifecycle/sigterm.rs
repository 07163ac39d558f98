//! 5. SIGTERM: exit 0 within a few seconds, nothing attached.

use std::time::{Duration, Instant};

use anyhow::{ensure, Result};
use netdoctor_lab::agent::Agent;
use netdoctor_lab::attached;
use netdoctor_lab::{lab_guard, PairTopology};

use crate::agent_lifecycle::helpers::{listed, open_store};
use crate::agent_lifecycle::lab::SETTLE;

#[test]
fn agent_exits_cleanly_on_sigterm() -> Result<()> {
    lab_guard!("tc");
    let pair = PairTopology::new(1500)?;
    let ns = &pair.a;
    let eth0 = PairTopology::IFNAME;
    let mut agent = Agent::start(ns, &["--no-probe"])?;
    agent.poll("/api/v1/interfaces", SETTLE, "eth0 watched", |r| {
        listed(r, eth0)
            .filter(|i| i["watched"] == true && i["hooks"].is_object())
            .map(drop)
    })?;
    let running = attached::attached(ns, eth0)?;
    ensure!(
        !running.tcx_ingress.is_empty() && !running.tcx_egress.is_empty(),
        "agent running, but nothing in the tcx chains of {eth0}: {running:?}"
    );
    let db = agent.database().to_owned();

    let started = Instant::now();
    let status = agent.terminate(Duration::from_secs(10))?;
    let took = started.elapsed();
    ensure!(
        status.success(),
        "SIGTERM: expected exit 0, got {status}; stderr:\n{}",
        agent.stderr()
    );
    ensure!(
        took <= Duration::from_secs(5),
        "SIGTERM took {took:?} to stop the agent"
    );
    attached::wait_nothing_attached(ns, &["lo", eth0], Duration::from_secs(3))?;
    let store = open_store(&db)?;
    ensure!(store.integrity_check()? == "ok");
    Ok(())
}

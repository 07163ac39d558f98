//! Scenario 3, `forwarding.disabled`: a gateway with forwarding off is critical, with it on
//! healthy.

use anyhow::{ensure, Result};
use netdoctor_lab::diagnosis::Diagnosis;
use netdoctor_lab::{lab_guard, LineConfig, LineTopology, PingReport};

use crate::diagnose_gateway::report::{as_bool, as_i64, get, short};
use crate::diagnose_gateway::scenario::{
    diagnose_during, mostly_answered, ping_window, PING_WINDOW_SECS,
};

fn forwarding_scenario(forwarding: bool) -> Result<(Diagnosis, PingReport)> {
    let line = LineTopology::new(&LineConfig {
        forwarding,
        ..LineConfig::default()
    })?;
    diagnose_during(
        &line.router,
        LineTopology::ROUTER_CLIENT_IF,
        PING_WINDOW_SECS,
        &[],
        || ping_window(&line.client, LineTopology::SERVER_IP, PING_WINDOW_SECS),
    )
}

#[test]
fn forwarding_disabled_on_the_gateway_is_critical() -> Result<()> {
    lab_guard!("ping");
    let (d, ping) = forwarding_scenario(false)?;
    ensure!(
        ping.transmitted > 0 && ping.received == 0,
        "pings through a non-forwarding router must all be lost: {}",
        ping.output
    );
    let finding = d.expect_finding("forwarding.disabled", "critical")?;
    let evidence = get(finding, "evidence")?;
    let dropped = as_i64(evidence, "dropped")?;
    ensure!(
        dropped > 0
            && dropped == as_i64(d.at("/facts/drops")?, "forwarding")?
            && !as_bool(evidence, "ip_forward")?,
        "evidence does not show forwarding drops with ip_forward off: {}",
        short(evidence)
    );
    ensure!(
        d.code == 2,
        "a critical finding must exit 2:\n{}",
        d.describe()
    );
    Ok(())
}

#[test]
fn forwarding_enabled_on_the_gateway_is_healthy() -> Result<()> {
    lab_guard!("ping");
    let (d, ping) = forwarding_scenario(true)?;
    ensure!(
        mostly_answered(&ping),
        "pings through a forwarding router must be answered: {}",
        ping.output
    );
    ensure!(
        as_i64(d.at("/facts/drops")?, "forwarding")? == 0
            && as_bool(d.at("/facts/host")?, "ip_forward")?,
        "forwarding on, yet forwarding drops or ip_forward false:\n{}",
        d.describe()
    );
    d.expect_healthy()?;
    Ok(())
}

//! 6. Rules at the limits: the largest accepted run, a larger one is refused at start.
//!
//! The largest expressions `rules check` accepts run on the monitor's thread evaluation
//! after evaluation; a rule past them (2,000 `1 +` terms, which overflowed the monitor's
//! stack within a second) keeps the agent from starting.

use std::path::Path;
use std::time::Duration;

use anyhow::{ensure, Result};
use netdoctor_lab::agent::Agent;
use netdoctor_lab::{lab_guard, PairTopology};

use crate::agent_lifecycle::helpers::with_id;
use crate::agent_lifecycle::lab::SETTLE;

/// Writes a rule `id` whose condition is `condition` into `dir`.
fn write_rule(dir: &Path, id: &str, condition: &str) -> Result<()> {
    let text = format!(
        "id = \"{id}\"\nseverity = \"info\"\nscope = \"interface\"\n\
         condition = '''{condition}'''\nsummary = \"at the limits\"\nfix = \"none\"\n"
    );
    std::fs::write(dir.join(format!("{id}.toml")), text)?;
    Ok(())
}

#[test]
fn agent_evaluates_the_largest_accepted_rules_and_refuses_larger_ones() -> Result<()> {
    lab_guard!("tc");
    let pair = PairTopology::new(1500)?;
    let ns = &pair.a;
    let eth0 = PairTopology::IFNAME;

    let past = tempfile::tempdir()?;
    write_rule(
        past.path(),
        "site.sum",
        &format!("{}1 > 0", "1 + ".repeat(2_000)),
    )?;
    let dir = past.path().to_str().unwrap_or_default();
    let mut agent = Agent::spawn(ns, &["--no-probe", "--rules", dir], None)?;
    let status = agent.process_mut().wait_timeout(Duration::from_secs(10))?;
    let stderr = agent.stderr();
    ensure!(
        status.code() == Some(3) && stderr.contains("bytes long, more than the 4096"),
        "a rule past the limits: expected exit 3 naming the limit, got {status}; stderr:\n{stderr}"
    );

    // The largest of each shape: a sum as deep as the syntax tree may be, inside brackets
    // nested as deep as they may be, comprehensions nested as deep.
    let accepted = tempfile::tempdir()?;
    let mut exists = format!("{}1 > 0", "1 + ".repeat(32));
    for i in 0..24 {
        exists = format!("[{i}].exists(a{i}, {exists})");
    }
    let rules = [
        ("site.sum", format!("{}1 > 0", "1 + ".repeat(126))),
        (
            "site.nested_sum",
            format!(
                "{}{}1{} > 0",
                "(".repeat(24),
                "1 + ".repeat(126),
                ")".repeat(24)
            ),
        ),
        ("site.nested_exists", exists),
    ];
    for (id, condition) in &rules {
        write_rule(accepted.path(), id, condition)?;
    }
    let dir = accepted.path().to_str().unwrap_or_default();
    let mut agent = Agent::start(ns, &["--no-probe", "--rules", dir])?;
    let findings = format!("/api/v1/findings?interface={eth0}");
    for (id, _) in &rules {
        agent.poll(
            &findings,
            SETTLE,
            &format!("{id}, evaluated 3 times"),
            |r| {
                with_id(r, id)
                    .first()
                    .filter(|f| f["evaluations"].as_u64() >= Some(3))
                    .map(drop)
            },
        )?;
    }
    ensure!(
        agent.is_running(),
        "the agent stopped while evaluating the largest rules; stderr:\n{}",
        agent.stderr()
    );
    let status = agent.terminate(Duration::from_secs(10))?;
    ensure!(
        status.success(),
        "SIGTERM: exit {status}; stderr:\n{}",
        agent.stderr()
    );
    Ok(())
}

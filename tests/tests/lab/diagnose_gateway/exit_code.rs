//! Scenario 7, exit code 3: an unknown interface.

use std::time::Duration;

use anyhow::{ensure, Result};
use netdoctor_lab::netdoctor::{self, EXIT_UNKNOWN};
use netdoctor_lab::{ci, Netns};

#[test]
fn unknown_interface_exits_3() -> Result<()> {
    if !ci::require_bpf_or_skip() {
        return Ok(());
    }
    let ns = Netns::new()?;
    let out = netdoctor::run(
        Some(&ns),
        &["diagnose", "nosuch0", "--duration", "1s", "--json"],
        Duration::from_secs(60),
    )?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    ensure!(
        out.status.code() == Some(EXIT_UNKNOWN),
        "unknown interface: exit {} instead of {EXIT_UNKNOWN}; stderr: {stderr}",
        out.status
    );
    ensure!(
        stderr.contains("nosuch0"),
        "stderr does not name the interface: {stderr}"
    );
    ensure!(
        out.stdout.is_empty(),
        "no report may be printed for an unknown interface: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    Ok(())
}

//! Reports in human units (issue 35), checked on real rendered reports with
//! [`netdoctor_lab::units`]: the demo's text report (`.ci/demo`, the quick start's
//! `--demo`: a wireguard-go tunnel at MTU 1480 over a 1500-byte veth, with traffic) has no
//! `-1` and no integer above 9,999 without separators in any finding's message or evidence
//! line. The Tailscale report's check is in `diagnose_tailscale` (it needs that lab's mesh).
//!
//! Needs root, BPF, wireguard-go, wg and iperf3; skips elsewhere, fails under CI=true.
//! Build the binary first: `cargo build -p netdoctor`.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use anyhow::{ensure, Result};
use netdoctor_lab::{cmd, lab_guard, netdoctor, units};

#[test]
fn the_demo_report_reads_in_human_units() -> Result<()> {
    lab_guard!("wireguard-go", "wg", "iperf3", "bash");
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../.ci/demo");
    let mut command = Command::new("bash");
    command
        .arg(&demo)
        .env("NETDOCTOR_BIN", netdoctor::binary()?);
    let out = cmd::output_timeout(&mut command, Duration::from_secs(60))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{text}");
    // The demo's tunnel MTU ignores WireGuard's overhead: a critical finding, exit 2.
    ensure!(
        out.status.code() == Some(2) && text.contains("CRITICAL mtu.tunnel_exceeds_underlay"),
        "demo exited {:?}:\n{text}\n{stderr}",
        out.status.code()
    );
    units::check_text_report(&text)
}

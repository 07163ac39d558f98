//! Shared by `diagnose_tailscale`, `diagnose_tap_mesh` and `seed_scenarios`: running
//! `netdoctor diagnose IFACE --json` inside a lab namespace, its report checked for the
//! documented schema and an exit code that follows the worst finding.
//!
//! Each of those modules uses a different subset of these helpers.
#![allow(dead_code)]

use std::time::Duration;

use anyhow::{bail, ensure, Context, Result};
pub use netdoctor_lab::diagnosis::Diagnosis;
use netdoctor_lab::{observe, BgProcess, Netns};

/// Finding ids that are about the tunnel MTU.
pub const MTU_FINDINGS: &[&str] = &[
    "mtu.tunnel_exceeds_underlay",
    "mtu.tunnel_undersized",
    "mtu.underlay_fragmentation",
];

/// Runs `netdoctor diagnose IFACE --json --duration DURATION [extra...]` inside `ns`
/// (netdoctor must see the interface, the tunnel daemon's sockets and the sysctls of that
/// namespace) and parses the report. Any exit code other than 0/1/2 is an error, and so
/// is a diagnosis that does not end on time ([`observe::diagnose_during`]).
pub fn diagnose(ns: &Netns, iface: &str, duration: &str, extra: &[&str]) -> Result<Diagnosis> {
    let window = observe::window(duration)?;
    let (d, ()) = observe::diagnose_during(ns, iface, window, extra, || Ok(()))
        .with_context(|| format!("netdoctor diagnose {iface} in {}", ns.name()))?;
    ensure!(
        d.str("/interface")? == iface,
        "report is about {:?}, not {iface}",
        d.str("/interface")?
    );
    println!("{}: exit {}, findings {:?}", d.label, d.code, d.ids());
    Ok(d)
}

/// Joins a scoped thread, turning a panic into an error.
pub fn join<T>(handle: std::thread::ScopedJoinHandle<'_, Result<T>>, what: &str) -> Result<T> {
    match handle.join() {
        Ok(result) => result.with_context(|| what.to_owned()),
        Err(_) => bail!("thread {what} panicked"),
    }
}

/// Waits up to `timeout` until `ifname` exists in `ns` (a daemon creating its TUN/TAP),
/// failing early if `daemon` exits.
pub fn wait_for_link(
    ns: &Netns,
    ifname: &str,
    daemon: &mut BgProcess,
    timeout: Duration,
) -> Result<()> {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        let present = ns
            .output(&["ip", "link", "show", "dev", ifname])
            .map(|o| o.status.success())
            .unwrap_or(false);
        if present {
            return Ok(());
        }
        if let Some(status) = daemon.try_status()? {
            bail!(
                "`{}` exited ({status}) before creating {ifname}: {}{}",
                daemon.label(),
                daemon.stdout().unwrap_or_default().trim(),
                daemon.stderr().unwrap_or_default().trim()
            );
        }
        if std::time::Instant::now() >= deadline {
            bail!(
                "{ifname} did not appear in {} within {timeout:?}; `{}` says: {}{}",
                ns.name(),
                daemon.label(),
                daemon.stdout().unwrap_or_default().trim(),
                daemon.stderr().unwrap_or_default().trim()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `mtu N` as the fix text of the MTU rules writes it.
pub fn mtu_fix(iface: &str, mtu: i64) -> String {
    format!("ip link set dev {iface} mtu {mtu}")
}

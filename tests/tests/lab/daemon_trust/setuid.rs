//! A setuid-root program another user starts, named like a daemon (as `su` run through a
//! link named `fastd`, with `-c /etc/shadow`): its effective and saved uids are root's,
//! but its real uid, command line, name and descriptors are the user's. netdoctor takes
//! nothing from it: no file it names is read, no socket it serves is believed.

use std::os::unix::fs::PermissionsExt;

use anyhow::{ensure, Result};
use netdoctor_lab::{lab_guard, Netns};

use crate::daemon_trust::{diagnose, expect_note, notes, Daemon};
use crate::daemon_trust::{FASTD_TAP_CRYPTO, FASTD_TAP_NULL};

/// How a setuid program another user runs shows in the notes.
const MIXED: &str = "real uid 65534, effective uid 0, saved uid 0";

#[test]
fn a_setuid_program_named_like_a_daemon_is_not_roots() -> Result<()> {
    lab_guard!();
    let ns = Netns::new()?;
    let files = tempfile::tempdir()?;
    std::fs::set_permissions(files.path(), std::fs::Permissions::from_mode(0o755))?;
    // A file only root may read (as /etc/shadow), that fastd's parser would take in.
    let secret = files.path().join("root-only.conf");
    std::fs::write(&secret, "method \"null\";\n")?;
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600))?;
    let secret_arg = secret.to_string_lossy().into_owned();

    // fastd: the file it names is not opened.
    let fastd = Daemon::start_setuid(&ns, "fastd", &["-c", &secret_arg])?;
    let d = diagnose(&ns, &fastd.ifname)?;
    ensure!(
        d.i64("/facts/tunnel/overhead_expected")? == FASTD_TAP_CRYPTO,
        "the root-only file was read for a setuid program uid 65534 started: {}",
        d.describe()
    );
    expect_note(&d, &["fastd's configuration", &secret_arg, MIXED])?;
    drop(fastd);

    // tincd: its binary is not read for a version either (nor run).
    let tincd = Daemon::start_setuid(&ns, "tincd", &[])?;
    let d = diagnose(&ns, &tincd.ifname)?;
    ensure!(d.str("/facts/tunnel/kind")? == "tinc", "{}", d.describe());
    expect_note(&d, &["tinc's version is unknown", MIXED])?;
    ensure!(!tincd.was_run(), "netdoctor ran {}", tincd.binary.display());
    drop(tincd);

    // tailscaled serving its own LocalAPI (socket and SO_PEERCRED both say uid 0): not
    // taken for WireGuard, not asked.
    let own_api = files.path().join("own.sock");
    let socket = format!("--socket={}", own_api.display());
    let serve = own_api.to_string_lossy().into_owned();
    let tailscaled =
        Daemon::start_setuid(&ns, "tailscaled", &[&socket, "--serve-localapi", &serve])?;
    crate::daemon_trust::tailscaled::listening(&own_api)?;
    let d = diagnose(&ns, &tailscaled.ifname)?;
    ensure!(
        d.str("/kind")? != "wireguard" && !d.fact("peers").to_string().contains("fake-peer"),
        "a setuid tailscaled uid 65534 started was believed: {}",
        d.describe()
    );

    // Root's own tailscaled whose socket that setuid program listens on: SO_PEERCRED says
    // uid 0, the listener's real uid says otherwise: not believed.
    let root_daemon = Daemon::start(&ns, "tailscaled", 0, 0, &[&socket])?;
    let d = diagnose(&ns, &root_daemon.ifname)?;
    expect_note(&d, &["Tailscale peers", "served by process", MIXED])?;
    ensure!(
        !d.fact("peers").to_string().contains("fake-peer"),
        "a LocalAPI a setuid program of uid 65534 serves was believed: {}",
        d.describe()
    );
    drop(root_daemon);
    drop(tailscaled);

    // The twin: root's own fastd naming the same root-only file: read.
    let root_fastd = Daemon::start(&ns, "fastd", 0, 0, &["-c", &secret_arg])?;
    let d = diagnose(&ns, &root_fastd.ifname)?;
    ensure!(
        !notes(&d)
            .iter()
            .any(|n| n.contains("fastd's configuration")),
        "root's fastd was refused its own file: {:#?}",
        notes(&d)
    );
    ensure!(
        d.i64("/facts/tunnel/overhead_expected")? == FASTD_TAP_NULL,
        "{}",
        d.describe()
    );
    Ok(())
}

//! TUN/TAP daemons another user runs or controls the files of: never run, never read.

use anyhow::{ensure, Result};
use netdoctor_lab::{lab_guard, Netns};

use crate::daemon_trust::{diagnose, expect_note, notes, null_config, own, Daemon};
use crate::daemon_trust::{FASTD_TAP_CRYPTO, FASTD_TAP_NULL, USER};

#[test]
fn a_users_tinc_binary_is_never_run() -> Result<()> {
    lab_guard!();
    let ns = Netns::new()?;
    let mut daemon = Daemon::start(&ns, "tincd", USER, USER, &[])?;
    let d = diagnose(&ns, &daemon.ifname)?;
    ensure!(
        !daemon.was_run(),
        "netdoctor ran the user's binary {} as root",
        daemon.binary.display()
    );
    ensure!(d.str("/facts/tunnel/kind")? == "tinc", "{}", d.describe());
    expect_note(&d, &["tinc's version is unknown", "belongs to uid 65534"])?;
    ensure!(daemon.process.is_running(), "the daemon died");
    Ok(())
}

#[test]
fn a_fastd_configuration_a_user_controls_is_not_read() -> Result<()> {
    lab_guard!();
    let ns = Netns::new()?;
    let files = tempfile::tempdir()?;

    // A daemon running as the user, naming its own file: not read.
    let config = null_config(files.path(), USER)?;
    let config_arg = config.to_string_lossy().into_owned();
    let user_daemon = Daemon::start(&ns, "fastd", 0, USER, &["--config", &config_arg])?;
    let d = diagnose(&ns, &user_daemon.ifname)?;
    expect_note(&d, &["fastd's configuration", "runs as uid 65534"])?;
    ensure!(
        d.i64("/facts/tunnel/overhead_expected")? == FASTD_TAP_CRYPTO,
        "{}",
        d.describe()
    );
    drop(user_daemon);

    // Root's daemon, but the file is the user's: not read either.
    let root_daemon = Daemon::start(&ns, "fastd", 0, 0, &["--config", &config_arg])?;
    let d = diagnose(&ns, &root_daemon.ifname)?;
    expect_note(&d, &["fastd's configuration", "belongs to uid 65534"])?;
    ensure!(d.i64("/facts/tunnel/overhead_expected")? == FASTD_TAP_CRYPTO);

    // The healthy twin: root's daemon and root's file are read (the null method counts).
    own(&config, 0)?;
    let d = diagnose(&ns, &root_daemon.ifname)?;
    ensure!(
        !notes(&d)
            .iter()
            .any(|n| n.contains("fastd's configuration")),
        "root's own file was refused: {:#?}",
        notes(&d)
    );
    ensure!(
        d.i64("/facts/tunnel/overhead_expected")? == FASTD_TAP_NULL,
        "{}",
        d.describe()
    );
    Ok(())
}

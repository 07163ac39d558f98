//! tailscaled: its LocalAPI asked only when root runs the daemon, owns the socket and
//! listens on it.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use anyhow::{ensure, Result};
use netdoctor_lab::{lab_guard, Netns};

use crate::daemon_trust::{diagnose, expect_note, own, Daemon, USER};

/// `--serve-localapi PATH`: the stand-in answers as tailscaled's LocalAPI there.
fn serve(path: &Path) -> [String; 2] {
    ["--serve-localapi".to_owned(), path.display().to_string()]
}

/// Waits for the stand-in to listen on `path` (it does so once it runs as its user).
pub(crate) fn listening(path: &Path) -> Result<()> {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !path.exists() {
        ensure!(
            std::time::Instant::now() < deadline,
            "nothing listens on {}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}

#[test]
fn a_tailscaled_or_socket_a_user_controls_is_not_believed() -> Result<()> {
    lab_guard!();
    let ns = Netns::new()?;
    let dir = tempfile::tempdir()?;
    // Writable by everyone (sticky), as /tmp: the user's stand-in creates its socket here.
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o1777))?;
    let roots = dir.path().join("root.sock");
    let users = dir.path().join("user.sock");
    let swapped = dir.path().join("swapped.sock");
    // LocalAPI stand-ins: root's; root's whose socket file the user owns; the user's whose
    // socket file root owns (what a user who replaced root's socket in between would leave).
    let [a, b] = serve(&roots);
    let _root_api = Daemon::start(&ns, "localapi", 0, 0, &[&a, &b])?;
    let [a, b] = serve(&users);
    let _given_api = Daemon::start(&ns, "localapi", 0, 0, &[&a, &b])?;
    let [a, b] = serve(&swapped);
    let _user_api = Daemon::start(&ns, "localapi", USER, USER, &[&a, &b])?;
    for p in [&roots, &users, &swapped] {
        listening(p)?;
    }
    own(&users, USER)?;
    own(&swapped, 0)?;
    let socket = |p: &Path| format!("--socket={}", p.display());

    // A "tailscaled" the user runs: not taken for WireGuard, its socket not asked.
    let user_daemon = Daemon::start(&ns, "tailscaled", USER, USER, &[&socket(&roots)])?;
    let d = diagnose(&ns, &user_daemon.ifname)?;
    ensure!(
        d.str("/kind")? != "wireguard" && !d.fact("peers").to_string().contains("fake-peer"),
        "a tailscaled run by uid {USER} was believed: {}",
        d.describe()
    );
    drop(user_daemon);

    // Root's tailscaled with a socket the user owns: WireGuard, but the socket is not asked.
    let root_daemon = Daemon::start(&ns, "tailscaled", 0, 0, &[&socket(&users)])?;
    let d = diagnose(&ns, &root_daemon.ifname)?;
    ensure!(d.str("/kind")? == "wireguard", "{}", d.describe());
    expect_note(&d, &["Tailscale peers", "belongs to uid 65534, not root"])?;
    ensure!(
        !d.fact("peers").to_string().contains("fake-peer"),
        "{}",
        d.describe()
    );
    drop(root_daemon);

    // A socket root owns but the user listens on: not believed either.
    let root_daemon = Daemon::start(&ns, "tailscaled", 0, 0, &[&socket(&swapped)])?;
    let d = diagnose(&ns, &root_daemon.ifname)?;
    expect_note(
        &d,
        &[
            "Tailscale peers",
            "served by a process of uid 65534, not root",
        ],
    )?;
    ensure!(
        !d.fact("peers").to_string().contains("fake-peer"),
        "a socket uid {USER} listens on was believed: {}",
        d.describe()
    );
    drop(root_daemon);

    // The twin: root's tailscaled and root's socket: its peer is read.
    let root_daemon = Daemon::start(&ns, "tailscaled", 0, 0, &[&socket(&roots)])?;
    let d = diagnose(&ns, &root_daemon.ifname)?;
    ensure!(
        d.str("/facts/tunnel/daemon")? == "tailscaled"
            && d.fact("peers").to_string().contains("fake-peer"),
        "root's tailscaled socket was not read: {}",
        d.describe()
    );
    Ok(())
}

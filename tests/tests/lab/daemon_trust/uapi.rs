//! WireGuard UAPI sockets: believed only when they are sockets root owns and serves,
//! read within a deadline and bounds. `fake-uapi` stands in for the implementation
//! behind a socket (answering, dribbling, endless), run as root or as the user.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use netdoctor_lab::{lab_guard, netdoctor, observe, BgProcess, Netns};

use crate::daemon_trust::{diagnose, expect_note, own, USER};

/// A UAPI socket at `/var/run/wireguard/NAME.sock`, owned by `uid`, answering `get=1`
/// with one peer whose endpoint is `endpoint`, as wireguard-go would.
struct FakeUapi {
    path: PathBuf,
}

impl FakeUapi {
    fn serve(name: &str, uid: u32, endpoint: &str) -> Result<Self> {
        use std::io::{BufRead, BufReader, Write};
        std::fs::create_dir_all("/var/run/wireguard")?;
        let path = PathBuf::from(format!("/var/run/wireguard/{name}.sock"));
        let _ = std::fs::remove_file(&path);
        let listener = std::os::unix::net::UnixListener::bind(&path)?;
        own(&path, uid)?;
        let answer = format!(
            "listen_port=51820\npublic_key={}\nendpoint={endpoint}\nallowed_ip=10.77.0.2/32\n\
             last_handshake_time_sec=0\nrx_bytes=0\ntx_bytes=0\n\
             persistent_keepalive_interval=0\nerrno=0\n\n",
            "ab".repeat(32)
        );
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let mut reader = BufReader::new(&stream);
                let mut line = String::new();
                while reader.read_line(&mut line).is_ok_and(|n| n > 0) && line != "\n" {
                    line.clear();
                }
                let _ = (&stream).write_all(answer.as_bytes());
            }
        });
        Ok(FakeUapi { path })
    }
}

impl Drop for FakeUapi {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

#[test]
fn a_wireguard_socket_a_user_owns_is_not_believed() -> Result<()> {
    lab_guard!();
    let ns = Netns::new()?;
    // Names of UAPI sockets are global: unique across the host, and not `ndwg…`, whose
    // sockets other lab runs remove when they take them for a dead run's.
    let name = format!("ndtw{}", std::process::id() % 100_000);
    ns.ip(&["tuntap", "add", "dev", &name, "mode", "tun"])?;
    ns.set_up(&name)?;
    let endpoint = "192.0.2.77:51820";

    // The user's socket: the TUN device is no WireGuard tunnel, its "peers" are not read.
    let fake = FakeUapi::serve(&name, USER, endpoint)?;
    let d = diagnose(&ns, &name)?;
    ensure!(
        d.str("/kind")? != "wireguard" && d.fact("peers").as_array().is_some_and(Vec::is_empty),
        "a socket owned by uid {USER} was believed: {}",
        d.describe()
    );
    drop(fake);

    // The twin: the same answer from root's socket is a WireGuard tunnel with that peer.
    let _fake = FakeUapi::serve(&name, 0, endpoint)?;
    let d = diagnose(&ns, &name)?;
    ensure!(d.str("/kind")? == "wireguard", "{}", d.describe());
    ensure!(
        d.fact("peers").to_string().contains(endpoint),
        "root's socket was not read: {}",
        d.describe()
    );
    Ok(())
}

/// A TUN device in `ns` with a name unique on the host (UAPI sockets are global; not
/// `ndwg…`, see above); its UAPI socket's path.
fn tun(ns: &Netns, tag: &str) -> Result<(String, PathBuf)> {
    let name = format!("ndtw{tag}{}", std::process::id() % 100_000);
    ns.ip(&["tuntap", "add", "dev", &name, "mode", "tun"])?;
    ns.set_up(&name)?;
    std::fs::create_dir_all("/var/run/wireguard")?;
    Ok((
        name.clone(),
        PathBuf::from(format!("/var/run/wireguard/{name}.sock")),
    ))
}

/// `fake-uapi PATH MODE EXTRA...`, waited for until it listens.
fn fake_uapi(path: &Path, mode: &str, extra: &[&str]) -> Result<BgProcess> {
    let _ = std::fs::remove_file(path);
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_fake-uapi"));
    command.arg(path).arg(mode).args(extra);
    let mut process = BgProcess::spawn(&format!("fake-uapi {} {mode}", path.display()), command)?;
    process.wait_for_output("listening", Duration::from_secs(10))?;
    Ok(process)
}

/// `netdoctor wireguard NAME` in `ns`, given `within` to end.
fn wireguard(ns: &Netns, name: &str, within: Duration) -> Result<(Output, Duration)> {
    let started = Instant::now();
    let out = netdoctor::run(Some(ns), &["wireguard", name], within)
        .with_context(|| format!("`netdoctor wireguard {name}` did not end within {within:?}"))?;
    Ok((out, started.elapsed()))
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Removes the file (socket, link) or directory tree at the path when dropped.
struct Remove(PathBuf);

impl Drop for Remove {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn a_wireguard_socket_another_user_listens_on_is_not_believed() -> Result<()> {
    lab_guard!();
    let ns = Netns::new()?;
    let (name, path) = tun(&ns, "l")?;
    let _cleanup = Remove(path.clone());
    let forged = "6.6.6.6:666";
    // The user's own socket, in a directory of theirs under /run (the file system of
    // /var/run/wireguard, so it can be moved there).
    let user_dir = PathBuf::from(format!("/run/ndtrust-{}", std::process::id()));
    std::fs::create_dir_all(&user_dir).with_context(|| format!("mkdir {}", user_dir.display()))?;
    own(&user_dir, USER)?;
    let _user_dir = Remove(user_dir.clone());
    let users = user_dir.join("uapi.sock");
    let uid = USER.to_string();
    let _user = fake_uapi(&users, "answer", &["--drop-to", &uid, "--endpoint", forged])?;

    // A link root owns, to the socket the user listens on.
    std::os::unix::fs::symlink(&users, &path).context("symlink")?;
    let (out, _) = wireguard(&ns, &name, Duration::from_secs(20))?;
    let (stdout, err) = (String::from_utf8_lossy(&out.stdout), stderr(&out));
    ensure!(
        !out.status.success() && !stdout.contains(forged) && err.contains("is not a socket"),
        "a link to uid {USER}'s socket was believed: {}; stdout {stdout}; stderr {err}",
        out.status
    );
    let d = diagnose(&ns, &name)?;
    ensure!(
        !d.fact("peers").to_string().contains("6.6.6.6"),
        "{}",
        d.describe()
    );
    std::fs::remove_file(&path).context("removing the link")?;

    // The user's socket itself, given to root and moved into place (what a user who
    // replaced root's socket in between would leave): SO_PEERCRED names the user.
    own(&users, 0)?;
    std::fs::rename(&users, &path).context("moving the user's socket")?;
    let (out, _) = wireguard(&ns, &name, Duration::from_secs(20))?;
    let err = stderr(&out);
    ensure!(
        !out.status.success()
            && !String::from_utf8_lossy(&out.stdout).contains(forged)
            && err.contains("served by a process of uid 65534, not root"),
        "a socket uid {USER} listens on was believed: {}; stderr {err}",
        out.status
    );
    let d = diagnose(&ns, &name)?;
    expect_note(
        &d,
        &[
            "WireGuard peers of",
            "served by a process of uid 65534, not root",
        ],
    )?;
    ensure!(
        !d.fact("peers").to_string().contains("6.6.6.6"),
        "{}",
        d.describe()
    );

    // The twin: root's own implementation at the same path is read.
    let _root = fake_uapi(&path, "answer", &["--endpoint", "192.0.2.66:51820"])?;
    let (out, _) = wireguard(&ns, &name, Duration::from_secs(20))?;
    ensure!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains("192.0.2.66:51820"),
        "root's socket was not read: {}; stderr {}",
        out.status,
        stderr(&out)
    );
    Ok(())
}

#[test]
fn a_stuck_or_endless_wireguard_socket_costs_seconds_and_bounded_memory() -> Result<()> {
    lab_guard!();
    let ns = Netns::new()?;
    let (name, path) = tun(&ns, "s")?;
    let _cleanup = Remove(path.clone());

    // Root's socket answering a line a second, never ending: cut at 3 s in all.
    let dribble = fake_uapi(&path, "dribble", &[])?;
    let (out, took) = wireguard(&ns, &name, Duration::from_secs(20))?;
    let err = stderr(&out);
    ensure!(
        !out.status.success() && err.contains("no complete answer to `get=1` within 3 s"),
        "{}; stderr {err}",
        out.status
    );
    ensure!(
        took < Duration::from_secs(5),
        "`netdoctor wireguard` took {took:?}"
    );
    // diagnose: the 3 s come before the observation, which then ends on time.
    let started = Instant::now();
    let window = Duration::from_secs(2);
    let (d, (), wall) = observe::diagnose_timed(&ns, &name, window, &["--no-probe"], || Ok(()))?;
    let total = started.elapsed();
    expect_note(
        &d,
        &[
            "WireGuard peers of",
            "no complete answer to `get=1` within 3 s",
        ],
    )?;
    ensure!(
        total < Duration::from_secs(12),
        "diagnose --duration 2 took {total:?} ({wall:?})"
    );
    drop(dribble);

    // Prompt at first, stuck when read again at the end: the end waits no longer than
    // the diagnosis's time (diagnose_timed holds it to --duration plus a second).
    let slow = fake_uapi(&path, "slow-after-first", &[])?;
    let (d, (), wall) = observe::diagnose_timed(&ns, &name, window, &["--no-probe"], || Ok(()))?;
    ensure!(d.str("/kind")? == "wireguard", "{}", d.describe());
    expect_note(&d, &["were not read again at the end of the observation"])?;
    println!("stuck at the end: observation to exit {wall:?}");
    drop(slow);

    // Root's socket streaming peers without end: a clear error, not an abort.
    let _endless = fake_uapi(&path, "endless", &[])?;
    let (out, took) = wireguard(&ns, &name, Duration::from_secs(20))?;
    let err = stderr(&out);
    ensure!(
        out.status.code() == Some(3) && err.contains("more than 65536 peers"),
        "{}; stderr {err}",
        out.status
    );
    ensure!(
        took < Duration::from_secs(5),
        "`netdoctor wireguard` took {took:?}"
    );
    Ok(())
}

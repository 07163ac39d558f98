//! netdoctor runs as root, so it never runs a program another user controls and never
//! reads a file another user controls, even when a TUN/TAP daemon's name or arguments
//! point at them. A stand-in daemon (`fake-tun-daemon`, which leaves a marker file when
//! run with `--version`) holds a TAP device in a lab namespace, named and owned as each
//! case needs; `diagnose` of the device must say what it did not read, and why. The same
//! for tailscaled: its LocalAPI socket (`--socket`) is asked only when root runs the daemon,
//! owns the socket and listens on it. A daemon is root's only when its real, effective and
//! saved uids all are: the stand-in installed setuid root and run by another user is not.
//! A WireGuard UAPI socket (`fake-uapi` stands in for what serves it) is believed only when
//! it is a socket root owns and listens on, and is read within a deadline and bounds.
//!
//! Needs root; skips elsewhere, fails under CI=true. One module per subject.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use anyhow::{ensure, Context, Result};
use netdoctor_lab::diagnosis::Diagnosis;
use netdoctor_lab::{netdoctor, BgProcess, Netns};

/// The unprivileged user of these cases (`nobody`).
const USER: u32 = 65534;
/// fastd's framing with an encrypting method, and with `null` (overhead.rs): what tells
/// whether the configuration was read.
const FASTD_TAP_CRYPTO: i64 = 20 + 8 + 24 + 14;
const FASTD_TAP_NULL: i64 = 20 + 8 + 1 + 14;

/// A TAP device and a stand-in daemon holding it.
struct Daemon {
    process: BgProcess,
    binary: PathBuf,
    ifname: String,
    _dir: tempfile::TempDir,
}

impl Daemon {
    /// Starts the stand-in as `name` (e.g. "tincd"), its binary owned by `binary_owner`,
    /// running as `run_as` after attaching, with `args` on its command line.
    fn start(
        ns: &Netns,
        name: &str,
        binary_owner: u32,
        run_as: u32,
        args: &[&str],
    ) -> Result<Self> {
        let dir = tempfile::tempdir()?;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))?;
        let binary = dir.path().join(name);
        std::fs::copy(env!("CARGO_BIN_EXE_fake-tun-daemon"), &binary)?;
        std::fs::set_permissions(&binary, std::fs::Permissions::from_mode(0o755))?;
        own(&binary, binary_owner)?;
        let ifname = tap(ns)?;
        let mut argv: Vec<String> = vec![ifname.clone()];
        if run_as != 0 {
            argv.extend(["--drop-to".to_owned(), run_as.to_string()]);
        }
        argv.extend(args.iter().map(|a| (*a).to_owned()));
        let command = ns.command(&binary.to_string_lossy(), &argv);
        Self::attached(ns, name, command, argv, binary, ifname, dir)
    }

    /// Starts the stand-in installed setuid root (as `su` is), run by [`USER`] through a
    /// symbolic link named `name` (its command name then): real uid [`USER`], effective
    /// and saved uid 0, what `setpriv` leaves when it runs it as that user.
    fn start_setuid(ns: &Netns, name: &str, args: &[&str]) -> Result<Self> {
        let dir = tempfile::tempdir()?;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))?;
        let binary = dir.path().join("setuid-daemon");
        std::fs::copy(env!("CARGO_BIN_EXE_fake-tun-daemon"), &binary)?;
        own(&binary, 0)?;
        std::fs::set_permissions(&binary, std::fs::Permissions::from_mode(0o4755))?;
        let link = dir.path().join(name);
        std::os::unix::fs::symlink(&binary, &link)?;
        let ifname = tap(ns)?;
        let mut argv: Vec<String> = vec![ifname.clone()];
        argv.extend(args.iter().map(|a| (*a).to_owned()));
        let user = USER.to_string();
        let mut setpriv = vec!["--reuid", &user, "--regid", &user, "--clear-groups"]
            .into_iter()
            .map(str::to_owned)
            .collect::<Vec<_>>();
        setpriv.push(link.to_string_lossy().into_owned());
        setpriv.extend(argv.iter().cloned());
        let command = ns.command("setpriv", &setpriv);
        let daemon = Self::attached(ns, name, command, argv, binary, ifname, dir)?;
        let uids = std::fs::read_to_string(format!("/proc/{}/status", daemon.process.pid()))?;
        ensure!(
            uids.lines()
                .any(|l| l.split_whitespace().eq(["Uid:", &user, "0", "0", "0"])),
            "the setuid stand-in does not run as real uid {USER}, effective and saved 0: {uids}"
        );
        Ok(daemon)
    }

    /// Spawns `command` and waits until it holds `ifname` (/proc shows the device among
    /// its files).
    fn attached(
        ns: &Netns,
        name: &str,
        command: std::process::Command,
        argv: Vec<String>,
        binary: PathBuf,
        ifname: String,
        dir: tempfile::TempDir,
    ) -> Result<Self> {
        let process = ns.spawn_command(&format!("{name} {}", argv.join(" ")), command)?;
        let needle = format!("iff:\t{ifname}\n");
        let pid = process.pid();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !holds(pid, &needle) {
            ensure!(
                std::time::Instant::now() < deadline,
                "{name} did not attach to {ifname}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(Daemon {
            process,
            binary,
            ifname,
            _dir: dir,
        })
    }

    fn was_run(&self) -> bool {
        let mut marker = self.binary.clone().into_os_string();
        marker.push(".ran");
        Path::new(&marker).exists()
    }
}

/// A fresh TAP device in `ns`, with a name unique on the host (the tests run at once,
/// each may start several).
fn tap(ns: &Netns) -> Result<String> {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let ifname = format!("ndtap{}x{n}", std::process::id() % 100_000);
    ns.ip(&["tuntap", "add", "dev", &ifname, "mode", "tap"])?;
    ns.set_up(&ifname)?;
    Ok(ifname)
}

fn holds(pid: u32, needle: &str) -> bool {
    std::fs::read_dir(format!("/proc/{pid}/fdinfo")).is_ok_and(|fds| {
        fds.filter_map(|f| f.ok())
            .any(|f| std::fs::read_to_string(f.path()).is_ok_and(|t| t.contains(needle)))
    })
}

fn own(path: &Path, uid: u32) -> Result<()> {
    nix::unistd::chown(
        path,
        Some(nix::unistd::Uid::from_raw(uid)),
        Some(nix::unistd::Gid::from_raw(uid)),
    )
    .with_context(|| format!("chown {uid} {}", path.display()))
}

fn diagnose(ns: &Netns, ifname: &str) -> Result<Diagnosis> {
    let args = [
        "diagnose",
        ifname,
        "--duration",
        "1s",
        "--no-probe",
        "--json",
    ];
    let out = netdoctor::run(Some(ns), &args, Duration::from_secs(60))?;
    Diagnosis::from_output(format!("diagnose {ifname}"), &out)
}

fn notes(d: &Diagnosis) -> Vec<String> {
    d.json["notes"]
        .as_array()
        .map(|n| {
            n.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

fn expect_note(d: &Diagnosis, parts: &[&str]) -> Result<()> {
    let all = notes(d);
    ensure!(
        all.iter().any(|n| parts.iter().all(|p| n.contains(p))),
        "no note with {parts:?}; notes: {all:#?}"
    );
    Ok(())
}

/// A config file with fastd's `null` method, owned by `uid`, world-readable.
fn null_config(dir: &Path, uid: u32) -> Result<PathBuf> {
    let path = dir.join("fastd.conf");
    std::fs::write(&path, "method \"null\";\n")?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755))?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644))?;
    own(&path, uid)?;
    Ok(path)
}

mod setuid;
mod tailscaled;
mod tun_daemons;
mod uapi;

//! netdoctor runs as root, so it never runs a program another user controls and never
//! reads a file another user controls, even when a TUN/TAP daemon's name or arguments
//! point at them. A stand-in daemon (`fake-tun-daemon`, which leaves a marker file when
//! run with `--version`) holds a TAP device in a lab namespace, named and owned as each
//! case needs; `diagnose` of the device must say what it did not read, and why. The same
//! for tailscaled: its LocalAPI socket (`--socket`) is asked only when root runs the daemon,
//! owns the socket and listens on it.
//!
//! Needs root; skips elsewhere, fails under CI=true.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use anyhow::{ensure, Context, Result};
use netdoctor_lab::diagnosis::Diagnosis;
use netdoctor_lab::{ci, netdoctor, BgProcess, Netns};

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
        // Unique on the host: the two tests run at once, each may start several.
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let ifname = format!("ndtap{}x{n}", std::process::id() % 100_000);
        ns.ip(&["tuntap", "add", "dev", &ifname, "mode", "tap"])?;
        ns.set_up(&ifname)?;
        let mut argv: Vec<String> = vec![ifname.clone()];
        if run_as != 0 {
            argv.extend(["--drop-to".to_owned(), run_as.to_string()]);
        }
        argv.extend(args.iter().map(|a| (*a).to_owned()));
        let process = ns.spawn_command(
            &format!("{name} {}", argv.join(" ")),
            ns.command(&binary.to_string_lossy(), &argv),
        )?;
        // Attached once /proc shows the device among its files.
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

#[test]
fn a_users_tinc_binary_is_never_run() -> Result<()> {
    if !ci::lab_ready(&[]) {
        return Ok(());
    }
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
    if !ci::lab_ready(&[]) {
        return Ok(());
    }
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
    if !ci::lab_ready(&[]) {
        return Ok(());
    }
    let ns = Netns::new()?;
    // Names of UAPI sockets are global: unique across the host.
    let name = format!("ndwg{}", std::process::id() % 100_000);
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

/// `--serve-localapi PATH`: the stand-in answers as tailscaled's LocalAPI there.
fn serve(path: &Path) -> [String; 2] {
    ["--serve-localapi".to_owned(), path.display().to_string()]
}

/// Waits for the stand-in to listen on `path` (it does so once it runs as its user).
fn listening(path: &Path) -> Result<()> {
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
    if !ci::lab_ready(&[]) {
        return Ok(());
    }
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

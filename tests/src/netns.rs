//! Uniquely named network namespaces, deleted on `Drop`.
//!
//! Commands run inside with `nsenter --net=/run/netns/NAME -- ...`, which
//! keeps the host's mounts (bpffs, /sys) visible, unlike `ip netns exec`.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Mutex, Once};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use nix::sys::signal::Signal;

use crate::cmd::{self, BgProcess, DEFAULT_TIMEOUT};
use crate::ids;
use crate::stats::{self, IfStats};

/// Directory where `ip netns` keeps namespace mount points.
pub const NETNS_DIR: &str = "/run/netns";

/// Directory of wireguard-go's UAPI sockets.
pub(crate) const WG_SOCKET_DIR: &str = "/run/wireguard";

static CREATE_LOCK: Mutex<()> = Mutex::new(());
static CLEANUP: Once = Once::new();

/// A network namespace named `nd-<pid hex>-<n>`, with `lo` up.
///
/// On `Drop` every process still inside it is killed (SIGTERM, then
/// SIGKILL) and the namespace is deleted, which also removes its interfaces
/// (veth peers in other namespaces vanish with them) and nft tables.
#[derive(Debug)]
pub struct Netns {
    name: String,
}

impl Netns {
    /// Creates a new namespace and brings `lo` up. The first call in a
    /// process also runs [`cleanup_stale`].
    pub fn new() -> Result<Netns> {
        CLEANUP.call_once(|| {
            if let Err(e) = cleanup_stale() {
                eprintln!("netdoctor-lab: cleanup of stale lab objects failed: {e:#}");
            }
        });
        let name = ids::netns_name();
        {
            // Concurrent `ip netns add` in one process can race on the
            // first mount of /run/netns.
            let _guard = CREATE_LOCK.lock().unwrap_or_else(|e| e.into_inner());
            cmd::host_run(&["ip", "netns", "add", &name])
                .with_context(|| format!("creating network namespace {name}"))?;
        }
        let ns = Netns { name };
        ns.run(&["ip", "link", "set", "lo", "up"])
            .with_context(|| format!("bringing lo up in {}", ns.name))?;
        Ok(ns)
    }

    /// The namespace name (as in `ip netns list`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Path of the namespace file, `/run/netns/NAME`.
    pub fn path(&self) -> PathBuf {
        Path::new(NETNS_DIR).join(&self.name)
    }

    /// A [`Command`] that runs `program args...` inside the namespace via
    /// `nsenter --net=PATH -- program args...`. Configure env/stdio and run
    /// it yourself, or hand it to [`Netns::spawn_command`].
    pub fn command<I, S>(&self, program: &str, args: I) -> Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut net = std::ffi::OsString::from("--net=");
        net.push(self.path());
        let mut cmd = Command::new("nsenter");
        cmd.arg(net).arg("--").arg(program).args(args);
        cmd
    }

    fn argv_command(&self, argv: &[&str]) -> Result<Command> {
        let (program, args) = argv
            .split_first()
            .with_context(|| format!("empty argv for namespace {}", self.name))?;
        Ok(self.command(program, args))
    }

    /// Runs `argv` (program first) inside the namespace and returns its
    /// [`Output`] without checking the exit status. Timeout 60 s.
    pub fn output(&self, argv: &[&str]) -> Result<Output> {
        let mut cmd = self.argv_command(argv)?;
        cmd::output_timeout(&mut cmd, DEFAULT_TIMEOUT)
            .with_context(|| format!("in namespace {}", self.name))
    }

    /// Runs `argv` inside the namespace, requires exit status 0 and returns
    /// stdout. The error carries the command line, status and stderr.
    /// Timeout 60 s.
    pub fn run(&self, argv: &[&str]) -> Result<String> {
        self.run_timeout(argv, DEFAULT_TIMEOUT)
    }

    /// Like [`Netns::run`] with an explicit timeout (the command is killed
    /// and an error returned when it expires).
    pub fn run_timeout(&self, argv: &[&str], timeout: Duration) -> Result<String> {
        let mut cmd = self.argv_command(argv)?;
        cmd::run_checked(&mut cmd, timeout).with_context(|| format!("in namespace {}", self.name))
    }

    /// Runs `ip args...` inside the namespace (e.g. `ns.ip(&["route"])`).
    pub fn ip(&self, args: &[&str]) -> Result<String> {
        let mut cmd = self.command("ip", args);
        cmd::run_checked(&mut cmd, DEFAULT_TIMEOUT)
            .with_context(|| format!("in namespace {}", self.name))
    }

    /// Starts `argv` in the background inside the namespace. stdout/stderr
    /// go to log files readable through the returned [`BgProcess`]; it is
    /// stopped when dropped, and anyway when the namespace is dropped.
    pub fn spawn(&self, argv: &[&str]) -> Result<BgProcess> {
        let cmd = self.argv_command(argv)?;
        self.spawn_command(&argv.join(" "), cmd)
    }

    /// Starts a [`Command`] built with [`Netns::command`] in the background
    /// (use this to set environment variables). `label` names it in errors.
    pub fn spawn_command(&self, label: &str, cmd: Command) -> Result<BgProcess> {
        BgProcess::spawn(&format!("{label} (in {})", self.name), cmd)
    }

    /// Sets a sysctl inside the namespace, e.g.
    /// `ns.sysctl("net.ipv4.ip_forward", "1")`.
    pub fn sysctl(&self, key: &str, value: &str) -> Result<()> {
        self.run(&["sysctl", "-q", "-w", &format!("{key}={value}")])
            .map(drop)
    }

    /// Steers the receive processing of `ifname` (every receive queue) to
    /// CPU `cpu` with RPS. A veth peer otherwise receives on the sending
    /// CPU's backlog, so skbs of one flow sent from two CPUs (the process and
    /// an ACK softirq) are processed in parallel and can overtake each other.
    /// Written through `ip netns exec`, whose private /sys shows this
    /// namespace's interfaces (nsenter keeps the host's).
    pub fn steer_receive_to_cpu(&self, ifname: &str, cpu: u32) -> Result<()> {
        if cpu >= 32 {
            bail!("steer_receive_to_cpu: CPU {cpu} is beyond the 32-bit mask written here");
        }
        let script = r#"set -e; for q in /sys/class/net/"$1"/queues/rx-*; do echo "$2" > "$q/rps_cpus"; done"#;
        let mask = format!("{:x}", 1u32 << cpu);
        cmd::host_run(&[
            "ip", "netns", "exec", &self.name, "sh", "-c", script, "sh", ifname, &mask,
        ])
        .map(drop)
        .with_context(|| format!("steering {ifname} receive to CPU {cpu} in {}", self.name))
    }

    /// Reads a sysctl inside the namespace (trimmed value).
    pub fn read_sysctl(&self, key: &str) -> Result<String> {
        Ok(self.run(&["sysctl", "-n", key])?.trim().to_owned())
    }

    /// `ip addr add CIDR dev IFNAME` (adds `nodad` for IPv6 so the address is
    /// usable at once).
    pub fn add_addr(&self, ifname: &str, cidr: &str) -> Result<()> {
        let mut args = vec!["addr", "add", cidr, "dev", ifname];
        if cidr.contains(':') {
            args.push("nodad");
        }
        self.ip(&args).map(drop)
    }

    /// `ip link set IFNAME mtu MTU`.
    pub fn set_mtu(&self, ifname: &str, mtu: u32) -> Result<()> {
        self.ip(&["link", "set", ifname, "mtu", &mtu.to_string()])
            .map(drop)
    }

    /// `ip link set IFNAME up`.
    pub fn set_up(&self, ifname: &str) -> Result<()> {
        self.ip(&["link", "set", ifname, "up"]).map(drop)
    }

    /// `ip route replace DST via GATEWAY` (`dst` may be `default`).
    pub fn add_route(&self, dst: &str, gateway: &str) -> Result<()> {
        self.ip(&["route", "replace", dst, "via", gateway])
            .map(drop)
    }

    /// Link MTU of `ifname` inside the namespace.
    pub fn mtu(&self, ifname: &str) -> Result<u32> {
        let json = self.ip(&["-j", "link", "show", "dev", ifname])?;
        let v: serde_json::Value =
            serde_json::from_str(&json).context("parsing `ip -j link show`")?;
        v.get(0)
            .and_then(|l| l.get("mtu"))
            .and_then(serde_json::Value::as_u64)
            .and_then(|m| u32::try_from(m).ok())
            .with_context(|| format!("no mtu for {ifname} in {json}"))
    }

    /// rx/tx counters of `ifname` (see [`crate::stats::interface_stats`]).
    pub fn interface_stats(&self, ifname: &str) -> Result<IfStats> {
        stats::interface_stats(self, ifname)
    }

    /// Ids of the processes whose network namespace is this one
    /// (`ip netns pids`).
    pub fn pids(&self) -> Result<Vec<u32>> {
        netns_pids(&self.name)
    }

    /// Kills every process inside the namespace (SIGTERM, 1 s grace,
    /// SIGKILL) and waits until none is left (3 s at most).
    pub fn kill_all(&self) -> Result<()> {
        kill_netns_processes(&self.name)
    }

    /// Runs `f` on a new thread whose network namespace is this one
    /// (`setns(CLONE_NEWNET)`), e.g. to load and attach BPF programs with
    /// ifindexes of this namespace. Returns what `f` returns; a panic in `f`
    /// becomes an error. Attachments made by `f` stay after it returns.
    pub fn run_in<F, R>(&self, f: F) -> Result<R>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        match self.spawn_in(move || Ok(f()))?.join() {
            Ok(result) => result,
            Err(_) => bail!("closure running in namespace {} panicked", self.name),
        }
    }

    /// Starts `f` on a new thread whose network namespace is this one and returns at once;
    /// joining the thread gives what `f` returned, or the error of entering the namespace.
    pub fn spawn_in<F, R>(&self, f: F) -> Result<std::thread::JoinHandle<Result<R>>>
    where
        F: FnOnce() -> Result<R> + Send + 'static,
        R: Send + 'static,
    {
        let path = self.path();
        let file =
            std::fs::File::open(&path).with_context(|| format!("opening {}", path.display()))?;
        std::thread::Builder::new()
            .name(format!("netns-{}", self.name))
            .spawn(move || -> Result<R> {
                nix::sched::setns(&file, nix::sched::CloneFlags::CLONE_NEWNET)
                    .context("setns(CLONE_NEWNET)")?;
                f()
            })
            .context("spawning namespace thread")
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        if let Err(e) = self.kill_all() {
            eprintln!("netdoctor-lab: killing processes in {}: {e:#}", self.name);
        }
        if let Err(e) = cmd::host_run(&["ip", "netns", "del", &self.name]) {
            eprintln!("netdoctor-lab: deleting namespace {}: {e:#}", self.name);
        }
    }
}

fn netns_pids(name: &str) -> Result<Vec<u32>> {
    let out = cmd::host_run(&["ip", "netns", "pids", name])?;
    let me = std::process::id();
    Ok(out
        .split_whitespace()
        .filter_map(|p| p.parse::<u32>().ok())
        .filter(|&p| p != me)
        .collect())
}

fn kill_netns_processes(name: &str) -> Result<()> {
    let mut pids = netns_pids(name)?;
    if pids.is_empty() {
        return Ok(());
    }
    for &pid in &pids {
        cmd::signal_pid(pid, Signal::SIGTERM)?;
    }
    for (grace, signal) in [
        (Duration::from_secs(1), Some(Signal::SIGKILL)),
        (Duration::from_secs(3), None),
    ] {
        let deadline = Instant::now() + grace;
        while !pids.is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
            pids = netns_pids(name)?;
        }
        if pids.is_empty() {
            return Ok(());
        }
        if let Some(signal) = signal {
            for &pid in &pids {
                cmd::signal_pid(pid, signal)?;
            }
        }
    }
    bail!("processes {pids:?} still alive in namespace {name}")
}

fn pid_alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// Removes leftovers of lab runs whose process is gone (e.g. a test binary
/// killed with SIGKILL): `nd-*` namespaces, `ndwg*` wireguard-go sockets and
/// `ndv*` host veth ends and `ndlab-<pid>-*` log files in the temp dir
/// created by a pid that no longer exists. Objects of
/// live processes (parallel test binaries) are left alone. Returns how many
/// objects were removed. Runs automatically once per process.
pub fn cleanup_stale() -> Result<usize> {
    let mut removed = 0;
    if let Ok(entries) = std::fs::read_dir(NETNS_DIR) {
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some(pid) = ids::pid_from_netns_name(&name) else {
                continue;
            };
            if pid_alive(pid) {
                continue;
            }
            let _ = kill_netns_processes(&name);
            cmd::host_run(&["ip", "netns", "del", &name])
                .with_context(|| format!("deleting stale namespace {name}"))?;
            removed += 1;
        }
    }
    if let Ok(entries) = std::fs::read_dir(WG_SOCKET_DIR) {
        for entry in entries.flatten() {
            let file = entry.file_name().to_string_lossy().into_owned();
            let Some(ifname) = file.strip_suffix(".sock") else {
                continue;
            };
            match ids::pid_from_ifname(crate::wireguard::IFNAME_PREFIX, ifname) {
                Some(pid) if !pid_alive(pid) => {
                    std::fs::remove_file(entry.path())
                        .with_context(|| format!("removing {}", entry.path().display()))?;
                    removed += 1;
                }
                _ => {}
            }
        }
    }
    if let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) {
        for entry in entries.flatten() {
            let file = entry.file_name().to_string_lossy().into_owned();
            let pid = file
                .strip_prefix(cmd::LOG_PREFIX)
                .and_then(|rest| rest.split('-').next())
                .and_then(|pid| pid.parse::<u32>().ok());
            if matches!(pid, Some(pid) if !pid_alive(pid))
                && std::fs::remove_file(entry.path()).is_ok()
            {
                removed += 1;
            }
        }
    }
    let links = cmd::host_run(&["ip", "-o", "link", "show"])?;
    for line in links.lines() {
        // "12: ndv0abcd1@if11: <...>"
        let Some(name) = line.split(": ").nth(1) else {
            continue;
        };
        let name = name.split('@').next().unwrap_or(name);
        match ids::pid_from_ifname(crate::veth::HOST_IFNAME_PREFIX, name) {
            Some(pid) if !pid_alive(pid) => {
                cmd::host_run(&["ip", "link", "del", name])
                    .with_context(|| format!("deleting stale link {name}"))?;
                removed += 1;
            }
            _ => {}
        }
    }
    Ok(removed)
}

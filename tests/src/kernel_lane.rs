//! The kernel lane: runs `tests/vm/cases.sh` on Debian's kernels in virtme-ng guests (qemu
//! TCG: nested KVM hangs on CI's kind of machine) and on the host, and reads back what each
//! case left. `.ci/vm-setup` installs virtme-ng and caches the kernels; the assertions are
//! in `tests/tests/kernel_matrix.rs`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde_json::Value;

/// The kernels the lane boots, by the name `.ci/vm-setup` caches them under.
pub const KERNELS: [&str; 3] = ["5.10", "6.1", "6.12"];

/// A guest that has not finished after this long is killed (its case files say how far
/// it got). The guests run at once, so this bounds the whole lane: with the rest of the
/// suite (about 35 minutes) it stays inside CI's 90. On two idle cores the lane should take
/// well under it; on a machine shared with other builds the suites' kernels may not.
const GUEST_TIMEOUT: Duration = Duration::from_secs(1500);

/// Each guest's vCPUs. One: the three guests run at once on CI's two cores, and under TCG a
/// guest's second vCPU mostly spins on locks its first holds while the host has it
/// descheduled. On a 2-vCPU Intel Xeon, `limits` and `wg_path` on all three kernels took
/// 343 s with one vCPU each and passed; with two, 6.1 and 6.12 took 1.6-1.7 times as long
/// and 5.10 had not finished after 12 minutes.
const GUEST_CPUS: &str = "1";

/// The kernels to boot: [`KERNELS`], or those of them `ND_LANE_KERNELS` lists
/// (comma-separated, e.g. `5.10,6.1`) for a quicker look at one kernel. CI always boots
/// them all.
pub fn selected() -> Vec<&'static str> {
    match std::env::var("ND_LANE_KERNELS") {
        Ok(list) if !crate::ci::is_ci() => KERNELS
            .into_iter()
            .filter(|k| list.split(',').any(|x| x.trim() == *k))
            .collect(),
        _ => KERNELS.to_vec(),
    }
}

/// The suites of cases beyond the base ones kernel `name` runs, as words: `limits`
/// (tests/vm/limits.sh: what limits a connection on a 40 ms netem path) and `wg_path`
/// (tests/vm/wg_path.sh: kernel WireGuard's underlay loss, reordering and handshake round trip
/// under netem) on every guest; `tunnels` (tests/vm/tunnels.sh: layer-2 bonds, GENEVE and
/// IPIP) on 6.1 and 6.12, and `wan` (tests/vm/wan.sh: cubic and bbr on a 60 ms / 5 % path) on
/// every guest; the rest once, split so that the guests, which run at once, take about as
/// long: `reorder` (tests/vm/reorder.sh: netem reordering against loss, a balance-rr bond) on
/// 5.10, `lacp` (802.3ad bonds) and `ip_tunnels` (GRE, GRETAP, sit, ip6tnl) on 6.1, and
/// `wan_faults` (high retransmissions, a PMTU blackhole and a WireGuard MTU error behind long
/// round trips) and `mathis` (the estimate against iperf3 at two more points) on 6.12. The
/// host runs the base cases only: its kernel lacks netem, bonding and kernel WireGuard.
pub fn suites(name: &str) -> &'static str {
    match name {
        "5.10" => "limits wg_path reorder wan",
        "6.1" => "limits wg_path tunnels wan lacp ip_tunnels",
        "6.12" => "limits wg_path tunnels wan wan_faults mathis",
        _ => "",
    }
}

/// For developing a suite, never in CI: `ND_LANE_ONLY` (e.g. `reorder`) lists the only
/// suites the guests run, without the base cases, and the host runs nothing.
pub fn only_suites() -> Option<String> {
    if crate::ci::is_ci() {
        return None;
    }
    std::env::var("ND_LANE_ONLY")
        .ok()
        .filter(|s| !s.trim().is_empty())
}

/// Whether kernel `name` runs suite `suite` (see [`suites`] and [`only_suites`]).
pub fn runs_suite(name: &str, suite: &str) -> bool {
    match only_suites() {
        Some(only) => only.split_whitespace().any(|s| s == suite),
        None => suites(name).split_whitespace().any(|s| s == suite),
    }
}

/// Where `.ci/vm-setup` put virtme-ng and the kernels.
pub fn cache_dir() -> PathBuf {
    std::env::var_os("ND_VM_CACHE")
        .map_or_else(|| PathBuf::from("/var/cache/netdoctor-vm"), PathBuf::from)
}

/// What the lane needs that is missing (virtme-ng, qemu, a cached kernel), if anything.
pub fn missing_tools() -> Option<String> {
    let cache = cache_dir();
    let vng = cache.join("venv/bin/vng");
    if !vng.is_file() {
        return Some(format!("{} (run `bash .ci/vm-setup`)", vng.display()));
    }
    if which("qemu-system-x86_64").is_none() {
        return Some("qemu-system-x86_64 (Debian package qemu-system-x86)".into());
    }
    for k in KERNELS {
        let image = cache.join("kernels").join(k).join("vmlinuz");
        if !image.is_file() {
            return Some(format!(
                "kernel {k} at {} (run `bash .ci/vm-setup`)",
                image.display()
            ));
        }
    }
    None
}

fn which(tool: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(tool))
            .find(|p| p.is_file())
    })
}

/// The guest-side script.
pub fn cases_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("vm/cases.sh")
}

/// One kernel's run: the directory its cases wrote and how long it took.
#[derive(Debug)]
pub struct Run {
    /// "5.10", "6.1", "6.12" or "host".
    pub name: String,
    /// The case files (see `tests/vm/cases.sh`).
    pub dir: PathBuf,
    /// Wall time of the boot and every case.
    pub elapsed: Duration,
    /// What went wrong running the guest itself (not the cases), if anything.
    pub error: Option<String>,
}

impl Run {
    /// Case file `name` as text ("" when missing).
    pub fn text(&self, name: &str) -> String {
        std::fs::read_to_string(self.dir.join(name)).unwrap_or_default()
    }

    /// Case file `name` as JSON.
    pub fn json(&self, name: &str) -> Result<Value> {
        let text = self.text(name);
        serde_json::from_str(&text).with_context(|| format!("{name} is not JSON: {text:.300}"))
    }

    /// Exit code of case `case` (-1 when it did not finish).
    pub fn rc(&self, case: &str) -> i32 {
        self.text(&format!("{case}.rc"))
            .trim()
            .parse()
            .unwrap_or(-1)
    }

    /// The kernel the cases ran on (`uname -r`).
    pub fn kernel(&self) -> String {
        self.text("kernel").trim().to_owned()
    }

    /// What a failing case shows: its exit code, the end of its stderr (netdoctor runs with
    /// -v, so a verifier's log is there) and its output.
    pub fn evidence(&self, case: &str) -> String {
        let tail = |name: &str, lines: usize| {
            let text = self.text(name);
            let all: Vec<&str> = text.lines().collect();
            all[all.len().saturating_sub(lines)..].join("\n")
        };
        format!(
            "--- {case}.rc: {}\n--- {case}.err (last 80 lines):\n{}\n--- {case}.out (last 60 lines):\n{}",
            self.rc(case),
            tail(&format!("{case}.err"), 80),
            tail(&format!("{case}.out"), 60)
        )
    }
}

/// Runs the cases on the host, in `dir`.
pub fn run_host(netdoctor: &Path, dir: &Path) -> Run {
    let started = Instant::now();
    let status = Command::new("bash")
        .arg(cases_script())
        .arg(netdoctor)
        .arg(dir)
        .arg(format!("h{}", std::process::id() % 10000))
        .stdin(Stdio::null())
        .status();
    Run {
        name: "host".into(),
        dir: dir.to_owned(),
        elapsed: started.elapsed(),
        error: match status {
            Ok(s) if s.success() => None,
            Ok(s) => Some(format!("cases.sh exited with {s}")),
            Err(e) => Some(format!("cannot run cases.sh: {e}")),
        },
    }
}

/// Boots kernel `name` once and runs every case in it, writing into `dir` (shared with the
/// guest read-write; the rest of the host's filesystem is shared read-only).
pub fn run_guest(name: &str, netdoctor: &Path, dir: &Path) -> Result<Run> {
    let cache = cache_dir();
    let image = cache.join("kernels").join(name).join("vmlinuz");
    let only = only_suites();
    let script = format!(
        "{}bash {} {} {} g '{}'",
        if only.is_some() {
            "ND_ONLY_SUITES=1 "
        } else {
            ""
        },
        cases_script().display(),
        netdoctor.display(),
        dir.display(),
        only.as_deref().unwrap_or(suites(name))
    );
    let log = std::fs::File::create(dir.join("vng.log"))?;
    let path = format!(
        "{}:{}",
        cache.join("venv/bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let started = Instant::now();
    // A guest whose vng exits before the cases begin is booted once more: one of three
    // started at the same moment once did so, without a word in its log.
    let mut error = None;
    for _ in 0..2 {
        let mut child = Command::new(cache.join("venv/bin/vng"))
            .env("PATH", &path)
            .arg("--run")
            .arg(&image)
            .args([
                "--user",
                "root",
                "--disable-kvm",
                "--cpus",
                GUEST_CPUS,
                "--memory",
                "2G",
            ])
            .arg(format!("--rwdir={}", dir.display()))
            .arg("--")
            .arg(&script)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log.try_clone()?)
            .spawn()
            .context("starting vng")?;
        error = loop {
            if let Some(status) = child.try_wait()? {
                // virtme-ng's own exit code is not the script's; `done` says the cases ran.
                break (!dir.join("done").exists()).then(|| {
                    format!("the guest stopped before the cases finished (vng: {status})")
                });
            }
            if started.elapsed() > GUEST_TIMEOUT {
                let _ = child.kill();
                let _ = child.wait();
                break Some(format!(
                    "the guest ran over {GUEST_TIMEOUT:?} and was killed"
                ));
            }
            std::thread::sleep(Duration::from_millis(500));
        };
        if error.is_none() || dir.join("kernel").exists() || started.elapsed() > GUEST_TIMEOUT {
            break;
        }
    }
    if !dir.join("kernel").exists() && error.is_some() {
        let log = std::fs::read_to_string(dir.join("vng.log")).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(40).collect();
        bail!(
            "kernel {name}: the guest never ran the cases; vng's last lines:\n{}",
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        );
    }
    Ok(Run {
        name: name.to_owned(),
        dir: dir.to_owned(),
        elapsed: started.elapsed(),
        error,
    })
}

/// Runs the cases on the host and boots every [`selected`] kernel, all at once, each writing
/// into its own directory under `work`: the runs, and the kernels whose guest never ran.
///
/// At once, because most of a guest's wall time is waiting (netem round trips, iperf3 and
/// `diagnose` windows, boots) rather than computing, so two cores carry three guests in
/// little more than the longest one's time.
pub fn run_all(netdoctor: &Path, work: &Path) -> (Vec<Run>, Vec<String>) {
    std::thread::scope(|scope| {
        let host = (only_suites().is_none())
            .then(|| scope.spawn(|| run_host(netdoctor, &work.join("host"))));
        let guests: Vec<_> = selected()
            .into_iter()
            .map(|k| {
                let dir = work.join(k);
                (
                    k,
                    scope.spawn(move || {
                        std::fs::create_dir_all(&dir)?;
                        run_guest(k, netdoctor, &dir)
                    }),
                )
            })
            .collect();
        let mut runs = Vec::new();
        let mut failures = Vec::new();
        match host.map(|h| h.join()) {
            Some(Ok(run)) => runs.push(run),
            Some(Err(_)) => failures.push("host: the cases' thread panicked".to_owned()),
            None => {}
        }
        for (k, guest) in guests {
            match guest.join() {
                Ok(Ok(run)) => runs.push(run),
                Ok(Err(e)) => failures.push(format!("kernel {k}: {e:#}")),
                Err(_) => failures.push(format!("kernel {k}: the guest's thread panicked")),
            }
        }
        (runs, failures)
    })
}

/// The kernel table's header (docs/kernels.md and the README copy the table).
pub const TABLE_HEADER: &str = "| kernel | data plane | tc by | XDP | sockets | closes | drop reasons | wg MTU | wg netlink | bonds | overlays | WAN | limits | wg path | reorder |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";

/// The signals one kernel gave, as its checks proved them: one row of the kernel table.
#[derive(Debug, Default)]
pub struct Signals {
    /// tc counters equal to `ip -s link`.
    pub dataplane: bool,
    /// How tc was attached: "link" (tcx) or "netlink".
    pub tc: String,
    /// Generic XDP counted exactly.
    pub xdp: bool,
    /// Congestion control and retransmissions per connection.
    pub sockets: bool,
    /// A short connection caught at close.
    pub close_events: bool,
    /// Drop reasons reported (None: not checked).
    pub drop_reasons: Option<bool>,
    /// The kernel WireGuard MTU finding (None: no kernel WireGuard here).
    pub wireguard_mtu: Option<bool>,
    /// Kernel WireGuard read over generic netlink equals `wg show` (None: not here).
    pub wireguard_netlink: Option<bool>,
    /// Bond findings and twins (None: the suite did not run here).
    pub bonds: Option<bool>,
    /// GENEVE, GRE, GRETAP, IPIP, sit and ip6tnl MTU findings, twins and measured overheads.
    pub overlays: Option<bool>,
    /// The netem WAN cases.
    pub wan: Option<bool>,
    /// What limits each connection on a 40 ms netem path (None: the suite did not run here).
    pub limits: Option<bool>,
    /// WireGuard's underlay loss, reordering and handshake round trip under netem (None: the
    /// suite did not run here, or the kernel has no kernel WireGuard).
    pub wg_path: Option<bool>,
    /// Reordering told from loss under netem, and a balance-rr bond's (None: the suite did
    /// not run here).
    pub reorder: Option<bool>,
}

fn yes(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

impl Signals {
    /// The table row of `run`.
    pub fn row(&self, run: &Run) -> String {
        let opt = |o: Option<bool>| o.map_or("n/a", yes);
        format!(
            "| {} ({}) | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            run.name,
            run.kernel(),
            yes(self.dataplane),
            if self.tc == "link" {
                "tcx"
            } else {
                self.tc.as_str()
            },
            yes(self.xdp),
            yes(self.sockets),
            yes(self.close_events),
            opt(self.drop_reasons),
            opt(self.wireguard_mtu),
            opt(self.wireguard_netlink),
            opt(self.bonds),
            opt(self.overlays),
            opt(self.wan),
            opt(self.limits),
            opt(self.wg_path),
            opt(self.reorder),
        )
    }
}

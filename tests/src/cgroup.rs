//! A CPU cgroup with a quota for a lab process, so that a tunnel daemon reaches its own CPU
//! limit whatever else the machine runs: pinned to one core alone, a daemon gets only what
//! the other work on that core leaves it, while a quota below that share is always its
//! whole limit. Made in whichever hierarchy holds the CPU controller (cgroup v1 `cpu`, or
//! v2 with `cpu` enabled at its root), at that hierarchy's root; its processes go back to
//! the root and the cgroup is removed on `Drop`.
//!
//! ```no_run
//! use netdoctor_lab::cgroup::CpuQuota;
//! # fn main() -> anyhow::Result<()> {
//! let quota = CpuQuota::new(20)?; // 20 % of one core
//! quota.add(std::process::id())?;
//! # Ok(())
//! # }
//! ```

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use anyhow::{bail, Context, Result};

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// Period of the quota, microseconds (the kernel's default).
const PERIOD_US: u32 = 100_000;

/// A cgroup holding processes to `percent` of one core.
#[derive(Debug)]
pub struct CpuQuota {
    dir: PathBuf,
    root: PathBuf,
    v2: bool,
}

/// The mount point of the hierarchy with the CPU controller, and whether it is v2.
fn cpu_mount() -> Result<(PathBuf, bool)> {
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").context("mountinfo")?;
    let mut v2 = None;
    for line in mounts.lines() {
        let Some((before, after)) = line.split_once(" - ") else {
            continue;
        };
        let point = before.split(' ').nth(4).unwrap_or_default();
        let mut after = after.split(' ');
        let (fstype, options) = (after.next().unwrap_or(""), after.nth(1).unwrap_or(""));
        if fstype == "cgroup" && options.split(',').any(|o| o == "cpu") {
            return Ok((PathBuf::from(point), false));
        }
        let controllers = Path::new(point).join("cgroup.controllers");
        if fstype == "cgroup2"
            && std::fs::read_to_string(controllers)
                .is_ok_and(|c| c.split_whitespace().any(|c| c == "cpu"))
        {
            v2 = Some(PathBuf::from(point));
        }
    }
    match v2 {
        Some(point) => Ok((point, true)),
        None => bail!("no cgroup hierarchy with the CPU controller is mounted"),
    }
}

impl CpuQuota {
    /// A new cgroup at the CPU hierarchy's root allowing `percent` of one core.
    pub fn new(percent: u32) -> Result<CpuQuota> {
        let (root, v2) = cpu_mount()?;
        if v2 {
            std::fs::write(root.join("cgroup.subtree_control"), "+cpu")
                .context("enabling the CPU controller below the cgroup v2 root")?;
        }
        let dir = root.join(format!(
            "ndlab-cpu-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let quota = CpuQuota { dir, root, v2 };
        let micros = PERIOD_US * percent / 100;
        let (file, value) = if v2 {
            ("cpu.max", format!("{micros} {PERIOD_US}"))
        } else {
            ("cpu.cfs_quota_us", micros.to_string())
        };
        std::fs::write(quota.dir.join(file), value)
            .with_context(|| format!("setting {file} of {}", quota.dir.display()))?;
        Ok(quota)
    }

    /// Moves process `pid`, all its threads, into the cgroup.
    pub fn add(&self, pid: u32) -> Result<()> {
        std::fs::write(self.dir.join("cgroup.procs"), pid.to_string())
            .with_context(|| format!("moving pid {pid} into {}", self.dir.display()))
    }

    /// The cgroup's directory.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Whether it is a cgroup v2 one (else v1).
    pub fn is_v2(&self) -> bool {
        self.v2
    }
}

impl Drop for CpuQuota {
    fn drop(&mut self) {
        let procs = std::fs::read_to_string(self.dir.join("cgroup.procs")).unwrap_or_default();
        for pid in procs.lines() {
            let _ = std::fs::write(self.root.join("cgroup.procs"), pid);
        }
        if let Err(e) = std::fs::remove_dir(&self.dir) {
            eprintln!("netdoctor-lab: removing {}: {e}", self.dir.display());
        }
    }
}

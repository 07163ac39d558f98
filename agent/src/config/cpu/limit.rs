//! How much CPU a process can get, in cores: the fewest of its threads that ran, the
//! host's online CPUs, the CPUs its threads may run on (their affinity masks together,
//! which a cpuset cgroup narrows too), and its cgroup's CPU quota (cgroup v2 `cpu.max`, v1
//! `cpu.cfs_quota_us` / `cpu.cfs_period_us`, the smallest of its cgroup's and every
//! ancestor's, as the kernel enforces them).

use std::path::{Path, PathBuf};

use nix::sched::{sched_getaffinity, CpuSet};
use nix::unistd::{sysconf, Pid, SysconfVar};
use serde::Serialize;

use super::procfs::{read_small, SMALL_FILE};

/// `/proc/PID/cgroup` lists one line per hierarchy.
const CGROUP_FILE: u64 = 64 * 1024;
/// `/proc/self/mountinfo`: one line per mount; a host with many containers has thousands.
const MOUNTINFO_FILE: u64 = 4 * 1024 * 1024;
/// Cgroups nested deeper than this are not walked further up.
const MAX_DEPTH: usize = 64;

/// What sets a daemon's CPU limit (the smallest of them; on a tie the first here).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LimitedBy {
    /// Its threads: each runs on one core at a time.
    Threads,
    /// The host's online CPUs.
    Cpus,
    /// The CPUs its threads may run on.
    Affinity,
    /// Its cgroup's CPU quota.
    Quota,
}

impl LimitedBy {
    /// The fact's value: "threads", "cpus", "affinity", "quota".
    pub fn as_str(self) -> &'static str {
        match self {
            LimitedBy::Threads => "threads",
            LimitedBy::Cpus => "cpus",
            LimitedBy::Affinity => "affinity",
            LimitedBy::Quota => "quota",
        }
    }
}

/// What a process could get, read at one moment.
#[derive(Debug, Clone, PartialEq)]
pub struct Limit {
    /// The host's online CPUs.
    pub online: u32,
    /// CPUs any of its threads may run on; None if no thread's mask was read.
    pub affinity: Option<u32>,
    /// Its cgroup's CPU quota in cores (quota / period); None when none applies or it
    /// was not read (see `unread`).
    pub quota: Option<f64>,
    /// What could not be read, and why.
    pub unread: Vec<String>,
}

impl Limit {
    /// Reads the limits of process `pid` whose threads are `tids`.
    pub fn read(pid: u32, tids: impl Iterator<Item = u32>) -> Limit {
        let mut unread = Vec::new();
        let quota = cgroup_quota(pid).unwrap_or_else(|why| {
            unread.push(format!("its cgroup's CPU quota: {why}"));
            None
        });
        Limit {
            online: online_cpus(),
            affinity: affinity(tids),
            quota,
            unread,
        }
    }

    /// The most CPU a process whose `busy_threads` threads ran can use, in cores, and
    /// what sets it. A process with no thread that ran counts as one.
    pub fn cores(&self, busy_threads: u64) -> (f64, LimitedBy) {
        let candidates = [
            (Some(busy_threads.max(1) as f64), LimitedBy::Threads),
            (Some(f64::from(self.online.max(1))), LimitedBy::Cpus),
            (self.affinity.map(f64::from), LimitedBy::Affinity),
            (self.quota, LimitedBy::Quota),
        ];
        candidates
            .into_iter()
            .filter_map(|(v, by)| Some((v.filter(|v| *v > 0.0)?, by)))
            .fold((f64::INFINITY, LimitedBy::Threads), |best, c| {
                if c.0 < best.0 {
                    c
                } else {
                    best
                }
            })
    }
}

/// The host's online CPUs (`sysconf(_SC_NPROCESSORS_ONLN)`), at least 1.
pub fn online_cpus() -> u32 {
    sysconf(SysconfVar::_NPROCESSORS_ONLN)
        .ok()
        .flatten()
        .and_then(|n| u32::try_from(n).ok())
        .unwrap_or(1)
        .max(1)
}

/// How many CPUs the threads `tids` may run on, together (`sched_getaffinity` of each);
/// None if none was read (every thread exited).
pub fn affinity(tids: impl Iterator<Item = u32>) -> Option<u32> {
    let mut union: Option<Vec<bool>> = None;
    for tid in tids {
        let Ok(raw) = i32::try_from(tid) else {
            continue;
        };
        let Ok(set) = sched_getaffinity(Pid::from_raw(raw)) else {
            continue;
        };
        let all = union.get_or_insert_with(|| vec![false; CpuSet::count()]);
        for (cpu, on) in all.iter_mut().enumerate() {
            *on |= set.is_set(cpu).unwrap_or(false);
        }
    }
    union.map(|u| u32::try_from(u.iter().filter(|on| **on).count()).unwrap_or(u32::MAX))
}

/// The cgroup hierarchy that holds the CPU controller for a process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Hierarchy {
    /// cgroup v1 with the `cpu` controller.
    V1,
    /// cgroup v2.
    V2,
}

/// Which hierarchy holds the CPU controller for the process whose `/proc/PID/cgroup` is
/// `text`, and the process's path in it. A v1 `cpu` line wins: where v1 holds the
/// controller, v2 has none.
pub(super) fn cpu_cgroup(text: &str) -> Option<(Hierarchy, String)> {
    let mut v2 = None;
    for line in text.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        if controllers.split(',').any(|c| c == "cpu") {
            return Some((Hierarchy::V1, path.to_owned()));
        }
        if id == "0" && controllers.is_empty() {
            v2 = Some((Hierarchy::V2, path.to_owned()));
        }
    }
    v2
}

/// Undoes mountinfo's octal escapes (`\040` for a space).
fn unescape(field: &str) -> String {
    let b = field.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal = b.get(i + 1..i + 4).and_then(|d| {
            let s = std::str::from_utf8(d).ok()?;
            u8::from_str_radix(s, 8).ok()
        });
        match (b[i], octal) {
            (b'\\', Some(c)) => {
                out.push(c);
                i += 4;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Where `hierarchy` is mounted, from mountinfo `text`: the mount point and the cgroup
/// path at its root.
pub(super) fn mount_of(text: &str, hierarchy: &Hierarchy) -> Option<(PathBuf, String)> {
    text.lines().find_map(|line| {
        let (before, after) = line.split_once(" - ")?;
        let fields: Vec<&str> = before.split(' ').collect();
        let mut after = after.split(' ');
        let (fstype, _source, options) = (after.next()?, after.next()?, after.next()?);
        let wanted = match hierarchy {
            Hierarchy::V2 => fstype == "cgroup2",
            Hierarchy::V1 => fstype == "cgroup" && options.split(',').any(|o| o == "cpu"),
        };
        if !wanted {
            return None;
        }
        Some((
            PathBuf::from(unescape(fields.get(4)?)),
            unescape(fields.get(3)?),
        ))
    })
}

/// The directory of cgroup `path` under a mount at `mount_point` whose root is `root`,
/// and its ancestors up to the mount point (nearest first). A path outside the mount's
/// root (another cgroup namespace's) or with `..` in it has none.
pub(super) fn cgroup_dirs(mount_point: &Path, root: &str, path: &str) -> Option<Vec<PathBuf>> {
    let rel = if root == "/" {
        path
    } else {
        path.strip_prefix(root)
            .filter(|r| r.is_empty() || r.starts_with('/'))?
    };
    let parts: Vec<&str> = rel.split('/').filter(|p| !p.is_empty()).collect();
    if parts.iter().any(|p| *p == ".." || *p == ".") || parts.len() > MAX_DEPTH {
        return None;
    }
    Some(
        (0..=parts.len())
            .rev()
            .map(|n| {
                parts[..n]
                    .iter()
                    .fold(mount_point.to_owned(), |d, p| d.join(p))
            })
            .collect(),
    )
}

/// Cores one cgroup directory's quota allows; None without one (or without the file:
/// a v2 cgroup without the CPU controller enabled).
pub(super) fn quota_at(dir: &Path, hierarchy: &Hierarchy) -> std::io::Result<Option<f64>> {
    let read = |name: &str| match read_small(&dir.join(name), SMALL_FILE) {
        Ok(text) => Ok(Some(text.trim().to_owned())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    };
    let (quota, period) = match hierarchy {
        Hierarchy::V2 => {
            let Some(max) = read("cpu.max")? else {
                return Ok(None);
            };
            let mut f = max.split_whitespace();
            (
                f.next().unwrap_or("max").to_owned(),
                f.next().map(str::to_owned),
            )
        }
        Hierarchy::V1 => {
            let Some(quota) = read("cpu.cfs_quota_us")? else {
                return Ok(None);
            };
            (quota, read("cpu.cfs_period_us")?)
        }
    };
    let quota: Option<f64> = quota
        .parse::<i64>()
        .ok()
        .filter(|q| *q > 0)
        .map(|q| q as f64);
    let period: Option<f64> = period
        .and_then(|p| p.parse::<i64>().ok())
        .filter(|p| *p > 0)
        .map(|p| p as f64);
    Ok(quota.zip(period).map(|(q, p)| q / p))
}

/// The smallest CPU quota, in cores, of the cgroup of process `pid` and its ancestors;
/// None when none has one.
pub fn cgroup_quota(pid: u32) -> Result<Option<f64>, String> {
    let cgroup_file = PathBuf::from(format!("/proc/{pid}/cgroup"));
    let text = read_small(&cgroup_file, CGROUP_FILE)
        .map_err(|e| format!("{}: {e}", cgroup_file.display()))?;
    let Some((hierarchy, path)) = cpu_cgroup(&text) else {
        return Ok(None);
    };
    let mounts = read_small(Path::new("/proc/self/mountinfo"), MOUNTINFO_FILE)
        .map_err(|e| format!("/proc/self/mountinfo: {e}"))?;
    let Some((mount_point, root)) = mount_of(&mounts, &hierarchy) else {
        return Err(format!(
            "no {hierarchy:?} cgroup hierarchy with the CPU controller is mounted"
        ));
    };
    let dirs = cgroup_dirs(&mount_point, &root, &path).ok_or_else(|| {
        format!(
            "its cgroup {path:?} is outside the one mounted at {}",
            mount_point.display()
        )
    })?;
    let mut smallest: Option<f64> = None;
    for dir in dirs {
        let cores = quota_at(&dir, &hierarchy).map_err(|e| format!("{}: {e}", dir.display()))?;
        smallest = match (smallest, cores) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }
    Ok(smallest)
}

//! Bounded reads of the kernel's CPU accounting: `/proc/PID/stat` of a process or one of
//! its threads, the host's `/proc/stat`, and the small files of a cgroup.
//!
//! A process may name itself anything (`comm`, the field in parentheses, up to 15 bytes
//! of its choosing, `)` and spaces included): fields are counted from the last `)`, so a
//! name cannot shift them. Everything else read here the kernel keeps.

use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Longest `/proc/PID/stat` or cgroup file read here: they are one line of numbers.
pub(super) const SMALL_FILE: u64 = 4096;

/// What one `/proc/PID/stat` (or `/proc/PID/task/TID/stat`) says of CPU time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct TaskStat {
    /// `utime + stime`, clock ticks. For a process: every thread it has had, the
    /// exited ones included (the kernel adds a thread's time to its process when it
    /// exits); not its children.
    pub ticks: u64,
    /// `num_threads`.
    pub threads: u64,
    /// `starttime`, clock ticks after boot: with the pid, which process this is.
    pub start_time: u64,
}

fn opened(path: &Path) -> std::io::Result<std::fs::File> {
    std::fs::File::options()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
}

/// The whole of `path`, at most `max` bytes: a longer file is an error.
pub(super) fn read_small(path: &Path, max: u64) -> std::io::Result<String> {
    let mut data = Vec::new();
    opened(path)?.take(max + 1).read_to_end(&mut data)?;
    if data.len() as u64 > max {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("{} is longer than {max} bytes", path.display()),
        ));
    }
    String::from_utf8(data).map_err(|_| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("{} is not text", path.display()),
        )
    })
}

/// The first `max` bytes of `path` (files whose first line is all that is wanted).
fn read_head(path: &Path, max: u64) -> std::io::Result<String> {
    let mut data = Vec::new();
    opened(path)?.take(max).read_to_end(&mut data)?;
    Ok(String::from_utf8_lossy(&data).into_owned())
}

/// Parses a `stat` line: fields are numbered from 1 (`pid`), `comm` is 2, and field 3 is
/// the first after the last `)`.
pub(super) fn parse_stat(text: &str) -> Option<TaskStat> {
    let after = text.get(text.rfind(')')? + 1..)?;
    let fields: Vec<&str> = after.split_whitespace().collect();
    let field = |n: usize| -> Option<u64> { fields.get(n.checked_sub(3)?)?.parse().ok() };
    Some(TaskStat {
        ticks: field(14)?.checked_add(field(15)?)?,
        threads: field(20)?,
        start_time: field(22)?,
    })
}

/// `/proc/PID/stat`, or a thread's `/proc/PID/task/TID/stat`.
pub(super) fn stat(path: &Path) -> std::io::Result<TaskStat> {
    let text = read_small(path, SMALL_FILE)?;
    parse_stat(&text).ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("{} does not parse as a stat line", path.display()),
        )
    })
}

/// The host's CPU time, every CPU together, in clock ticks (`/proc/stat`'s `cpu` line).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostSample {
    /// Time spent working: user, nice, system, irq, softirq, steal (guest time is part of
    /// user).
    pub busy: u64,
    /// Busy plus idle and iowait.
    pub total: u64,
}

/// Parses the first line of `/proc/stat`.
pub(super) fn parse_host(text: &str) -> Option<HostSample> {
    let line = text.lines().next()?;
    let mut fields = line.split_whitespace();
    if fields.next()? != "cpu" {
        return None;
    }
    let v: Vec<u64> = fields
        .take(8)
        .map(|f| f.parse().ok())
        .collect::<Option<_>>()?;
    let [user, nice, system, idle, iowait, irq, softirq, steal] = v[..] else {
        return None;
    };
    let busy = [user, nice, system, irq, softirq, steal]
        .into_iter()
        .try_fold(0u64, u64::checked_add)?;
    Some(HostSample {
        busy,
        total: busy.checked_add(idle)?.checked_add(iowait)?,
    })
}

impl HostSample {
    /// Reads `/proc/stat` (its first line only: the rest, one line per CPU and the
    /// interrupt counts, can be long).
    pub fn read() -> std::io::Result<HostSample> {
        let text = read_head(Path::new("/proc/stat"), SMALL_FILE)?;
        parse_host(&text).ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "/proc/stat has no cpu line",
            )
        })
    }

    /// The share of the host's CPU time that was busy between `self` and `end`, percent
    /// (one decimal); None if no time passed.
    pub fn busy_percent(&self, end: &HostSample) -> Option<f64> {
        let total = end.total.checked_sub(self.total).filter(|t| *t > 0)?;
        let busy = end.busy.saturating_sub(self.busy).min(total);
        Some((busy as f64 * 1000.0 / total as f64).round() / 10.0)
    }
}

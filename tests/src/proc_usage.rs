//! What a process uses, from `/proc`: its CPU ticks and the fields of its status (resident
//! memory, threads, switches), for the benchmarks that measure the agent or themselves.

use std::collections::HashMap;

use anyhow::{Context, Result};

/// utime + stime of every thread of `pid`, alive or exited, and cutime + cstime of its
/// reaped children (clock ticks).
pub fn proc_cpu_ticks(pid: u32) -> Result<(u64, u64)> {
    let path = format!("/proc/{pid}/stat");
    let stat = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
    // The command name may hold spaces and parentheses: fields start after the last ')'.
    let rest = stat
        .rsplit_once(')')
        .map(|(_, r)| r)
        .with_context(|| format!("unexpected {path}: {stat}"))?;
    // After ')': field 3 (state) is index 0, so utime (14) is 11, stime (15) 12, cutime
    // (16) 13 and cstime (17) 14.
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |i: usize| -> Result<u64> {
        fields
            .get(i)
            .and_then(|v| v.parse::<u64>().ok())
            .with_context(|| format!("no field {} in {path}", i + 3))
    };
    Ok((field(11)? + field(12)?, field(13)? + field(14)?))
}

/// `Key:   value ...` lines of `/proc/PID/status`, first number only.
pub fn proc_status(pid: u32) -> Result<HashMap<String, u64>> {
    let path = format!("/proc/{pid}/status");
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
    Ok(text
        .lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(':')?;
            let n = v.split_whitespace().next()?.parse::<u64>().ok()?;
            Some((k.trim().to_owned(), n))
        })
        .collect())
}

//! Which process serves a TUN/TAP device, and its UDP sockets: how netdoctor learns the
//! tunnel port of tinc, fastd, OpenVPN or wireguard-go.
//!
//! A process holding `/dev/net/tun` shows the device in `/proc/PID/fdinfo/FD` (`iff:`);
//! its sockets are `socket:[INODE]` links whose inodes appear in `/proc/PID/net/udp*`.

use std::collections::HashSet;
use std::path::Path;

use serde::Serialize;

use super::trusted::Uids;

/// The daemon behind a TUN/TAP device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TunOwner {
    /// Process id.
    pub pid: u32,
    /// Command name (`/proc/PID/comm`), e.g. "tincd", "fastd", "wireguard-go".
    pub command: String,
    /// Its command line.
    pub args: Vec<String>,
    /// Its real, effective and saved uids: only a daemon that is root's by all three
    /// ([`Uids::root`]) gets its files read and its word taken.
    pub uids: Uids,
    /// Local UDP ports the process has open.
    pub udp_ports: Vec<u16>,
}

fn socket_inodes(pid: &Path) -> HashSet<u64> {
    let Ok(fds) = std::fs::read_dir(pid.join("fd")) else {
        return HashSet::new();
    };
    fds.filter_map(|f| f.ok())
        .filter_map(|f| std::fs::read_link(f.path()).ok())
        .filter_map(|target| {
            let t = target.to_string_lossy().into_owned();
            t.strip_prefix("socket:[")?.strip_suffix(']')?.parse().ok()
        })
        .collect()
}

fn udp_ports(pid: &Path, inodes: &HashSet<u64>) -> Vec<u16> {
    let mut ports: Vec<u16> = ["net/udp", "net/udp6"]
        .iter()
        .filter_map(|table| std::fs::read_to_string(pid.join(table)).ok())
        .flat_map(|text| {
            text.lines()
                .skip(1)
                .filter_map(|line| {
                    let cols: Vec<&str> = line.split_whitespace().collect();
                    let inode: u64 = cols.get(9)?.parse().ok()?;
                    let port = cols.get(1)?.rsplit(':').next()?;
                    inodes
                        .contains(&inode)
                        .then(|| u16::from_str_radix(port, 16).ok())
                        .flatten()
                })
                .collect::<Vec<_>>()
        })
        .collect();
    ports.sort_unstable();
    ports.dedup();
    ports
}

fn holds_tun(pid: &Path, ifname: &str) -> bool {
    let Ok(fds) = std::fs::read_dir(pid.join("fdinfo")) else {
        return false;
    };
    let needle = format!("iff:\t{ifname}\n");
    fds.filter_map(|f| f.ok())
        .any(|f| std::fs::read_to_string(f.path()).is_ok_and(|info| info.contains(&needle)))
}

/// Finds the process serving TUN/TAP device `ifname` in the caller's network namespace
/// (the same name may exist in other namespaces).
pub fn tun_owner(ifname: &str) -> Option<TunOwner> {
    find_owner(ifname, None)
}

/// Like [`tun_owner`], among the processes whose command name is `command` only: their
/// descriptors alone are read, which is cheap enough to do whenever interfaces are listed.
pub fn tun_owner_named(ifname: &str, command: &str) -> Option<TunOwner> {
    find_owner(ifname, Some(command))
}

fn command_of(pid: &Path) -> String {
    std::fs::read_to_string(pid.join("comm"))
        .unwrap_or_default()
        .trim()
        .to_owned()
}

fn find_owner(ifname: &str, command: Option<&str>) -> Option<TunOwner> {
    // "net:[INODE]"; a process whose namespace cannot be read is not ours to report.
    let netns = |p: &Path| std::fs::read_link(p).ok();
    let mine = netns(Path::new("/proc/thread-self/ns/net"));
    let procs = std::fs::read_dir("/proc").ok()?;
    for entry in procs.filter_map(|e| e.ok()) {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let path = entry.path();
        if command.is_some_and(|c| command_of(&path) != c)
            || mine.is_none()
            || netns(&path.join("ns/net")) != mine
            || !holds_tun(&path, ifname)
        {
            continue;
        }
        let command = command_of(&path);
        let inodes = socket_inodes(&path);
        let args = std::fs::read(path.join("cmdline"))
            .map(|raw| {
                raw.split(|b| *b == 0)
                    .filter(|a| !a.is_empty())
                    .map(|a| String::from_utf8_lossy(a).into_owned())
                    .collect()
            })
            .unwrap_or_default();
        return Some(TunOwner {
            pid,
            command,
            args,
            uids: Uids::of(pid).ok()?,
            udp_ports: udp_ports(&path, &inodes),
        });
    }
    None
}

impl TunOwner {
    /// The file given with `-c FILE` / `--config FILE` / `--config=FILE`, resolved against
    /// the daemon's working directory.
    pub fn config_file(&self) -> Option<std::path::PathBuf> {
        let mut args = self.args.iter();
        let mut file = None;
        while let Some(a) = args.next() {
            if a == "-c" || a == "--config" {
                file = args.next().cloned();
            } else if let Some(f) = a.strip_prefix("--config=") {
                file = Some(f.to_owned());
            }
        }
        let file = std::path::PathBuf::from(file?);
        Some(if file.is_absolute() {
            file
        } else {
            std::fs::read_link(format!("/proc/{}/cwd", self.pid))
                .ok()?
                .join(file)
        })
    }
}

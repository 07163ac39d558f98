//! Kernel settings read from /proc/sys, which (unlike /sys) follows the caller's network
//! namespace for the `net.*` keys.

use std::path::PathBuf;

use serde::Serialize;

fn path(key: &str) -> PathBuf {
    PathBuf::from("/proc/sys").join(key.replace('.', "/"))
}

/// Reads one sysctl, trimmed; `None` if it does not exist or cannot be read.
pub fn read(key: &str) -> Option<String> {
    std::fs::read_to_string(path(key))
        .ok()
        .map(|s| s.trim().to_owned())
}

/// The congestion control facts of the namespace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CongestionControl {
    /// `net.ipv4.tcp_congestion_control`: what new connections use.
    pub default: Option<String>,
    /// `net.ipv4.tcp_available_congestion_control`: loaded algorithms.
    pub available: Vec<String>,
    /// `net.ipv4.tcp_allowed_congestion_control`: what unprivileged sockets may pick.
    pub allowed: Vec<String>,
}

impl CongestionControl {
    /// Reads the three sysctls.
    pub fn read() -> Self {
        let list = |key| {
            read(key)
                .map(|s| s.split_whitespace().map(str::to_owned).collect())
                .unwrap_or_default()
        };
        CongestionControl {
            default: read("net.ipv4.tcp_congestion_control"),
            available: list("net.ipv4.tcp_available_congestion_control"),
            allowed: list("net.ipv4.tcp_allowed_congestion_control"),
        }
    }
}

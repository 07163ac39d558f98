//! Host settings that decide whether traffic through a tunnel or gateway works: IP
//! forwarding, reverse-path filtering, congestion control, TCP MTU probing, MSS clamping
//! rules (read as rules by [`super::firewall`]), multipath hashing, TCP buffer sizes. All
//! read for the caller's network namespace.

use serde::Serialize;

use super::firewall::Ruleset;
use crate::config::sysctl::{self, CongestionControl};

/// Host-wide facts.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Host {
    /// `net.ipv4.tcp_congestion_control`.
    pub cc_default: String,
    /// Algorithms loaded in the kernel.
    pub cc_available: Vec<String>,
    /// Whether bbr can be used (loaded, or available as a module).
    pub bbr_available: bool,
    /// `net.ipv4.tcp_mtu_probing` (0 off, 1 after a blackhole is detected, 2 always).
    pub tcp_mtu_probing: i64,
    /// `net.ipv4.ip_forward`.
    pub ip_forward: bool,
    /// `net.ipv6.conf.all.forwarding`.
    pub ip6_forward: bool,
    /// `net.ipv4.conf.all.rp_filter`.
    pub rp_filter_all: i64,
    /// `net.ipv4.conf.<iface>.rp_filter`.
    pub rp_filter_iface: i64,
    /// The mode in force on the interface: the maximum of `all` and the interface's
    /// (0 off, 1 strict, 2 loose).
    pub rp_filter: i64,
    /// A TCP MSS clamping rule exists somewhere (nftables `tcp option maxseg size set`,
    /// iptables `TCPMSS`), whatever it applies to.
    pub mss_clamping: bool,
    /// A clamping rule covers SYNs forwarded out through the interface: in a chain packets
    /// reach, at the forward or postrouting hook, for this interface (or any), clamping to
    /// the path MTU or to a value that fits.
    pub mss_clamp_covers: bool,
    /// That rule, described ("" if none).
    pub mss_clamp_rule: String,
    /// `net.ipv4.fib_multipath_hash_policy` (0 layer 3, 1 layer 4, 2 layer 3 or inner
    /// layer 3, 3 custom fields).
    pub fib_multipath_hash_policy: i64,
    /// `net.ipv6.fib_multipath_hash_policy`.
    pub fib6_multipath_hash_policy: i64,
    /// The host's online CPUs.
    pub cpus_online: i64,
    /// The share of all its CPUs' time that was busy during the observation (`/proc/stat`),
    /// percent; -1 if not read.
    pub cpu_busy_percent: f64,
    /// `net.ipv4.tcp_rmem`: receive buffer minimum, default and autotuning maximum, bytes
    /// (-1 each if unreadable).
    pub tcp_rmem_min: i64,
    /// See `tcp_rmem_min`.
    pub tcp_rmem_default: i64,
    /// See `tcp_rmem_min`.
    pub tcp_rmem_max: i64,
    /// `net.ipv4.tcp_wmem`: send buffer minimum, default and autotuning maximum, bytes.
    pub tcp_wmem_min: i64,
    /// See `tcp_wmem_min`.
    pub tcp_wmem_default: i64,
    /// See `tcp_wmem_min`.
    pub tcp_wmem_max: i64,
    /// The share of a receive buffer advertised as window, from `net.ipv4.tcp_adv_win_scale`
    /// (0.5 with its default 1; -1 if unreadable). Kernels since 6.6 measure the share per
    /// socket instead, usually more than half: a buffer sized with this errs on the large
    /// side.
    pub tcp_adv_win_share: f64,
}

/// The share of a receive buffer the kernel advertises at `tcp_adv_win_scale` = `scale`
/// (`tcp_win_from_space`): all but 2^-scale of it when positive, 2^scale of it otherwise.
pub fn advertised_share(scale: i64) -> f64 {
    let scale = scale.clamp(-31, 31) as i32;
    if scale > 0 {
        1.0 - 0.5f64.powi(scale)
    } else {
        0.5f64.powi(-scale)
    }
}

/// The three numbers of a `min default max` sysctl, -1 each if unreadable.
fn triple(key: &str) -> [i64; 3] {
    let values: Vec<i64> = sysctl::read(key)
        .map(|v| {
            v.split_whitespace()
                .filter_map(|n| n.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    match values[..] {
        [min, default, max] => [min, default, max],
        _ => [-1; 3],
    }
}

fn int(key: &str) -> i64 {
    sysctl::read(key).and_then(|v| v.parse().ok()).unwrap_or(0)
}

/// Whether a module file for `tcp_<name>` exists for the running kernel.
fn cc_module_exists(name: &str) -> bool {
    let Ok(release) = std::fs::read_to_string("/proc/sys/kernel/osrelease") else {
        return false;
    };
    let dir = std::path::Path::new("/lib/modules")
        .join(release.trim())
        .join("kernel/net/ipv4");
    ["ko", "ko.xz", "ko.zst", "ko.gz"]
        .iter()
        .any(|ext| dir.join(format!("tcp_{name}.{ext}")).exists())
}

impl Host {
    /// Whether the host forwards IPv4 or IPv6.
    pub fn forwarding() -> bool {
        int("net.ipv4.ip_forward") == 1 || int("net.ipv6.conf.all.forwarding") == 1
    }

    /// Reads the host facts relevant to interface `iface` (MTU `mtu`), with the firewall's
    /// rules already read.
    pub fn read(iface: &str, mtu: u32, rules: &Ruleset) -> Self {
        let cc = CongestionControl::read();
        let rp_all = int("net.ipv4.conf.all.rp_filter");
        let rp_iface = int(&format!("net.ipv4.conf.{iface}.rp_filter"));
        // The largest MSS that fits the interface: its MTU minus IPv4 and TCP headers.
        let clamp = rules.clamp_for(iface, i64::from(mtu) - 40);
        let [rmem_min, rmem_default, rmem_max] = triple("net.ipv4.tcp_rmem");
        let [wmem_min, wmem_default, wmem_max] = triple("net.ipv4.tcp_wmem");
        Host {
            bbr_available: cc.available.iter().any(|c| c == "bbr") || cc_module_exists("bbr"),
            cc_default: cc.default.unwrap_or_default(),
            cc_available: cc.available,
            tcp_mtu_probing: int("net.ipv4.tcp_mtu_probing"),
            ip_forward: int("net.ipv4.ip_forward") == 1,
            ip6_forward: int("net.ipv6.conf.all.forwarding") == 1,
            rp_filter_all: rp_all,
            rp_filter_iface: rp_iface,
            rp_filter: rp_all.max(rp_iface),
            mss_clamping: rules.any_clamp(),
            mss_clamp_covers: clamp.is_some(),
            mss_clamp_rule: clamp.map(|r| r.describe()).unwrap_or_default(),
            fib_multipath_hash_policy: int("net.ipv4.fib_multipath_hash_policy"),
            fib6_multipath_hash_policy: int("net.ipv6.fib_multipath_hash_policy"),
            cpus_online: i64::from(super::cpu::online_cpus()),
            cpu_busy_percent: -1.0,
            tcp_rmem_min: rmem_min,
            tcp_rmem_default: rmem_default,
            tcp_rmem_max: rmem_max,
            tcp_wmem_min: wmem_min,
            tcp_wmem_default: wmem_default,
            tcp_wmem_max: wmem_max,
            tcp_adv_win_share: sysctl::read("net.ipv4.tcp_adv_win_scale")
                .and_then(|v| v.parse().ok())
                .map_or(-1.0, advertised_share),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::advertised_share;

    #[test]
    fn the_advertised_share_of_a_receive_buffer() {
        // tcp_win_from_space(): space - (space >> scale), or space >> -scale.
        assert_eq!(advertised_share(1), 0.5);
        assert_eq!(advertised_share(2), 0.75);
        assert_eq!(advertised_share(0), 1.0);
        assert_eq!(advertised_share(-2), 0.25);
    }
}

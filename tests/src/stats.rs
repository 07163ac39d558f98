//! Counters: interface rx/tx statistics (`ip -s -j link show`) and the
//! namespace's SNMP/netstat counters (`/proc/net/snmp`, `/proc/net/netstat`).

use std::collections::BTreeMap;

use anyhow::{Context, Result};
use serde_json::Value;

use crate::cmd;
use crate::netns::Netns;

/// rx/tx counters of one interface (from `stats64`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IfStats {
    /// Received packets.
    pub rx_packets: u64,
    /// Received bytes.
    pub rx_bytes: u64,
    /// Receive errors.
    pub rx_errors: u64,
    /// Received packets dropped by the device/driver.
    pub rx_dropped: u64,
    /// Transmitted packets.
    pub tx_packets: u64,
    /// Transmitted bytes.
    pub tx_bytes: u64,
    /// Transmit errors.
    pub tx_errors: u64,
    /// Transmit drops by the device/driver.
    pub tx_dropped: u64,
}

impl IfStats {
    /// Counter increase since `earlier` (saturating at 0).
    pub fn since(&self, earlier: &IfStats) -> IfStats {
        IfStats {
            rx_packets: self.rx_packets.saturating_sub(earlier.rx_packets),
            rx_bytes: self.rx_bytes.saturating_sub(earlier.rx_bytes),
            rx_errors: self.rx_errors.saturating_sub(earlier.rx_errors),
            rx_dropped: self.rx_dropped.saturating_sub(earlier.rx_dropped),
            tx_packets: self.tx_packets.saturating_sub(earlier.tx_packets),
            tx_bytes: self.tx_bytes.saturating_sub(earlier.tx_bytes),
            tx_errors: self.tx_errors.saturating_sub(earlier.tx_errors),
            tx_dropped: self.tx_dropped.saturating_sub(earlier.tx_dropped),
        }
    }
}

/// Reads `ifname`'s counters inside `ns` with `ip -s -j link show dev IF`.
pub fn interface_stats(ns: &Netns, ifname: &str) -> Result<IfStats> {
    let json = ns.ip(&["-s", "-j", "link", "show", "dev", ifname])?;
    parse_link_stats(&json).with_context(|| format!("stats of {ifname} in {}", ns.name()))
}

/// Same as [`interface_stats`] for an interface of the host namespace.
pub fn host_interface_stats(ifname: &str) -> Result<IfStats> {
    let json = cmd::host_run(&["ip", "-s", "-j", "link", "show", "dev", ifname])?;
    parse_link_stats(&json).with_context(|| format!("stats of host {ifname}"))
}

/// Parses the JSON of `ip -s -j link show dev IF` (first link).
pub fn parse_link_stats(json: &str) -> Result<IfStats> {
    let v: Value = serde_json::from_str(json).context("`ip -s -j link` output is not JSON")?;
    let stats = v
        .get(0)
        .and_then(|l| l.get("stats64").or_else(|| l.get("stats")))
        .context("no stats64 in `ip -s -j link` output")?;
    let get = |dir: &str, key: &str| -> u64 {
        stats
            .get(dir)
            .and_then(|d| d.get(key))
            .and_then(Value::as_u64)
            .unwrap_or(0)
    };
    Ok(IfStats {
        rx_packets: get("rx", "packets"),
        rx_bytes: get("rx", "bytes"),
        rx_errors: get("rx", "errors"),
        rx_dropped: get("rx", "dropped"),
        tx_packets: get("tx", "packets"),
        tx_bytes: get("tx", "bytes"),
        tx_errors: get("tx", "errors"),
        tx_dropped: get("tx", "dropped"),
    })
}

/// SNMP and netstat counters of `ns`, named like `nstat` does
/// (`IpInAddrErrors`, `TcpRetransSegs`, `TcpExtTCPLostRetransmit`,
/// `UdpRcvbufErrors`, ...), read from `/proc/net/snmp` and
/// `/proc/net/netstat` inside the namespace.
pub fn net_counters(ns: &Netns) -> Result<BTreeMap<String, u64>> {
    let text = ns.run(&["cat", "/proc/net/snmp", "/proc/net/netstat"])?;
    Ok(parse_proc_counters(&text))
}

/// Parses `/proc/net/snmp`-style text: pairs of `Prefix: names...` /
/// `Prefix: values...` lines into `PrefixName -> value` (negative or
/// non-numeric values are skipped).
pub fn parse_proc_counters(text: &str) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    let lines: Vec<&str> = text.lines().collect();
    let mut i = 0;
    while i + 1 < lines.len() {
        let (Some((p1, names)), Some((p2, values))) =
            (lines[i].split_once(':'), lines[i + 1].split_once(':'))
        else {
            i += 1;
            continue;
        };
        if p1 != p2 {
            i += 1;
            continue;
        }
        for (name, value) in names.split_whitespace().zip(values.split_whitespace()) {
            if let Ok(v) = value.parse::<u64>() {
                out.insert(format!("{p1}{name}"), v);
            }
        }
        i += 2;
    }
    out
}

/// The CPU model (`model name` in /proc/cpuinfo), "?" when unknown: benchmarks print it
/// beside their figures, with the kernel ([`kernel_release`]).
pub fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .and_then(|rest| rest.split_once(':'))
        .map(|(_, m)| m.trim().to_owned())
        .unwrap_or_else(|| "?".into())
}

/// The running kernel's release (`uname -r`), "?" when unknown.
pub fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_owned())
        .unwrap_or_else(|_| "?".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_link_stats() -> Result<()> {
        let json = r#"[{"ifname":"lo","stats64":{"rx":{"bytes":3193,"packets":29,"errors":0,"dropped":1},"tx":{"bytes":3000,"packets":28,"errors":2,"dropped":0}}}]"#;
        let s = parse_link_stats(json)?;
        assert_eq!((s.rx_packets, s.rx_bytes, s.rx_dropped), (29, 3193, 1));
        assert_eq!((s.tx_packets, s.tx_bytes, s.tx_errors), (28, 3000, 2));
        Ok(())
    }

    #[test]
    fn parses_proc_counters() {
        let text = "Ip: Forwarding InAddrErrors\nIp: 1 7\nIcmp: InMsgs\nIcmp: 3\n";
        let c = parse_proc_counters(text);
        assert_eq!(c.get("IpInAddrErrors"), Some(&7));
        assert_eq!(c.get("IcmpInMsgs"), Some(&3));
    }
}

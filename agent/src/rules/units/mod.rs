//! Values in the units a person reads: evidence in the text report of `diagnose` and the
//! numbers of rule templates ([`cel`]'s `fmt_bytes(x)` ...).
//!
//! A rule's evidence is a map of names to JSON values (raw numbers, `-1` for unknown,
//! `""` for an unknown string; docs/rules.md). `--json` keeps them as they are; the text
//! report prints each in its unit, chosen from the evidence name's convention: `*_bytes`
//! as B/KiB/MiB/GiB, `*_ratio` and `*_share` (0-1) and `*_percent` as %, `*_ms` and
//! `*_s` as durations, `*_bps` and `*_mbps` as bit/s with SI prefixes, counts with
//! thousands separators, MTUs and other settings as plain integers, text as it is, and
//! every unknown value as `n/a`. Pure functions, no I/O.

pub mod cel;

use std::collections::BTreeMap;

use serde_json::Value;

/// Printed for a value the agent could not read (`-1`, `""`).
pub const NA: &str = "n/a";

/// How an evidence value is printed, from its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Bytes: B, KiB, MiB, GiB, TiB (`*_bytes`, sysctl buffer sizes).
    Bytes,
    /// Kibibytes, printed as bytes (`*_kib`).
    Kib,
    /// A share from 0 to 1, printed as % (`*_ratio`, `*_share`).
    Ratio,
    /// Already a percentage (`*_percent*`, `percent_of_*`).
    Percent,
    /// Milliseconds (`*_ms`).
    Millis,
    /// Seconds (`*_s`).
    Seconds,
    /// Bits per second, SI prefixes (`*_bps`).
    BitRate,
    /// Megabits per second, printed as bit/s (`*_mbps`).
    MbitRate,
    /// Events per second (`*_per_s`).
    PerSecond,
    /// A count: thousands separators, no unit (packets, flows, drops ...).
    Count,
    /// A number read as it is: MTUs, MSS, overheads, ids, ports, sysctl settings.
    Plain,
    /// Text, flags and lists: as they are.
    Text,
}

/// Names (of evidence and of the fields of evidence objects) whose suffix says nothing.
const NAMED: &[(&str, Unit)] = &[
    ("bytes", Unit::Bytes),
    ("needed_tcp_rmem_max", Unit::Bytes),
    ("needed_tcp_wmem_max", Unit::Bytes),
    ("dropped", Unit::Count),
    ("expected", Unit::Count),
    ("received", Unit::Count),
    ("lost", Unit::Count),
    ("packets", Unit::Count),
    ("flows", Unit::Count),
    ("retransmits", Unit::Count),
    ("threads_that_ran", Unit::Count),
    ("flows_over_limit", Unit::Count),
    ("mtu", Unit::Plain),
    ("overhead_expected", Unit::Plain),
    ("overhead_measured", Unit::Plain),
    ("largest_segment", Unit::Plain),
    ("largest_syn_mss", Unit::Plain),
    ("mss_limit", Unit::Plain),
    ("pid", Unit::Plain),
    ("uid", Unit::Plain),
    ("tailscale_port", Unit::Plain),
    ("derp_region", Unit::Plain),
    ("weight", Unit::Plain),
    ("ip_forward", Unit::Plain),
    ("rp_filter", Unit::Plain),
    ("rp_filter_all", Unit::Plain),
    ("rp_filter_iface", Unit::Plain),
    ("reordering_metric", Unit::Plain),
];

/// Evidence whose values are text, flags or lists of text.
const TEXT: &[&str] = &[
    "bond",
    "bond_members",
    "bond_mode",
    "bridge",
    "broken_direction",
    "busiest",
    "busiest_member",
    "cc",
    "clamping_rule_covering",
    "clamping_rule_present",
    "daemon",
    "default_cc",
    "ecmp_route",
    "derp_servers",
    "endpoint",
    "hash_policy",
    "host",
    "iface",
    "leaked_source",
    "limited_by",
    "masquerade_rule",
    "measured",
    "members",
    "mode",
    "name",
    "nexthops",
    "path",
    "peer",
    "ports",
    "probe_blackhole",
    "probe_family",
    "probe_target",
    "receiver",
    "route",
    "tunnel_sources",
    "underlay_bond_mode",
    "uplink",
    "uplinks",
    "xmit_hash_policy",
];

/// Suffixes of counts: `leaked_packets`, `oversize_drops`, `initiations_sent` ...
const COUNT_SUFFIXES: &[&str] = &[
    "_packets",
    "_flows",
    "_segments",
    "_drops",
    "_fragments",
    "_connections",
    "_retransmits",
    "_sent",
    "_received",
    "_unanswered",
    "_unconfirmed",
    "_answered",
    "_evictions",
    "_events",
    "_capacity",
];

/// The unit of the evidence called `name`, or None for a name that follows no convention
/// (a test holds every built-in rule to one).
pub fn unit_of(name: &str) -> Option<Unit> {
    if let Some((_, unit)) = NAMED.iter().find(|(n, _)| *n == name) {
        return Some(*unit);
    }
    if TEXT.contains(&name) {
        return Some(Unit::Text);
    }
    let has = |s: &str| name.ends_with(s);
    let unit = if has("_bytes") {
        Unit::Bytes
    } else if has("_kib") {
        Unit::Kib
    } else if has("_ratio") || has("_share") {
        Unit::Ratio
    } else if name.split('_').any(|w| w == "percent") {
        Unit::Percent
    } else if has("_per_s") {
        Unit::PerSecond
    } else if has("_ms") {
        Unit::Millis
    } else if has("_s") {
        Unit::Seconds
    } else if has("_mbps") {
        Unit::MbitRate
    } else if has("_bps") {
        Unit::BitRate
    } else if has("_mtu") {
        Unit::Plain
    } else if COUNT_SUFFIXES.iter().any(|s| has(s)) {
        Unit::Count
    } else {
        return None;
    };
    Some(unit)
}

/// The text report's evidence: `name=value, ...`, each value in its unit.
#[cfg(test)]
pub fn evidence_line(evidence: &BTreeMap<String, Value>) -> String {
    evidence_line_with(evidence, &BTreeMap::new())
}

/// The same, an unknown value whose reason `unknown` gives printed `n/a (REASON)`.
pub fn evidence_line_with(
    evidence: &BTreeMap<String, Value>,
    unknown: &BTreeMap<String, String>,
) -> String {
    evidence
        .iter()
        .map(|(k, v)| match unknown.get(k) {
            Some(why) if is_unknown_value(v) => format!("{k}={NA} ({why})"),
            _ => format!("{k}={}", value(k, v)),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Whether an evidence value is the "unknown" of the facts: `-1`, `""` or null.
pub fn is_unknown_value(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Number(n) => n.as_f64().is_some_and(is_unknown),
        _ => false,
    }
}

/// One evidence value in its unit; a name of no known convention prints the value as
/// it is (JSON), unknowns as `n/a`.
pub fn value(name: &str, v: &Value) -> String {
    match v {
        Value::Null => NA.to_owned(),
        Value::String(s) if s.is_empty() => NA.to_owned(),
        Value::String(s) => s.clone(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => match n.as_f64() {
            Some(x) if is_unknown(x) => NA.to_owned(),
            Some(x) => number(unit_of(name).unwrap_or(Unit::Plain), x),
            None => n.to_string(),
        },
        Value::Array(items) if items.is_empty() => "none".to_owned(),
        Value::Array(items) => {
            let parts: Vec<String> = items.iter().map(|i| value(name, i)).collect();
            if items.iter().any(Value::is_object) {
                format!("[{}]", parts.join("; "))
            } else {
                parts.join(" ")
            }
        }
        Value::Object(fields) => {
            let parts: Vec<String> = fields
                .iter()
                .map(|(k, v)| format!("{k} {}", value(k, v)))
                .collect();
            parts.join(" ")
        }
    }
}

/// The `-1` convention of facts and evidence (as an integer or a float).
fn is_unknown(x: f64) -> bool {
    x == -1.0 || !x.is_finite()
}

/// A known number in `unit`.
pub fn number(unit: Unit, x: f64) -> String {
    match unit {
        Unit::Bytes => bytes(x),
        Unit::Kib => bytes(x * 1024.0),
        Unit::Ratio => percent(x * 100.0),
        Unit::Percent => percent(x),
        Unit::Millis => millis(x),
        Unit::Seconds => seconds(x),
        Unit::BitRate => bit_rate(x),
        Unit::MbitRate => bit_rate(x * 1e6),
        Unit::PerSecond => format!("{}/s", count(x)),
        Unit::Count => count(x),
        Unit::Plain | Unit::Text => plain(x),
    }
}

/// Three significant digits at most: 1.23, 12.3, 123.
fn compact(x: f64) -> String {
    let a = x.abs();
    if a >= 99.95 {
        format!("{x:.0}")
    } else if a >= 9.995 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    }
}

/// `x` scaled by powers of `base` with the unit names `units` (the first for `x` itself).
fn scaled(x: f64, base: f64, units: &[&str]) -> String {
    let mut v = x;
    let mut i = 0;
    while v.abs() >= base && i + 1 < units.len() {
        v /= base;
        i += 1;
    }
    if i == 0 {
        format!("{} {}", plain(v), units[0])
    } else {
        format!("{} {}", compact(v), units[i])
    }
}

/// Bytes, IEC: 1536 → "1.50 KiB", 15848054 → "15.1 MiB".
pub fn bytes(x: f64) -> String {
    scaled(x, 1024.0, &["B", "KiB", "MiB", "GiB", "TiB", "PiB"])
}

/// Bits per second, SI: 12300000 → "12.3 Mbit/s".
pub fn bit_rate(x: f64) -> String {
    scaled(
        x,
        1000.0,
        &["bit/s", "kbit/s", "Mbit/s", "Gbit/s", "Tbit/s"],
    )
}

/// A percentage: 4.2 → "4.2 %", 0.25 → "0.25 %", 0 → "0 %".
pub fn percent(p: f64) -> String {
    if p == 0.0 {
        "0 %".to_owned()
    } else if p.abs() >= 1.0 {
        format!("{p:.1} %")
    } else {
        format!("{p:.2} %")
    }
}

/// Milliseconds: 12.34 → "12.3 ms", 0.25 → "250 µs", 1500 → "1.50 s".
pub fn millis(ms: f64) -> String {
    if ms.abs() >= 1000.0 {
        seconds(ms / 1000.0)
    } else if ms.abs() < 1.0 && ms != 0.0 {
        format!("{:.0} µs", ms * 1000.0)
    } else {
        format!("{} ms", compact(ms))
    }
}

/// Seconds: 5 → "5 s", 2.5 → "2.50 s", 200 → "3 min 20 s", 7500 → "2 h 5 min", 3 days → "3 d".
pub fn seconds(s: f64) -> String {
    if s.abs() < 60.0 {
        return if s.fract() == 0.0 {
            format!("{s:.0} s")
        } else {
            format!("{} s", compact(s))
        };
    }
    // Whole seconds from here: under 2^53, the cast is exact.
    let t = s.round() as i64;
    let (big, small, unit_big, unit_small) = if t < 3600 {
        (t / 60, t % 60, "min", "s")
    } else if t < 86_400 {
        (t / 3600, (t % 3600) / 60, "h", "min")
    } else {
        (t / 86_400, (t % 86_400) / 3600, "d", "h")
    };
    if small == 0 {
        format!("{big} {unit_big}")
    } else {
        format!("{big} {unit_big} {small} {unit_small}")
    }
}

/// A count with thousands separators: 70527 → "70,527"; a fraction keeps 3 digits.
pub fn count(x: f64) -> String {
    if x.fract() != 0.0 && x.abs() < 1000.0 {
        return compact(x);
    }
    // Rounded, under 2^63 in any real count.
    let n = x.round() as i64;
    let digits = n.unsigned_abs().to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3 + 1);
    if n < 0 {
        out.push('-');
    }
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A number as it is, without a trailing ".0": 1420 → "1420", 0.5 → "0.5".
fn plain(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{x:.0}")
    } else {
        x.to_string()
    }
}

#[cfg(test)]
mod tests;

//! The text report of `netdoctor diagnose IFACE`: the facts that matter, then the findings
//! with their evidence and fix.

use crate::diagnose::Report;
use crate::rules::finding::{Finding, Severity};
use crate::rules::units::{count, NA};

/// Width of the text report when stdout is not a terminal (a pipe, a file, a mail).
pub(super) const PIPE_WIDTH: usize = 100;

/// The busiest local connections the text report lists with their limits (`--json` has all).
const CONNECTIONS_SHOWN: usize = 8;

/// Indent of a finding's second and further lines, under its id.
const FINDING_INDENT: &str = "         ";

/// `text` wrapped to `width` columns, every line after the first indented by `indent`.
/// Commands (a finding's fix) are never wrapped: they are meant to be copied whole.
fn wrapped(text: &str, width: usize, indent: &str) -> String {
    let options = textwrap::Options::new(width.max(40))
        .subsequent_indent(indent)
        .break_words(false);
    textwrap::fill(text, options)
}

pub(super) fn paint(text: &str, severity: Severity, color: bool) -> String {
    if !color {
        return text.to_owned();
    }
    let code = match severity {
        Severity::Critical => "1;31",
        Severity::Warning => "1;33",
        Severity::Info => "1;36",
    };
    format!("\x1b[{code}m{text}\x1b[0m")
}

pub(super) fn print(r: &Report, color: bool, width: usize) {
    let f = &r.facts;
    println!(
        "{} ({}), MTU {}, observed {:.1}s",
        r.interface, r.kind, f.iface.mtu, r.duration_s
    );
    if f.tunnel.present {
        print_tunnel(f);
    }
    if let Some(line) = daemon_line(f) {
        println!("{}", wrapped(&line, width, "          "));
    }
    if f.probe.ran {
        println!(
            "  probe: path MTU {} toward {}{}",
            f.probe.path_mtu,
            f.probe.target,
            if f.probe.blackhole {
                " (BLACKHOLE: larger packets vanish silently)"
            } else {
                ""
            }
        );
    }
    println!(
        "  traffic: {} segments in, {} out; TCP retransmitted {:.2} %; drops {}",
        known_count(f.traffic.rx_segments as f64),
        known_count(f.traffic.tx_segments as f64),
        f.traffic.tcp_retrans_ratio * 100.0,
        known_count(f.drops.total as f64)
    );
    for line in super::limits::connection_lines(&f.flows, CONNECTIONS_SHOWN) {
        println!("{}", wrapped(&line, width, "        "));
    }
    for n in &r.notes {
        println!("{}", wrapped(&format!("  note: {n}"), width, "        "));
    }
    println!();
    print_findings(&r.findings, color, width);
}

/// The tunnel's lines: underlay, overhead, and one line per peer (and its path).
fn print_tunnel(f: &crate::facts::Facts) {
    let t = &f.tunnel;
    println!(
        "  tunnel: {} over {}, underlay {} (route MTU {}{})",
        t.kind,
        t.family,
        if t.underlay_iface.is_empty() {
            "unknown"
        } else {
            &t.underlay_iface
        },
        t.underlay_mtu,
        if t.path_mtu > 0 {
            format!(", probed path MTU {}", t.path_mtu)
        } else {
            String::new()
        }
    );
    println!(
        "  overhead: expected {} bytes, measured {}; largest MTU that fits: {}",
        t.overhead_expected,
        if t.overhead_measured >= 0 {
            format!("{} bytes", t.overhead_measured)
        } else {
            "n/a (no unfragmented full-size traffic seen)".into()
        },
        t.max_mtu
    );
    for p in &f.peers {
        let hs = match p.handshake_age_s {
            -1 => String::new(),
            s => format!(", handshake {s} s ago"),
        };
        let host = if p.host.is_empty() {
            String::new()
        } else {
            format!(" ({})", p.host)
        };
        let path = match p.path.as_str() {
            "" => String::new(),
            "derp" => format!(", relayed by DERP region {}", p.derp_region),
            "peer_relay" => ", relayed by a peer relay".to_owned(),
            other => format!(", {other}"),
        };
        println!("  peer {}{host} {}{path}{hs}", p.name, p.endpoint);
        if let Some(line) = super::path_output::peer_line(p) {
            println!("    {line}");
        }
    }
}

/// The findings as the text report prints them: severity, id and summary, then evidence in
/// units, the fix and the reference; "No problems found." when there are none.
pub(super) fn print_findings(findings: &[Finding], color: bool, width: usize) {
    if findings.is_empty() {
        println!("No problems found.");
        return;
    }
    for finding in findings {
        let label = paint(
            &format!("{:<8}", finding.severity.to_string().to_uppercase()),
            finding.severity,
            color,
        );
        // The label's colour codes take no columns: wrap the plain text, then paint.
        let plain = format!(
            "{:<8} {}  {}",
            finding.severity.to_string().to_uppercase(),
            finding.id,
            finding.summary
        );
        let text = wrapped(&plain, width, FINDING_INDENT);
        println!("{label}{}", &text[8..]);
        if !finding.evidence.is_empty() {
            let ev = crate::rules::units::evidence_line_with(&finding.evidence, &finding.unknown);
            let line = format!("{FINDING_INDENT}evidence: {ev}");
            println!("{}", wrapped(&line, width, FINDING_INDENT));
        }
        println!("         fix: {}", finding.fix);
        if let Some(url) = &finding.reference {
            println!("         see: {url}");
        }
        println!();
    }
}

/// A count with thousands separators, `n/a` for the facts' unknown (negative).
fn known_count(x: f64) -> String {
    if x < 0.0 {
        NA.to_owned()
    } else {
        count(x)
    }
}

/// How much CPU a limit of `percent` (of one core) is: "one core", "2 cores", "0.20 core".
fn cores(percent: f64) -> String {
    let cores = percent / 100.0;
    if (cores - 1.0).abs() < 0.005 {
        "one core".to_owned()
    } else if cores.fract().abs() < 0.005 {
        format!("{cores:.0} cores")
    } else {
        format!("{cores:.2} core")
    }
}

/// The line under the tunnel about its daemon's CPU: "daemon: fastd (pid 812, uid 0) used
/// 97.0 % of one core (its limit: one core, single-threaded) ...". None without a daemon.
fn daemon_line(f: &crate::facts::Facts) -> Option<String> {
    let l = &f.tunnel.load;
    if l.daemon_pid < 0 {
        return None;
    }
    let who = format!(
        "  daemon: {} (pid {}, uid {})",
        f.tunnel.daemon, l.daemon_pid, l.daemon_uid
    );
    if l.daemon_cpu_percent < 0.0 || l.daemon_cpu_limit_percent <= 0.0 {
        return Some(format!("{who}: CPU use not measured (see the notes)"));
    }
    let limit = cores(l.daemon_cpu_limit_percent);
    let why = match l.daemon_cpu_limited_by.as_str() {
        "threads" if l.daemon_busy_threads <= 1 => "single-threaded".to_owned(),
        "threads" => format!("{} threads ran", l.daemon_busy_threads),
        "cpus" => format!("the host's {} online CPUs", f.host.cpus_online),
        "affinity" => "its CPU affinity".to_owned(),
        "quota" => "its cgroup's CPU quota".to_owned(),
        other => other.to_owned(),
    };
    let mut line = format!(
        "{who} used {:.1} % of one core, {:.0} % of what it can get (its limit: {limit}, {why})",
        l.daemon_cpu_percent, l.daemon_cpu_of_limit_percent
    );
    if l.throughput_mbps >= 0.0 {
        line.push_str(&format!(
            "; the interface carried {:.1} Mbit/s, {} packets/s",
            l.throughput_mbps,
            known_count(l.packets_per_s.round())
        ));
    }
    if f.host.cpu_busy_percent >= 0.0 {
        line.push_str(&format!(
            "; the host's CPUs were {:.0} % busy",
            f.host.cpu_busy_percent
        ));
    }
    Some(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_daemon_line_says_what_it_used_and_could_get() {
        let mut f = crate::facts::Facts::default();
        assert_eq!(daemon_line(&f), None, "no daemon, no line");
        f.tunnel.daemon = "fastd".into();
        f.tunnel.load.daemon_pid = 812;
        f.tunnel.load.daemon_uid = 0;
        assert_eq!(
            daemon_line(&f).as_deref(),
            Some("  daemon: fastd (pid 812, uid 0): CPU use not measured (see the notes)")
        );
        let cpu = crate::config::cpu::DaemonCpu {
            percent: 97.0,
            limit_percent: 100.0,
            limited_by: crate::config::cpu::LimitedBy::Threads,
            threads: 1,
            busy_threads: 1,
        };
        f.tunnel.load.set_cpu(&cpu);
        f.tunnel.load.throughput_mbps = 512.25;
        f.tunnel.load.packets_per_s = 45000.0;
        f.host.cpu_busy_percent = 60.0;
        assert_eq!(
            daemon_line(&f).as_deref(),
            Some(
                "  daemon: fastd (pid 812, uid 0) used 97.0 % of one core, 97 % of what it can \
                 get (its limit: one core, single-threaded); the interface carried 512.2 \
                 Mbit/s, 45,000 packets/s; the host's CPUs were 60 % busy"
            )
        );
        f.tunnel.load.daemon_cpu_limit_percent = 20.0;
        f.tunnel.load.daemon_cpu_limited_by = "quota".into();
        let line = daemon_line(&f).unwrap_or_default();
        assert!(
            line.contains("(its limit: 0.20 core, its cgroup's CPU quota)"),
            "{line}"
        );
        assert_eq!(cores(200.0), "2 cores");
    }
}

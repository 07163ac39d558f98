//! `netdoctor diagnose IFACE`: the main job.

use std::io::IsTerminal;
use std::process::ExitCode;

use super::DiagnoseArgs;
use crate::diagnose::{self, DiagnoseOptions, Progress, Report};
use crate::rules::finding::Severity;

struct Stderr;

impl Progress for Stderr {
    fn step(&self, message: &str) {
        eprintln!("netdoctor: {message}");
    }
}

pub(super) async fn run(args: DiagnoseArgs) -> anyhow::Result<ExitCode> {
    let opts = DiagnoseOptions {
        duration: args.duration,
        probe: !args.no_probe,
        rules_dir: args.rules.clone(),
        dataplane: args.dataplane.options()?,
    };
    let report = diagnose::diagnose(&args.interface, &opts, &Stderr).await?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        let terminal = std::io::stdout().is_terminal();
        let width = if terminal {
            textwrap::termwidth()
        } else {
            PIPE_WIDTH
        };
        print(&report, terminal, width);
    }
    Ok(ExitCode::from(
        report.worst().map_or(0, Severity::exit_code),
    ))
}

/// Width of the text report when stdout is not a terminal (a pipe, a file, a mail).
const PIPE_WIDTH: usize = 100;

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

fn paint(text: &str, severity: Severity, color: bool) -> String {
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

fn print(r: &Report, color: bool, width: usize) {
    let f = &r.facts;
    println!(
        "{} ({}), MTU {}, observed {:.1}s",
        r.interface, r.kind, f.iface.mtu, r.duration_s
    );
    if f.tunnel.present {
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
        }
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
        f.traffic.rx_segments,
        f.traffic.tx_segments,
        f.traffic.tcp_retrans_ratio * 100.0,
        f.drops.total
    );
    for n in &r.notes {
        println!("{}", wrapped(&format!("  note: {n}"), width, "        "));
    }
    println!();
    if r.findings.is_empty() {
        println!("No problems found.");
        return;
    }
    for finding in &r.findings {
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
            let ev: Vec<String> = finding
                .evidence
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            let line = format!("{FINDING_INDENT}evidence: {}", ev.join(", "));
            println!("{}", wrapped(&line, width, FINDING_INDENT));
        }
        println!("         fix: {}", finding.fix);
        if let Some(url) = &finding.reference {
            println!("         see: {url}");
        }
        println!();
    }
}

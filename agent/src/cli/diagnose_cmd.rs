//! `netdoctor diagnose [IFACE...]`: the main job. One interface named prints its report;
//! none (or `--all`) or several print a line per interface, then each report
//! ([`super::diagnose_many`]). The exit code is the worst finding's.

use std::io::IsTerminal;
use std::process::ExitCode;

use futures::future::BoxFuture;

use super::diagnose_many::Many;
use super::shutdown::Interrupts;
use super::DiagnoseArgs;
use crate::diagnose::{self, DiagnoseOptions, Progress};
use crate::rules::finding::Severity;

/// Progress on stderr; the first Ctrl-C of the observation ends it early.
struct Stderr(Interrupts);

impl Progress for Stderr {
    fn step(&self, message: &str) {
        eprintln!("netdoctor: {message}");
    }

    fn stop_early(&self) -> BoxFuture<'_, ()> {
        Box::pin(self.0.stop_early())
    }
}

pub(super) async fn run(args: DiagnoseArgs, interrupts: Interrupts) -> anyhow::Result<ExitCode> {
    let progress = Stderr(interrupts);
    let opts = DiagnoseOptions {
        duration: args.duration,
        probe: !args.no_probe,
        rules_dir: args.rules.clone(),
        dataplane: args.dataplane.options()?,
    };
    let (color, width) = text_style();
    if let [name] = args.interfaces.as_slice() {
        // One interface named: its report alone, as it always was.
        let report = diagnose::diagnose(name, &opts, &progress).await?;
        if args.json {
            println!("{}", serde_json::to_string_pretty(&report)?);
        } else {
            super::diagnose::print(&report, color, width);
        }
        return Ok(ExitCode::from(
            report.worst().map_or(0, Severity::exit_code),
        ));
    }
    let names = if args.interfaces.is_empty() {
        diagnose::every_interface().await?
    } else {
        args.interfaces.clone()
    };
    let reports = diagnose::diagnose_many(&names, &opts, &progress).await?;
    let many = Many::new(reports);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&many)?);
    } else {
        many.print(color, width);
    }
    Ok(ExitCode::from(many.worst.map_or(0, Severity::exit_code)))
}

/// Whether to colour the text report, and its width: the terminal's, or [`PIPE_WIDTH`].
pub(super) fn text_style() -> (bool, usize) {
    let terminal = std::io::stdout().is_terminal();
    let width = if terminal {
        textwrap::termwidth()
    } else {
        super::diagnose::PIPE_WIDTH
    };
    (terminal, width)
}

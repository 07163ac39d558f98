//! Running the `netdoctor` binary: where it is, runs to completion, and watches in the
//! background that end in a report.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use nix::sys::signal::Signal;

use super::{Report, START_TIMEOUT, WATCHING};
use crate::cmd::{self, BgProcess};
use crate::netns::Netns;

/// The `netdoctor` binary: `$NETDOCTOR_BIN` if set, otherwise `netdoctor`
/// in the `target/<profile>/` directory the running test executable lives
/// under (test binaries are in `target/<profile>/deps/`).
///
/// Errors (telling to run `cargo build -p netdoctor`) when it does not exist.
pub fn binary() -> Result<PathBuf> {
    if let Some(path) = std::env::var_os("NETDOCTOR_BIN") {
        let path = PathBuf::from(path);
        if !path.is_file() {
            bail!(
                "NETDOCTOR_BIN={} does not name a file; build it with `cargo build -p netdoctor`",
                path.display()
            );
        }
        return Ok(path);
    }
    let exe = std::env::current_exe().context("locating the running test executable")?;
    let mut searched = Vec::new();
    for dir in exe.ancestors().skip(1) {
        let candidate = dir.join("netdoctor");
        if candidate.is_file() {
            return Ok(candidate);
        }
        searched.push(candidate);
        // Stop at `target/<profile>`: its parent is the target directory.
        if dir.parent().and_then(Path::file_name) == Some("target".as_ref()) {
            break;
        }
    }
    bail!(
        "netdoctor binary not found (looked at {}); run `cargo build -p netdoctor` first, \
         or point NETDOCTOR_BIN at it",
        searched
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// Runs netdoctor with `args` to completion inside `ns` (or in the host
/// namespace when `ns` is `None`) and returns its output, whatever the exit
/// status.
pub fn run(ns: Option<&Netns>, args: &[&str], timeout: Duration) -> Result<Output> {
    let bin = binary()?;
    let mut command = match ns {
        Some(ns) => ns.command(&bin.to_string_lossy(), args),
        None => {
            let mut c = std::process::Command::new(&bin);
            c.args(args);
            c
        }
    };
    cmd::output_timeout(&mut command, timeout)
}

/// A netdoctor running in the background inside a namespace.
#[derive(Debug)]
pub struct Watch {
    process: BgProcess,
}

impl Watch {
    /// Starts `netdoctor ARGS...` inside `ns` and waits until it printed
    /// [`WATCHING`], i.e. its programs are attached.
    pub fn start(ns: &Netns, args: &[&str]) -> Result<Watch> {
        let bin = binary()?;
        let label = format!("netdoctor {}", args.join(" "));
        let command = ns.command(&bin.to_string_lossy(), args);
        let mut process = ns.spawn_command(&label, command)?;
        process.wait_for_output(WATCHING, START_TIMEOUT)?;
        Ok(Watch { process })
    }

    /// The process (e.g. to send SIGKILL).
    pub fn process_mut(&mut self) -> &mut BgProcess {
        &mut self.process
    }

    /// Everything netdoctor wrote to stderr so far.
    pub fn stderr(&self) -> Result<String> {
        self.process.stderr()
    }

    /// Waits up to `timeout` for netdoctor to finish by itself (its
    /// `--duration` elapsed), requires exit status 0 and parses its JSON.
    pub fn wait_report(mut self, timeout: Duration) -> Result<Report> {
        let status = self.process.wait_timeout(timeout)?;
        self.report(status)
    }

    /// Sends SIGINT (Ctrl-C), which makes netdoctor report what it has seen
    /// so far, then waits for the report like [`Watch::wait_report`].
    pub fn interrupt(mut self) -> Result<Report> {
        self.process.signal(Signal::SIGINT)?;
        let status = self.process.wait_timeout(Duration::from_secs(20))?;
        self.report(status)
    }

    fn report(&self, status: std::process::ExitStatus) -> Result<Report> {
        let stdout = self.process.stdout()?;
        let stderr = self.process.stderr()?;
        if !status.success() {
            bail!(
                "`{}` exited with {status}; stderr: {} stdout: {}",
                self.process.label(),
                stderr.trim(),
                stdout.trim()
            );
        }
        Report::parse(&stdout)
            .with_context(|| format!("report of `{}`; stderr: {}", self.process.label(), stderr))
    }
}

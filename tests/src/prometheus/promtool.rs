//! `promtool` runs: linting a metrics exposition, checking rule files, running the rules'
//! unit tests.

use std::fs::File;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use tempfile::NamedTempFile;

use super::PROMTOOL;
use crate::cmd;

/// Timeout of one `promtool` run.
const PROMTOOL_TIMEOUT: Duration = Duration::from_secs(60);

/// Runs `promtool check metrics` on a Prometheus text exposition and returns its
/// complaints, one per line (empty: the text is clean). A text that does not parse gives
/// the parse error as the complaint.
///
/// Errors: `promtool` cannot run, or exits with a status other than 0 (clean),
/// 3 (lint problems) or 1 (parse error).
pub fn promtool_check_metrics(text: &str) -> Result<Vec<String>> {
    let mut input = NamedTempFile::with_prefix("ndlab-metrics-").context("creating a temp file")?;
    std::io::Write::write_all(&mut input, text.as_bytes()).context("writing the metrics")?;
    let stdin = File::open(input.path()).context("reopening the metrics")?;
    let out = NamedTempFile::with_prefix("ndlab-promtool-").context("creating a temp file")?;
    let out_file = out.reopen().context("opening promtool's output file")?;
    let err_file = out.reopen().context("opening promtool's output file")?;
    let mut child = Command::new(PROMTOOL)
        .args(["check", "metrics"])
        .stdin(Stdio::from(stdin))
        .stdout(out_file)
        .stderr(err_file)
        .spawn()
        .with_context(|| format!("cannot start `{PROMTOOL} check metrics`"))?;
    let deadline = Instant::now() + PROMTOOL_TIMEOUT;
    let status = loop {
        if let Some(status) = child.try_wait().context("waiting for promtool")? {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            bail!("`{PROMTOOL} check metrics` did not finish within {PROMTOOL_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let output = std::fs::read_to_string(out.path()).context("reading promtool's output")?;
    let complaints: Vec<String> = output
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect();
    match status.code() {
        Some(0) => Ok(complaints),
        Some(1 | 3) if !complaints.is_empty() => Ok(complaints),
        _ => bail!(
            "`{PROMTOOL} check metrics` failed ({status}): {}",
            output.trim()
        ),
    }
}

/// Runs `promtool check rules FILES...`; returns its output, or an error carrying it
/// when a file is invalid.
pub fn promtool_check_rules(files: &[PathBuf]) -> Result<String> {
    let mut cmd = Command::new(PROMTOOL);
    cmd.args(["check", "rules"]).args(files);
    run_promtool(cmd)
}

/// Runs `promtool test rules FILES...` (unit tests of alerting rules); returns its
/// output, or an error carrying it when a test fails.
pub fn promtool_test_rules(files: &[PathBuf]) -> Result<String> {
    let mut cmd = Command::new(PROMTOOL);
    cmd.args(["test", "rules"]).args(files);
    run_promtool(cmd)
}

fn run_promtool(mut cmd: Command) -> Result<String> {
    let line = cmd::describe(&cmd);
    let out = cmd::output_timeout(&mut cmd, PROMTOOL_TIMEOUT)?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    ensure!(
        out.status.success(),
        "`{line}` failed ({}):\n{text}",
        out.status
    );
    Ok(text)
}

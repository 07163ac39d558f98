//! `netdoctor rules eval`: the rules against a saved report, offline. A real diagnosis of a
//! namespace's loopback is the report; the same facts with 5 % of 5,000 segments
//! retransmitted are the fault, the report as it came the healthy twin, and a report that
//! lacked the fact leaves the rule not evaluated rather than healthy.

use std::time::Duration;

use anyhow::{ensure, Context, Result};
use netdoctor_lab::netdoctor;
use netdoctor_lab::{lab_guard, Netns};
use serde_json::{json, Value};

const RETRANS: &str = "tcp.high_retransmits";

/// `netdoctor rules eval` on `report` with `args`: exit code, stdout, stderr.
fn eval(dir: &tempfile::TempDir, report: &Value, args: &[&str]) -> Result<(i32, String, String)> {
    let path = dir.path().join("report.json");
    std::fs::write(&path, serde_json::to_vec(report)?)?;
    let path = path.to_string_lossy().into_owned();
    let mut argv = vec!["rules", "eval", path.as_str()];
    argv.extend_from_slice(args);
    let out = netdoctor::run(None, &argv, Duration::from_secs(30))?;
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    Ok((
        out.status.code().unwrap_or(-1),
        text(&out.stdout),
        text(&out.stderr),
    ))
}

#[test]
fn rules_eval_decides_a_saved_report_as_diagnose_did() -> Result<()> {
    lab_guard!();
    let ns = Netns::new()?;
    let args = ["diagnose", "lo", "--json", "--duration", "1s", "--no-probe"];
    let out = netdoctor::run(Some(&ns), &args, Duration::from_secs(60))?;
    let mut report: Value = serde_json::from_slice(&out.stdout)
        .with_context(|| String::from_utf8_lossy(&out.stderr).into_owned())?;
    let dir = tempfile::tempdir()?;

    // The twin: the report as it came decides as diagnose did.
    let (rc, stdout, stderr) = eval(&dir, &report, &["--json"])?;
    ensure!(rc == out.status.code().unwrap_or(-1), "rc {rc}: {stderr}");
    let again: Value = serde_json::from_str(&stdout)?;
    ensure!(
        again["findings"] == report["findings"],
        "{again} against {report}"
    );
    ensure!(!stdout.contains(RETRANS), "{stdout}");

    // The fault: 5 % of 5,000 segments retransmitted, none needlessly.
    let traffic = &mut report["facts"]["traffic"];
    traffic["tcp_segments"] = json!(5000);
    traffic["tcp_retransmits"] = json!(250);
    traffic["tcp_retrans_ratio"] = json!(0.05);
    let (rc, stdout, stderr) = eval(&dir, &report, &["--rule", RETRANS])?;
    ensure!(rc == 1, "a warning exits 1, not {rc}: {stdout}{stderr}");
    ensure!(
        stdout.contains(&format!("WARNING  {RETRANS}")) && stdout.contains("loss_percent=5.0 %"),
        "{stdout}"
    );
    let (rc, stdout, _) = eval(&dir, &report, &["--rule", "tcp.reordering"])?;
    ensure!(
        rc == 0 && stdout.contains("No problems found."),
        "only the rule asked: {stdout}"
    );

    // A report that lacked the ratio: the rule is not evaluated, not healthy.
    report["not_evaluated"] = json!([{"rule": RETRANS, "missing": ["traffic.tcp_retrans_ratio"]}]);
    let (rc, stdout, stderr) = eval(&dir, &report, &["--rule", RETRANS, "--json"])?;
    let v: Value = serde_json::from_str(&stdout).with_context(|| stderr.clone())?;
    ensure!(rc == 0 && v["findings"] == json!([]), "{v}");
    ensure!(v["not_evaluated"][0]["rule"] == RETRANS, "{v}");

    // Bad input: a clear error and exit 3.
    let (rc, _, stderr) = eval(&dir, &json!({"findings": []}), &[])?;
    ensure!(
        rc == 3 && stderr.contains("not a diagnose report"),
        "{rc}: {stderr}"
    );
    Ok(())
}

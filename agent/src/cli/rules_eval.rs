//! `netdoctor rules eval REPORT`: the rules against a saved report's facts, offline.
//!
//! A rule author captures a case once (`diagnose --json`, on the host with the problem) and
//! tries rules on it anywhere, with the engine `diagnose` and the agent run: the same partial
//! evaluation, so facts the report lacked (its `not_evaluated`) stay missing and the rules
//! reading them are reported as not evaluated, never as healthy.

use std::collections::BTreeSet;
use std::io::Read;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{bail, Context};
use serde_json::Value;

use crate::rules::finding::Severity;
use crate::rules::{self, RuleSet};

/// The largest report read: a diagnosis of a busy gateway (thousands of connections) is a
/// few MiB; anything larger is not a report.
const MAX_REPORT: u64 = 64 << 20;

pub(super) fn run(
    report: &Path,
    rules_dir: Option<&Path>,
    only: &[String],
    json: bool,
) -> anyhow::Result<ExitCode> {
    let doc = read_report(report)?;
    let (facts, missing) =
        facts_of(&doc).with_context(|| format!("{}: not a diagnose report", report.display()))?;
    let set = match rules_dir {
        Some(dir) => RuleSet::with_user_dir(dir),
        None => RuleSet::builtin(),
    }
    .map_err(|errors| {
        let lines: Vec<String> = errors.iter().map(|e| format!("error: {e}")).collect();
        anyhow::anyhow!("{}", lines.join("\n"))
    })?;
    check_ids(&set, only)?;
    let mut eval = rules::evaluate_partial(&set, facts, &missing);
    if !only.is_empty() {
        eval.findings.retain(|f| only.contains(&f.id));
        eval.not_evaluated.retain(|n| only.contains(&n.rule));
    }
    if json {
        let out = serde_json::json!({
            "findings": eval.findings,
            "not_evaluated": eval.not_evaluated,
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        for n in &eval.not_evaluated {
            println!(
                "rule {} not evaluated: missing {}",
                n.rule,
                n.missing.join(", ")
            );
        }
        let (color, width) = super::diagnose_cmd::text_style();
        super::diagnose::print_findings(&eval.findings, color, width);
    }
    let worst = rules::finding::worst(&eval.findings);
    Ok(ExitCode::from(worst.map_or(0, Severity::exit_code)))
}

/// The document at `path` (`-`: stdin), at most [`MAX_REPORT`] bytes.
fn read_report(path: &Path) -> anyhow::Result<Value> {
    let mut text = Vec::new();
    let what = path.display();
    if path == Path::new("-") {
        std::io::stdin()
            .take(MAX_REPORT + 1)
            .read_to_end(&mut text)
            .context("reading the report from stdin")?;
    } else {
        std::fs::File::open(path)
            .with_context(|| format!("opening {what}"))?
            .take(MAX_REPORT + 1)
            .read_to_end(&mut text)
            .with_context(|| format!("reading {what}"))?;
    }
    if text.len() as u64 > MAX_REPORT {
        bail!("{what}: larger than {} MiB, not a report", MAX_REPORT >> 20);
    }
    serde_json::from_slice(&text).with_context(|| format!("{what}: not JSON"))
}

/// The facts of a report (its `facts`, or the document itself when it is a facts document)
/// and the facts it lacked: every `missing` of its `not_evaluated`.
fn facts_of(doc: &Value) -> anyhow::Result<(&Value, Vec<String>)> {
    let facts = doc.get("facts").unwrap_or(doc);
    if !facts.is_object() || facts.get("iface").is_none() {
        bail!("neither a `facts` object nor a facts document (no `iface`)");
    }
    let missing: BTreeSet<String> = doc
        .get("not_evaluated")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|n| n.get("missing").and_then(Value::as_array))
        .flatten()
        .filter_map(|m| m.as_str().map(str::to_owned))
        .collect();
    Ok((facts, missing.into_iter().collect()))
}

/// Every id in `only` names a rule of `set`.
fn check_ids(set: &RuleSet, only: &[String]) -> anyhow::Result<()> {
    let unknown: Vec<&String> = only
        .iter()
        .filter(|id| !set.rules().iter().any(|r| &r.id == *id))
        .collect();
    if unknown.is_empty() {
        return Ok(());
    }
    let known: Vec<&str> = set.rules().iter().map(|r| r.id.as_str()).collect();
    bail!(
        "no rule {} (`netdoctor rules list` shows them: {})",
        unknown
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join(", "),
        known.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_gives_its_facts_and_what_it_lacked() {
        let doc = serde_json::json!({
            "interface": "wg0",
            "facts": {"iface": {"name": "wg0"}},
            "not_evaluated": [
                {"rule": "a", "missing": ["drops.forwarding", "probe.path_mtu"]},
                {"rule": "b", "missing": ["drops.forwarding"]}
            ]
        });
        let (facts, missing) = facts_of(&doc).expect("a report");
        assert_eq!(facts["iface"]["name"], "wg0");
        assert_eq!(missing, ["drops.forwarding", "probe.path_mtu"]);
        let bare = serde_json::json!({"iface": {"name": "eth0"}});
        let (facts, missing) = facts_of(&bare).expect("a facts document");
        assert_eq!(facts["iface"]["name"], "eth0");
        assert!(missing.is_empty());
        assert!(facts_of(&serde_json::json!({"findings": []})).is_err());
        assert!(facts_of(&serde_json::json!([1, 2])).is_err());
    }

    #[test]
    fn an_unknown_rule_id_is_refused_naming_the_known_ones() {
        let set = RuleSet::builtin().expect("built-in rules");
        assert!(check_ids(&set, &["tcp.high_retransmits".into()]).is_ok());
        let e = check_ids(&set, &["tcp.high_retransmit".into()]).expect_err("a misspelt id");
        let e = e.to_string();
        assert!(
            e.contains("no rule tcp.high_retransmit ") && e.contains("tcp.reordering"),
            "{e}"
        );
    }
}

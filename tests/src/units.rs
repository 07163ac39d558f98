//! The check of issue 35 on real rendered reports: a person reads every number of a
//! finding's message and evidence in its unit. [`check_text_report`] takes the text report
//! of `netdoctor diagnose`, [`check_messages`] the findings of a `--json` report (whose
//! messages are the same rendered texts; its evidence stays raw by design).
//!
//! A problem is a `-1` (the "unknown" of the facts: it must read `n/a`) or an integer above
//! 9,999 without separators (a count, bytes or a rate printed raw). Ports (`:41641`,
//! `port=41641`) are numbers people read as they are and pass; digits inside a word (a key,
//! a hex id) are not numbers. Fix and `see:` lines are commands and links: not checked.

use anyhow::{bail, Result};
use serde_json::Value;

/// The problems in one message or evidence text, each naming the number.
pub fn problems(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if !chars[i].is_ascii_digit() {
            i += 1;
            continue;
        }
        let start = i;
        while i < chars.len() && chars[i].is_ascii_digit() {
            i += 1;
        }
        let before = start.checked_sub(1).map(|b| chars[b]);
        let after = chars.get(i).copied();
        let in_word = before.is_some_and(|c| c.is_alphanumeric() || c == '_')
            || after.is_some_and(|c| c.is_alphanumeric() || c == '_');
        if in_word {
            continue;
        }
        let run: String = chars[start..i].iter().collect();
        let prefix: String = chars[..start].iter().collect();
        let minus = before == Some('-')
            && start
                .checked_sub(2)
                .is_none_or(|b| !chars[b].is_alphanumeric() && chars[b] != '.');
        if minus && run == "1" && after != Some('.') {
            out.push(format!("-1 at {:?}", excerpt(&chars, start)));
        }
        let port = before == Some(':') || prefix.ends_with("port=") || prefix.ends_with("port ");
        if run.len() >= 5 && !port {
            out.push(format!("{run} at {:?}", excerpt(&chars, start)));
        }
    }
    out
}

/// The text around `at`, for a message.
fn excerpt(chars: &[char], at: usize) -> String {
    let from = at.saturating_sub(30);
    let to = (at + 30).min(chars.len());
    chars[from..to].iter().collect()
}

/// The lines of a text report's findings that are messages or evidence (with their
/// continuation lines), without the fix and `see:` lines.
pub fn message_and_evidence_lines(report: &str) -> Vec<&str> {
    const LABELS: [&str; 3] = ["CRITICAL ", "WARNING ", "INFO "];
    const INDENT: &str = "         ";
    let mut out = Vec::new();
    let mut inside = false;
    for line in report.lines() {
        if LABELS.iter().any(|l| line.starts_with(l)) {
            inside = true;
        } else if let Some(rest) = line.strip_prefix(INDENT) {
            let rest = rest.trim_start();
            if rest.starts_with("evidence:") {
                inside = true;
            } else if rest.starts_with("fix:") || rest.starts_with("see:") {
                inside = false;
            }
        } else {
            inside = false;
        }
        if inside {
            out.push(line);
        }
    }
    out
}

/// Fails, naming every line and number, unless every finding's message and evidence in
/// the text `report` reads in units; also fails on a report with no finding at all (the
/// check would prove nothing).
pub fn check_text_report(report: &str) -> Result<()> {
    let lines = message_and_evidence_lines(report);
    if lines.is_empty() {
        bail!("no finding in the report, nothing to check:\n{report}");
    }
    let bad: Vec<String> = lines
        .iter()
        .flat_map(|l| {
            problems(l)
                .into_iter()
                .map(move |p| format!("{p} in {l:?}"))
        })
        .collect();
    if !bad.is_empty() {
        bail!(
            "numbers not in human units (issue 35):\n  {}\nreport:\n{report}",
            bad.join("\n  ")
        );
    }
    Ok(())
}

/// The same for the findings of a `--json` report: each summary and subject.
pub fn check_messages(findings: &Value) -> Result<()> {
    let Some(findings) = findings.as_array() else {
        bail!("findings are not a list: {findings}");
    };
    let mut bad = Vec::new();
    for f in findings {
        for key in ["summary", "subject"] {
            if let Some(text) = f[key].as_str() {
                bad.extend(
                    problems(text)
                        .into_iter()
                        .map(|p| format!("{} {key}: {p}", f["id"])),
                );
            }
        }
    }
    if !bad.is_empty() {
        bail!(
            "numbers not in human units (issue 35):\n  {}",
            bad.join("\n  ")
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const OLD: &str = "\
wg0 (wireguard), MTU 1480, observed 5.0s
  traffic: 20228 segments in, 70218 out; TCP retransmitted 0.00 %; drops 0

CRITICAL mtu.tunnel_exceeds_underlay  wg0 has MTU 1480, but wireguard over ipv4 adds 60 bytes
         evidence: largest_fitting_mtu=1440, overhead_expected=60, overhead_measured=-1,
         tunnel_mtu=1480
         fix: ip link set dev wg0 mtu 1440

WARNING  mtu.underlay_fragmentation  138866 IP fragments crossed the underlay eth0 while wg0
         (MTU 1480) carried traffic: tunnel packets do not fit the path
         evidence: largest_fitting_mtu=1440, tunnel_mtu=1480, underlay_fragments=138866
         fix: sysctl -w net.ipv4.tcp_rmem=\"4096 131072 6291456\"
";

    #[test]
    fn raw_numbers_and_minus_one_are_found_in_messages_and_evidence_only() {
        let err = check_text_report(OLD).expect_err("raw numbers").to_string();
        assert!(err.contains("-1 at"), "{err}");
        assert!(err.contains("138866 at"), "{err}");
        assert!(
            !err.contains("70218 at"),
            "the header is not a finding: {err}"
        );
        assert!(!err.contains("6291456 at"), "a fix is a command: {err}");
        let new = OLD
            .replace("overhead_measured=-1", "overhead_measured=n/a")
            .replace("138866 IP", "138,866 IP")
            .replace("underlay_fragments=138866", "underlay_fragments=138,866");
        check_text_report(&new).expect("units");
    }

    #[test]
    fn ports_keys_and_real_numbers_pass() {
        for ok in [
            "peer ab12345cd= 192.0.2.2:51820, tailscale_port=41641",
            "20.5 MiB through tailscale0 in 4 s, 1,234 segments, up to -16 bytes, ip-1",
            "window 1.50 KiB, MTU 1420, 9999 packets",
        ] {
            assert_eq!(problems(ok), Vec::<String>::new(), "{ok}");
        }
        assert_eq!(problems("a -1 here").len(), 1);
        assert_eq!(problems("(-1)").len(), 1);
        assert_eq!(problems("21450376 bytes").len(), 1);
        assert!(check_text_report("No problems found.\n").is_err());
    }

    #[test]
    fn json_messages_are_checked() {
        let old = serde_json::json!([{"id": "tailscale.relayed", "subject": "peer k=",
            "summary": "21450376 bytes through tailscale0 in 4 s"}]);
        assert!(check_messages(&old).is_err());
        let new = serde_json::json!([{"id": "tailscale.relayed", "subject": "peer k=",
            "summary": "20.5 MiB through tailscale0 in 4 s"}]);
        check_messages(&new).expect("units");
    }
}

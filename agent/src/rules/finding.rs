//! Findings: what a diagnosis concludes, with evidence and the fix.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// How bad a finding is. Ordered: `Info < Warning < Critical`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Worth knowing; nothing is broken.
    Info,
    /// Degrades traffic (slower, fragile); fix soon.
    Warning,
    /// Breaks traffic (hangs, loss, blackholes); fix now.
    Critical,
}

impl Severity {
    /// Exit code in the Nagios plugin convention: 0 ok/info, 1 warning, 2 critical.
    pub fn exit_code(self) -> u8 {
        match self {
            Severity::Info => 0,
            Severity::Warning => 1,
            Severity::Critical => 2,
        }
    }
}

impl std::fmt::Display for Severity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Critical => "critical",
        })
    }
}

/// One conclusion of a rule about the facts.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    /// Stable identifier, e.g. `mtu.tunnel_exceeds_underlay`; other tools match on it.
    pub id: String,
    /// How bad it is.
    pub severity: Severity,
    /// What is wrong, with the numbers.
    pub summary: String,
    /// The facts the rule looked at, by name.
    pub evidence: BTreeMap<String, serde_json::Value>,
    /// The exact change that fixes it.
    pub fix: String,
    /// Where to read more.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reference: Option<String>,
    /// What the finding is about when a rule applies per item (a peer, a flow).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    /// Why an evidence value is unknown (`-1`, `""`), by evidence name, where that is known:
    /// the text report prints `n/a (WHY)`.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub unknown: BTreeMap<String, String>,
}

/// The worst severity among `findings`, if any.
pub fn worst(findings: &[Finding]) -> Option<Severity> {
    findings.iter().map(|f| f.severity).max()
}

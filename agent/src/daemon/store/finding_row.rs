//! A stored finding: what the API serves of it ([`StoredFinding`], its identity and state),
//! the columns a row is read from, their decoding, and the encoding of the columns that
//! hold JSON.

use std::collections::BTreeMap;

use rusqlite::Row;
use serde::{Deserialize, Serialize};

use super::{to_u64, StoreError};
use crate::rules::finding::Severity;

/// Whether a stored finding still holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FindingState {
    /// Reported by the last evaluation of its interface.
    Active,
    /// No longer reported (or its interface went away); `resolved_ms` says since when.
    Resolved,
}

/// A finding with its lifecycle, as the API serves it (`StoredFinding` in docs/api.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredFinding {
    /// The rule's finding id, e.g. `mtu.tunnel_exceeds_underlay`.
    pub id: String,
    /// The interface it was found on.
    pub interface: String,
    /// What it is about when the rule applies per item (a peer, a flow); `null` otherwise.
    pub subject: Option<String>,
    /// Severity at the last evaluation that reported it.
    pub severity: Severity,
    /// Summary at the last evaluation that reported it.
    pub summary: String,
    /// Evidence at the last evaluation that reported it.
    pub evidence: BTreeMap<String, serde_json::Value>,
    /// The fix at the last evaluation that reported it.
    pub fix: String,
    /// Where to read more.
    pub reference: Option<String>,
    /// Active or resolved.
    pub state: FindingState,
    /// When it was first reported (ms since the epoch).
    pub opened_ms: i64,
    /// When it was last reported.
    pub last_seen_ms: i64,
    /// When it stopped being reported; `null` while active.
    pub resolved_ms: Option<i64>,
    /// How many evaluations reported it.
    pub evaluations: u64,
    /// The configuration change it began after, on its interface or underlay or
    /// host-wide: "began 40 s after wg0's MTU changed 1420 → 1500"; left out when none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cause: Option<String>,
    /// Why evidence values are unknown, by evidence name, at the last evaluation that
    /// reported it (the finding's `unknown`); left out when none.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub unknown: BTreeMap<String, String>,
}

/// The identity of a finding, as reported in [`Transitions`].
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct FindingKey {
    /// The rule's finding id.
    pub id: String,
    /// The interface.
    pub interface: String,
    /// The subject, if the rule applies per item.
    pub subject: Option<String>,
}

/// The columns [`Raw::from_row`] reads, in order.
pub(super) const COLUMNS: &str =
    "id, interface, subject, severity, summary, evidence, fix, reference, \
                       opened_ms, last_seen_ms, resolved_ms, evaluations, cause, unknown";

/// The `unknown` column: the reasons as a JSON object, NULL when there are none.
pub(super) fn unknown_column(
    unknown: &BTreeMap<String, String>,
) -> Result<Option<String>, StoreError> {
    if unknown.is_empty() {
        return Ok(None);
    }
    serde_json::to_string(unknown)
        .map(Some)
        .map_err(|source| StoreError::Json {
            what: "finding unknown reasons",
            source,
        })
}

/// A [`FindingKey`] from stored columns (`""` is no subject).
pub(super) fn key(id: &str, interface: &str, subject: &str) -> FindingKey {
    FindingKey {
        id: id.to_owned(),
        interface: interface.to_owned(),
        subject: (!subject.is_empty()).then(|| subject.to_owned()),
    }
}

/// A findings row as stored, before its JSON and text columns are decoded.
pub(super) struct Raw {
    key: FindingKey,
    severity: String,
    summary: String,
    evidence: String,
    fix: String,
    reference: Option<String>,
    opened_ms: i64,
    last_seen_ms: i64,
    resolved_ms: Option<i64>,
    evaluations: i64,
    cause: Option<String>,
    unknown: Option<String>,
}

impl Raw {
    /// Reads the [`COLUMNS`] of one row.
    pub(super) fn from_row(row: &Row<'_>) -> rusqlite::Result<Raw> {
        let id: String = row.get(0)?;
        let interface: String = row.get(1)?;
        let subject: String = row.get(2)?;
        Ok(Raw {
            key: key(&id, &interface, &subject),
            severity: row.get(3)?,
            summary: row.get(4)?,
            evidence: row.get(5)?,
            fix: row.get(6)?,
            reference: row.get(7)?,
            opened_ms: row.get(8)?,
            last_seen_ms: row.get(9)?,
            resolved_ms: row.get(10)?,
            evaluations: row.get(11)?,
            cause: row.get(12)?,
            unknown: row.get(13)?,
        })
    }

    /// Decodes the severity, the evidence and the unknown reasons.
    pub(super) fn decode(self) -> Result<StoredFinding, StoreError> {
        let severity =
            serde_json::from_value(serde_json::Value::String(self.severity)).map_err(|source| {
                StoreError::Json {
                    what: "finding severity",
                    source,
                }
            })?;
        let evidence = serde_json::from_str(&self.evidence).map_err(|source| StoreError::Json {
            what: "finding evidence",
            source,
        })?;
        let unknown = match self.unknown.as_deref() {
            None => BTreeMap::new(),
            Some(text) => serde_json::from_str(text).map_err(|source| StoreError::Json {
                what: "finding unknown reasons",
                source,
            })?,
        };
        Ok(StoredFinding {
            id: self.key.id,
            interface: self.key.interface,
            subject: self.key.subject,
            severity,
            summary: self.summary,
            evidence,
            fix: self.fix,
            reference: self.reference,
            state: if self.resolved_ms.is_some() {
                FindingState::Resolved
            } else {
                FindingState::Active
            },
            opened_ms: self.opened_ms,
            last_seen_ms: self.last_seen_ms,
            resolved_ms: self.resolved_ms,
            evaluations: to_u64(self.evaluations),
            cause: self.cause,
            unknown,
        })
    }
}

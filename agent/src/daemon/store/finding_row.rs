//! A findings row as stored: the columns read, their decoding into a [`StoredFinding`], and
//! the encoding of the columns that hold JSON.

use std::collections::BTreeMap;

use rusqlite::Row;

use super::lifecycle::{FindingKey, FindingState, StoredFinding};
use super::{to_u64, StoreError};

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

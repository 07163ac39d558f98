//! The lifecycle of findings: opened when a rule first reports them on an interface,
//! refreshed while it keeps reporting them, resolved when it stops.
//!
//! A finding's identity is `(id, interface, subject)`, with no subject stored as `""`
//! (so `Some("")` and `None` are the same identity). Each period a finding is active is
//! one row; a finding that comes back after being resolved opens a new row.

use std::collections::{BTreeMap, HashSet};

use rusqlite::{params, Connection, TransactionBehavior};
use serde::{Deserialize, Serialize};

use super::finding_row::{key, unknown_column, FindingKey, Raw, StoredFinding, COLUMNS};
use super::query::{Filter, PageSpec};
use super::{Page, Store, StoreError};
use crate::rules::finding::Finding;

/// Which findings a query returns, by state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StateFilter {
    /// Only active findings (the default).
    #[default]
    Active,
    /// Only resolved findings.
    Resolved,
    /// Both.
    All,
}

/// A query for [`Store::findings`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FindingQuery {
    /// Only findings of this interface.
    pub interface: Option<String>,
    /// Only findings in this state.
    pub state: StateFilter,
    /// Only findings still active at or after this time: `resolved_ms` is null or `>= since_ms`.
    pub since_ms: Option<i64>,
    /// Only findings opened at or before this time: `opened_ms <= until_ms`.
    pub until_ms: Option<i64>,
    /// Page size.
    pub limit: u32,
    /// Matching findings to skip.
    pub offset: u32,
}

impl Default for FindingQuery {
    /// Active findings of all interfaces, any time, the first 100.
    fn default() -> Self {
        FindingQuery {
            interface: None,
            state: StateFilter::Active,
            since_ms: None,
            until_ms: None,
            limit: 100,
            offset: 0,
        }
    }
}

/// What one [`Store::record`] changed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Transitions {
    /// Findings that became active, in the order they were passed.
    pub opened: Vec<FindingKey>,
    /// Findings that were active and are not any more, by id then subject.
    pub resolved: Vec<FindingKey>,
}

/// Active first, then newest opened first; `row_id` keeps pages stable.
const ORDER: &str = "resolved_ms IS NOT NULL, opened_ms DESC, row_id DESC";

impl Store {
    /// Records one evaluation of `interface` at `now_ms`, in one transaction: opens the
    /// findings that are not active yet, refreshes the active ones (severity, summary,
    /// evidence, fix, reference, `last_seen_ms`, `evaluations += 1`), and resolves the
    /// interface's active findings that are absent from `findings`.
    ///
    /// If `findings` holds the same identity twice, the first one counts.
    pub fn record(
        &self,
        interface: &str,
        now_ms: i64,
        findings: &[Finding],
    ) -> Result<Transitions, StoreError> {
        self.tracked("recording findings", |conn| {
            Self::record_in(conn, interface, now_ms, findings)
        })
    }

    /// [`Store::record`] on the locked connection.
    fn record_in(
        conn: &mut Connection,
        interface: &str,
        now_ms: i64,
        findings: &[Finding],
    ) -> Result<Transitions, StoreError> {
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let mut out = Transitions::default();
        {
            let mut active = active_rows(&tx, interface)?;
            let mut refresh = tx.prepare_cached(
                "UPDATE findings SET severity = ?1, summary = ?2, evidence = ?3, fix = ?4, \
                 reference = ?5, last_seen_ms = ?6, evaluations = evaluations + 1, \
                 unknown = ?8 WHERE row_id = ?7",
            )?;
            let mut open = tx.prepare_cached(
                "INSERT INTO findings (id, interface, subject, severity, summary, evidence, \
                 fix, reference, opened_ms, last_seen_ms, evaluations, unknown) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?9, 1, ?10)",
            )?;
            let mut seen = HashSet::new();
            for f in findings {
                let subject = f.subject.as_deref().unwrap_or("");
                if !seen.insert((f.id.as_str(), subject)) {
                    tracing::debug!(id = %f.id, interface, subject, "duplicate finding ignored");
                    continue;
                }
                let (severity, evidence, unknown) = encoded(f)?;
                match active.remove(&(f.id.clone(), subject.to_owned())) {
                    Some(row_id) => {
                        refresh.execute(params![
                            severity,
                            f.summary,
                            evidence,
                            f.fix,
                            f.reference,
                            now_ms,
                            row_id,
                            unknown
                        ])?;
                    }
                    None => {
                        open.execute(params![
                            f.id,
                            interface,
                            subject,
                            severity,
                            f.summary,
                            evidence,
                            f.fix,
                            f.reference,
                            now_ms,
                            unknown
                        ])?;
                        out.opened.push(key(&f.id, interface, subject));
                    }
                }
            }
            out.resolved = resolve_absent(&tx, active, interface, now_ms)?;
        }
        tx.commit()?;
        Ok(out)
    }

    /// The interface went away: resolves all its active findings at `now_ms`.
    /// Returns how many were resolved.
    pub fn resolve_interface(&self, interface: &str, now_ms: i64) -> Result<usize, StoreError> {
        self.tracked("resolving the findings of a deleted interface", |conn| {
            let n = conn.execute(
                "UPDATE findings SET resolved_ms = ?1 WHERE interface = ?2 AND resolved_ms IS NULL",
                params![now_ms, interface],
            )?;
            Ok(n)
        })
    }

    /// Findings matching `q`: active ones first, then newest opened first. A finding
    /// matches the range `[since_ms, until_ms]` if it was active at some point in it:
    /// `opened_ms <= until_ms` and (`resolved_ms` is null or `resolved_ms >= since_ms`).
    pub fn findings(&self, q: &FindingQuery) -> Result<Page<StoredFinding>, StoreError> {
        let mut filter = Filter::default();
        if let Some(interface) = &q.interface {
            filter.bind("interface = ?", interface.clone());
        }
        match q.state {
            StateFilter::Active => filter.require("resolved_ms IS NULL"),
            StateFilter::Resolved => filter.require("resolved_ms IS NOT NULL"),
            StateFilter::All => {}
        }
        if let Some(since) = q.since_ms {
            filter.bind("(resolved_ms IS NULL OR resolved_ms >= ?)", since);
        }
        if let Some(until) = q.until_ms {
            filter.bind("opened_ms <= ?", until);
        }
        let spec = PageSpec {
            table: "findings",
            columns: COLUMNS,
            order: ORDER,
            filter: &filter,
            limit: q.limit,
            offset: q.offset,
        };
        let (total, raws) = spec.fetch(&mut self.conn(), Raw::from_row)?;
        Ok(Page {
            total,
            limit: q.limit,
            offset: q.offset,
            items: raws
                .into_iter()
                .map(Raw::decode)
                .collect::<Result<_, _>>()?,
        })
    }

    /// All active findings of all interfaces (for metrics), by interface, id and subject.
    pub fn active_findings(&self) -> Result<Vec<StoredFinding>, StoreError> {
        let raws = self.tracked("reading the active findings", |conn| {
            let mut stmt = conn.prepare_cached(&format!(
                "SELECT {COLUMNS} FROM findings WHERE resolved_ms IS NULL \
                 ORDER BY interface, id, subject"
            ))?;
            let raws = stmt
                .query_map([], Raw::from_row)?
                .collect::<Result<Vec<_>, _>>()?;
            Ok(raws)
        })?;
        raws.into_iter().map(Raw::decode).collect()
    }
}

/// `(id, subject)` -> `row_id` of the active findings of `interface`.
fn active_rows(
    conn: &Connection,
    interface: &str,
) -> Result<BTreeMap<(String, String), i64>, StoreError> {
    let rows = conn
        .prepare_cached(
            "SELECT id, subject, row_id FROM findings \
             WHERE interface = ?1 AND resolved_ms IS NULL",
        )?
        .query_map([interface], |row| {
            Ok(((row.get(0)?, row.get(1)?), row.get(2)?))
        })?
        .collect::<Result<_, _>>()?;
    Ok(rows)
}

/// A finding's severity, evidence and unknown columns as stored.
fn encoded(f: &Finding) -> Result<(String, String, Option<String>), StoreError> {
    let evidence = serde_json::to_string(&f.evidence).map_err(|source| StoreError::Json {
        what: "finding evidence",
        source,
    })?;
    let unknown = unknown_column(&f.unknown)?;
    Ok((f.severity.to_string(), evidence, unknown))
}

/// Resolves at `now_ms` the `active` rows not reported again; their keys, by id then
/// subject.
fn resolve_absent(
    conn: &Connection,
    active: BTreeMap<(String, String), i64>,
    interface: &str,
    now_ms: i64,
) -> Result<Vec<FindingKey>, StoreError> {
    let mut resolve =
        conn.prepare_cached("UPDATE findings SET resolved_ms = ?1 WHERE row_id = ?2")?;
    let mut resolved = Vec::new();
    for ((id, subject), row_id) in active {
        resolve.execute(params![now_ms, row_id])?;
        resolved.push(key(&id, interface, &subject));
    }
    Ok(resolved)
}

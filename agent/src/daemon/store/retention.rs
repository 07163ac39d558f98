//! Retention: how much history is kept, and pruning to it.
//!
//! Samples age from their `ts_ms`, resolved findings from their `resolved_ms`. Active
//! findings are never pruned, however old: they still hold.

use std::time::Duration;

use rusqlite::{params, Connection, TransactionBehavior};
use serde::Serialize;

use super::{to_i64, Store, StoreError};

/// How much history [`Store::prune`] keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// Older samples and resolved findings are deleted.
    pub max_age: Duration,
    /// At most this many samples, and this many resolved findings, are kept (the newest).
    pub max_rows: u64,
}

impl Default for Retention {
    /// Seven days, 100 000 rows per table.
    fn default() -> Self {
        Retention {
            max_age: Duration::from_secs(7 * 24 * 3600),
            max_rows: 100_000,
        }
    }
}

/// What one [`Store::prune`] deleted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Pruned {
    /// Samples deleted.
    pub samples: usize,
    /// Resolved findings deleted.
    pub findings: usize,
}

impl Store {
    /// Deletes samples and resolved findings older than `max_age` before `now_ms`, then
    /// the oldest beyond `max_rows` of each, in one transaction. Returns what it removed.
    pub fn prune(&self, now_ms: i64) -> Result<Pruned, StoreError> {
        let age_ms = i64::try_from(self.retention.max_age.as_millis()).unwrap_or(i64::MAX);
        let cutoff = now_ms.saturating_sub(age_ms);
        let keep = to_i64(self.retention.max_rows);
        self.tracked("pruning the history", |conn| {
            Self::prune_in(conn, cutoff, keep)
        })
    }

    /// [`Store::prune`] on the locked connection.
    fn prune_in(conn: &mut Connection, cutoff: i64, keep: i64) -> Result<Pruned, StoreError> {
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let mut pruned = Pruned {
            samples: tx.execute("DELETE FROM samples WHERE ts_ms < ?1", [cutoff])?,
            findings: tx.execute(
                "DELETE FROM findings WHERE resolved_ms IS NOT NULL AND resolved_ms < ?1",
                [cutoff],
            )?,
        };
        // LIMIT -1 OFFSET n: every row after the newest n.
        pruned.samples += tx.execute(
            "DELETE FROM samples WHERE row_id IN (SELECT row_id FROM samples \
             ORDER BY ts_ms DESC, row_id DESC LIMIT -1 OFFSET ?1)",
            params![keep],
        )?;
        pruned.findings += tx.execute(
            "DELETE FROM findings WHERE row_id IN (SELECT row_id FROM findings \
             WHERE resolved_ms IS NOT NULL \
             ORDER BY resolved_ms DESC, row_id DESC LIMIT -1 OFFSET ?1)",
            params![keep],
        )?;
        tx.commit()?;
        if pruned != Pruned::default() {
            tracing::debug!(
                samples = pruned.samples,
                findings = pruned.findings,
                "history pruned"
            );
        }
        Ok(pruned)
    }
}

//! The configuration timeline's events (`daemon::timeline`), kept under the same retention
//! as samples, and the cause a finding cites.

use rusqlite::{params, TransactionBehavior};

use super::query::PageSpec;
use super::{to_i64, Page, Store, StoreError};
use crate::daemon::timeline::{Change, Event};

/// A query for [`Store::events`]: newest first.
pub type EventQuery = super::query::RangeQuery;

impl Store {
    /// Stores events, in one transaction.
    pub fn insert_events(&self, events: &[Event]) -> Result<(), StoreError> {
        if events.is_empty() {
            return Ok(());
        }
        self.tracked("recording configuration changes", |conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            {
                let mut insert = tx.prepare_cached(
                    "INSERT INTO events (ts_ms, kind, interface, subject, change, old, new, text) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                )?;
                for e in events {
                    insert.execute(params![
                        e.ts_ms,
                        e.kind,
                        e.interface,
                        e.subject,
                        e.change.as_str(),
                        e.old,
                        e.new,
                        e.text
                    ])?;
                }
            }
            tx.commit()?;
            Ok(())
        })
    }

    /// Events matching `q`, newest first; events of the same `ts_ms` in reverse insertion
    /// order.
    pub fn events(&self, q: &EventQuery) -> Result<Page<Event>, StoreError> {
        let filter = q.filter();
        let spec = PageSpec {
            table: "events",
            columns: "ts_ms, kind, interface, subject, change, old, new, text",
            order: "ts_ms DESC, row_id DESC",
            filter: &filter,
            limit: q.limit,
            offset: q.offset,
        };
        let (total, items) = spec.fetch(&mut self.conn(), |row| {
            let change: String = row.get(4)?;
            Ok(Event {
                ts_ms: row.get(0)?,
                kind: row.get(1)?,
                interface: row.get(2)?,
                subject: row.get(3)?,
                // Written by `insert_events` only; an unknown word reads as a change.
                change: Change::parse(&change).unwrap_or(Change::Changed),
                old: row.get(5)?,
                new: row.get(6)?,
                text: row.get(7)?,
            })
        })?;
        Ok(Page {
            total,
            limit: q.limit,
            offset: q.offset,
            items,
        })
    }

    /// Deletes events older than the retention's age before `now_ms`, then the oldest
    /// beyond its row count. Returns how many it removed.
    pub fn prune_events(&self, now_ms: i64) -> Result<usize, StoreError> {
        let age_ms = i64::try_from(self.retention.max_age.as_millis()).unwrap_or(i64::MAX);
        let cutoff = now_ms.saturating_sub(age_ms);
        let keep = to_i64(self.retention.max_rows);
        self.tracked("pruning the configuration changes", |conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let mut n = tx.execute("DELETE FROM events WHERE ts_ms < ?1", [cutoff])?;
            n += tx.execute(
                "DELETE FROM events WHERE row_id IN (SELECT row_id FROM events \
                 ORDER BY ts_ms DESC, row_id DESC LIMIT -1 OFFSET ?1)",
                params![keep],
            )?;
            tx.commit()?;
            Ok(n)
        })
    }

    /// Sets the cause the active finding `(id, interface, subject)` cites.
    pub fn set_cause(
        &self,
        id: &str,
        interface: &str,
        subject: Option<&str>,
        cause: &str,
    ) -> Result<(), StoreError> {
        self.tracked("recording a finding's cause", |conn| {
            conn.execute(
                "UPDATE findings SET cause = ?1 WHERE id = ?2 AND interface = ?3 \
                 AND subject = ?4 AND resolved_ms IS NULL",
                params![cause, id, interface, subject.unwrap_or("")],
            )?;
            Ok(())
        })
    }
}

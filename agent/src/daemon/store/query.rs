//! Paged queries: a `WHERE` clause assembled from optional filters, and one page of rows
//! counted and read in the same snapshot.

use rusqlite::types::Value;
use rusqlite::{params_from_iter, Connection, Row};

use super::{to_u64, StoreError};

/// A query of rows stamped with a time (samples, events): one interface or all, a time
/// range (inclusive bounds) and a page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RangeQuery {
    /// Only rows of this interface.
    pub interface: Option<String>,
    /// Only rows with `ts_ms >= since_ms`.
    pub since_ms: Option<i64>,
    /// Only rows with `ts_ms <= until_ms`.
    pub until_ms: Option<i64>,
    /// Page size.
    pub limit: u32,
    /// Matching rows to skip.
    pub offset: u32,
}

impl Default for RangeQuery {
    /// All interfaces, all time (the HTTP API defaults to the last hour), 100 rows.
    fn default() -> Self {
        RangeQuery {
            interface: None,
            since_ms: None,
            until_ms: None,
            limit: 100,
            offset: 0,
        }
    }
}

impl RangeQuery {
    /// The query's interface and time range as conditions on `interface` and `ts_ms`.
    pub(super) fn filter(&self) -> Filter {
        let mut filter = Filter::default();
        if let Some(interface) = &self.interface {
            filter.bind("interface = ?", interface.clone());
        }
        if let Some(since) = self.since_ms {
            filter.bind("ts_ms >= ?", since);
        }
        if let Some(until) = self.until_ms {
            filter.bind("ts_ms <= ?", until);
        }
        filter
    }
}

/// The conditions of a query, joined with `AND`. Clauses are fixed SQL with `?`
/// placeholders; values are always bound, never formatted into the SQL.
#[derive(Debug, Default)]
pub(super) struct Filter {
    clauses: Vec<&'static str>,
    args: Vec<Value>,
}

impl Filter {
    /// Adds a condition without a parameter.
    pub(super) fn require(&mut self, clause: &'static str) {
        self.clauses.push(clause);
    }

    /// Adds a condition with exactly one `?`, bound to `arg`.
    pub(super) fn bind(&mut self, clause: &'static str, arg: impl Into<Value>) {
        self.clauses.push(clause);
        self.args.push(arg.into());
    }

    /// `" WHERE a AND b"`, or nothing without conditions.
    fn where_sql(&self) -> String {
        if self.clauses.is_empty() {
            String::new()
        } else {
            format!(" WHERE {}", self.clauses.join(" AND "))
        }
    }
}

/// One page of a query, with the number of all matching rows.
#[derive(Debug)]
pub(super) struct PageSpec<'a> {
    /// The table.
    pub table: &'static str,
    /// The columns to select, in the order `map` reads them.
    pub columns: &'static str,
    /// The `ORDER BY` expression; must end in a unique key so pages are stable.
    pub order: &'static str,
    /// The conditions.
    pub filter: &'a Filter,
    /// Page size.
    pub limit: u32,
    /// Matching rows to skip.
    pub offset: u32,
}

impl PageSpec<'_> {
    /// Counts the matches and reads one page of them, mapped by `map`, in one read
    /// transaction so `total` and the rows agree.
    pub(super) fn fetch<T>(
        &self,
        conn: &mut Connection,
        map: impl FnMut(&Row<'_>) -> rusqlite::Result<T>,
    ) -> Result<(u64, Vec<T>), StoreError> {
        let where_sql = self.filter.where_sql();
        let tx = conn.transaction()?;
        let total: i64 = tx.query_row(
            &format!("SELECT count(*) FROM {}{where_sql}", self.table),
            params_from_iter(&self.filter.args),
            |row| row.get(0),
        )?;
        let sql = format!(
            "SELECT {} FROM {}{where_sql} ORDER BY {} LIMIT ? OFFSET ?",
            self.columns, self.table, self.order
        );
        let args = self.filter.args.iter().cloned().chain([
            Value::Integer(i64::from(self.limit)),
            Value::Integer(i64::from(self.offset)),
        ]);
        let mut stmt = tx.prepare(&sql)?;
        let rows = stmt
            .query_map(params_from_iter(args), map)?
            .collect::<Result<Vec<_>, _>>()?;
        drop(stmt);
        tx.commit()?;
        Ok((to_u64(total), rows))
    }
}

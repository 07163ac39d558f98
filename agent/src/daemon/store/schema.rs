//! The schema, versioned in code: `PRAGMA user_version` counts the migration steps applied.
//!
//! Each entry of [`MIGRATIONS`] turns version `i` into version `i + 1` and runs in its own
//! transaction together with the `user_version` bump, so a crash leaves the database at
//! one version or the next, never in between. Later versions append steps; released steps
//! are never edited. `PRAGMA application_id` marks the file as netdoctor's, so another
//! application's SQLite database is refused instead of being written to.

use std::path::Path;

use rusqlite::{Connection, OptionalExtension, TransactionBehavior};

use super::{open_error, StoreError};

/// `PRAGMA application_id` of netdoctor's history database: "NDOC" in ASCII.
pub(super) const APPLICATION_ID: i64 = 0x4E44_4F43;

/// The migration steps; step `i` upgrades schema version `i` to `i + 1`.
pub(super) const MIGRATIONS: &[&str] = &[
    // 1: findings with their lifecycle, samples.
    "
    PRAGMA application_id = 1313099587;

    -- One row per period a finding was active. Identity: (id, interface, subject), with
    -- subject '' when the rule is not per item ('' and not NULL, so the unique index
    -- below sees equal identities as equal). Active rows have resolved_ms NULL.
    CREATE TABLE findings (
        row_id       INTEGER PRIMARY KEY,
        id           TEXT    NOT NULL,
        interface    TEXT    NOT NULL,
        subject      TEXT    NOT NULL DEFAULT '',
        severity     TEXT    NOT NULL,
        summary      TEXT    NOT NULL,
        evidence     TEXT    NOT NULL,  -- JSON object
        fix          TEXT    NOT NULL,
        reference    TEXT,
        opened_ms    INTEGER NOT NULL,
        last_seen_ms INTEGER NOT NULL,
        resolved_ms  INTEGER,
        evaluations  INTEGER NOT NULL DEFAULT 1
    ) STRICT;
    -- At most one active row per identity.
    CREATE UNIQUE INDEX findings_active_identity
        ON findings (interface, id, subject) WHERE resolved_ms IS NULL;
    CREATE INDEX findings_opened ON findings (opened_ms);
    CREATE INDEX findings_interface_opened ON findings (interface, opened_ms);
    CREATE INDEX findings_resolved ON findings (resolved_ms) WHERE resolved_ms IS NOT NULL;

    -- One row per interface and observation window; body is the Sample as JSON.
    CREATE TABLE samples (
        row_id    INTEGER PRIMARY KEY,
        ts_ms     INTEGER NOT NULL,
        interface TEXT    NOT NULL,
        body      TEXT    NOT NULL
    ) STRICT;
    CREATE INDEX samples_ts ON samples (ts_ms);
    CREATE INDEX samples_interface_ts ON samples (interface, ts_ms);
    ",
    // 2: the configuration timeline, and what a finding cites as its cause.
    "
    -- One row per configuration change (daemon::timeline::Event).
    CREATE TABLE events (
        row_id    INTEGER PRIMARY KEY,
        ts_ms     INTEGER NOT NULL,
        kind      TEXT    NOT NULL,
        interface TEXT    NOT NULL DEFAULT '',
        subject   TEXT    NOT NULL DEFAULT '',
        change    TEXT    NOT NULL,
        old       TEXT,
        new       TEXT,
        text      TEXT    NOT NULL
    ) STRICT;
    CREATE INDEX events_ts ON events (ts_ms);
    CREATE INDEX events_interface_ts ON events (interface, ts_ms);

    -- The change a finding began after: began 40 s after wg0's MTU changed 1420 → 1500.
    ALTER TABLE findings ADD COLUMN cause TEXT;
    ",
    // 3: why evidence values are unknown, so the history prints "n/a (why)" as the report.
    "
    -- JSON object, evidence name -> reason (Finding::unknown); NULL when none.
    ALTER TABLE findings ADD COLUMN unknown TEXT;
    ",
];

/// The schema version this binary writes: the number of migration steps.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// Refuses, without writing anything, a file that is not an SQLite database, another
/// application's database, or a schema newer than [`SCHEMA_VERSION`].
pub(super) fn check(conn: &Connection, path: &Path) -> Result<(), StoreError> {
    // The first read of the header: a file that is not a database fails here.
    let version = user_version(conn).map_err(|e| open_error(path, e))?;
    let app_id: i64 = conn
        .pragma_query_value(None, "application_id", |row| row.get(0))
        .map_err(|e| open_error(path, e))?;
    let foreign = |reason: String| StoreError::ForeignDatabase {
        path: path.to_path_buf(),
        reason,
    };
    if app_id != 0 && app_id != APPLICATION_ID {
        return Err(foreign(format!("application_id {app_id:#x}")));
    }
    if app_id == 0 {
        if version != 0 {
            return Err(foreign(format!(
                "user_version {version} without netdoctor's application_id"
            )));
        }
        let table: Option<String> = conn
            .query_row(
                "SELECT name FROM sqlite_master WHERE type = 'table' LIMIT 1",
                [],
                |row| row.get(0),
            )
            .optional()
            .map_err(|e| open_error(path, e))?;
        if let Some(table) = table {
            return Err(foreign(format!("it already has a table {table:?}")));
        }
    }
    too_new(version, path)
}

/// Applies the missing migration steps, one transaction each.
pub(super) fn migrate(conn: &mut Connection, path: &Path) -> Result<(), StoreError> {
    loop {
        // IMMEDIATE: two processes opening the same file at once do not both migrate.
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let version = user_version(&tx)?;
        too_new(version, path)?;
        let Some(step) = usize::try_from(version)
            .ok()
            .and_then(|v| MIGRATIONS.get(v))
        else {
            return Ok(());
        };
        let next = version + 1;
        let failed = |source| StoreError::Migration {
            version: next,
            source,
        };
        tx.execute_batch(step).map_err(failed)?;
        tx.pragma_update(None, "user_version", next)
            .map_err(failed)?;
        tx.commit().map_err(failed)?;
        tracing::debug!(version = next, "history database migrated");
    }
}

/// The database's `PRAGMA user_version`.
fn user_version(conn: &Connection) -> rusqlite::Result<i64> {
    conn.pragma_query_value(None, "user_version", |row| row.get(0))
}

/// Refuses a schema version newer than this binary's.
fn too_new(version: i64, path: &Path) -> Result<(), StoreError> {
    if version > SCHEMA_VERSION {
        return Err(StoreError::TooNew {
            path: path.to_path_buf(),
            found: version,
            supported: SCHEMA_VERSION,
        });
    }
    Ok(())
}

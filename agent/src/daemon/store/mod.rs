//! History in SQLite: findings with their lifecycle, and per-interface samples.
//!
//! One [`Store`] owns one SQLite connection behind a mutex; the agent shares it behind an
//! `Arc` between its tasks. Every method is a short, blocking call (a few milliseconds of
//! disk I/O at most), so async callers run it with `tokio::task::spawn_blocking`.
//!
//! - `schema`: the tables, versioned with `PRAGMA user_version`.
//! - `findings`: the lifecycle of findings (opened, refreshed, resolved) and queries.
//! - `samples`: one time-series point per interface and window, for charts.
//! - `events`: the configuration timeline's changes, and the cause a finding cites.
//! - `retention`: how much history is kept, and pruning.
//! - `query`: paged queries shared by findings and samples.
//!
//! Durability: the database runs in WAL mode with `synchronous=NORMAL`. A committed
//! transaction is in the write-ahead log, which the OS keeps in its page cache even if
//! the process is killed (`kill -9`, a panic, OOM): nothing committed is lost when the
//! agent dies. Only a power loss or kernel crash can drop the last few transactions, and
//! even then the database stays consistent. Every write is a single transaction.

mod events;
mod file;
mod finding_row;
mod health;
mod lifecycle;
mod problem;
mod query;
mod retention;
mod samples;
mod schema;
#[cfg(test)]
mod tests;
mod trust;

use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use rusqlite::{Connection, ErrorCode, OpenFlags};
use serde::{Deserialize, Serialize};

pub use events::EventQuery;
pub use file::Access;
pub use finding_row::{FindingKey, FindingState, StoredFinding};
pub use health::StoreHealth;
pub use lifecycle::{FindingQuery, StateFilter, Transitions};
pub use problem::{Problem, Problems};
pub use retention::{Pruned, Retention};
pub use samples::{CcRetrans, PeerPathSample, Sample, SampleQuery};
pub use schema::SCHEMA_VERSION;

/// How long a writer waits for another connection's lock before giving up.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Errors from the history database.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The directory that should hold the database could not be created.
    #[error("creating the directory {path} for the history database: {source}")]
    CreateDir {
        /// The directory.
        path: PathBuf,
        /// The underlying OS error.
        #[source]
        source: io::Error,
    },
    /// The file exists but is not an SQLite database (it was left untouched).
    #[error(
        "{path} is not an SQLite database (SQLite says: {source}); it was left untouched: \
         move it away or choose another path for the history database"
    )]
    NotADatabase {
        /// The file.
        path: PathBuf,
        /// What SQLite reported.
        #[source]
        source: rusqlite::Error,
    },
    /// The file is an SQLite database that belongs to another application.
    #[error(
        "{path} is an SQLite database of another application ({reason}); it was left \
         untouched: choose another path for the history database"
    )]
    ForeignDatabase {
        /// The file.
        path: PathBuf,
        /// Why it is not netdoctor's.
        reason: String,
    },
    /// The database was written by a newer netdoctor with a schema this binary does not know.
    #[error(
        "{path} has schema version {found}, newer than this netdoctor understands \
         (up to {supported}); it was left untouched: run a newer netdoctor or choose \
         another path for the history database"
    )]
    TooNew {
        /// The file.
        path: PathBuf,
        /// The database's `user_version`.
        found: i64,
        /// The newest schema version this binary knows.
        supported: i64,
    },
    /// Opening or configuring the database failed.
    #[error("opening the history database {path}: {source}")]
    Open {
        /// The file (`:memory:` for an in-memory database).
        path: PathBuf,
        /// What SQLite reported.
        #[source]
        source: rusqlite::Error,
    },
    /// Applying a schema migration failed; the database stays at the previous version.
    #[error("migrating the history database to schema version {version}: {source}")]
    Migration {
        /// The version the failed step would have produced.
        version: i64,
        /// What SQLite reported.
        #[source]
        source: rusqlite::Error,
    },
    /// The database file belongs to another user.
    #[error(
        "{path} belongs to uid {owner}, not to this process's user (uid {me}): refusing \
         to trust a history database another user controls; remove it or choose another \
         path"
    )]
    ForeignOwner {
        /// The file.
        path: PathBuf,
        /// Its owner.
        owner: u32,
        /// This process's effective uid.
        me: u32,
    },
    /// The database, a file SQLite would read next to it, or a directory on the way is a
    /// symbolic link, belongs to another user, or is writable by one.
    #[error(
        "refusing the history database {path}: {problems}. Another user could make the agent \
         overwrite a file or serve findings they wrote; nothing was read or written"
    )]
    Untrusted {
        /// The database (resolved).
        path: PathBuf,
        /// Every problem found, each with its fix.
        problems: Problems,
    },
    /// SQLite's `quick_check` found the database damaged.
    #[error(
        "the history database {path} is damaged (PRAGMA quick_check: {report}); it was left \
         untouched: move it away (the agent then starts a new history) or recover what it \
         holds with `sqlite3 {path} .recover`"
    )]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// SQLite's first lines about it.
        report: String,
    },
    /// Creating the database file or setting its permissions failed.
    #[error("setting the permissions of the history database {path}: {source}")]
    Permissions {
        /// The file.
        path: PathBuf,
        /// The underlying OS error.
        #[source]
        source: io::Error,
    },
    /// A query or write failed.
    #[error("history database: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// A value could not be encoded to, or decoded from, its JSON column.
    #[error("history database: {what} is not valid JSON: {source}")]
    Json {
        /// Which value (e.g. "finding evidence").
        what: &'static str,
        /// What serde_json reported.
        #[source]
        source: serde_json::Error,
    },
}

/// One page of query results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Page<T> {
    /// How many rows match the query, before `limit` and `offset`.
    pub total: u64,
    /// The page size asked for.
    pub limit: u32,
    /// How many matching rows were skipped.
    pub offset: u32,
    /// The rows of this page.
    pub items: Vec<T>,
}

/// The agent's history: findings and samples in one SQLite database.
///
/// `Send + Sync`; share it behind an `Arc`. Calls are serialized on one connection.
#[derive(Debug)]
pub struct Store {
    conn: Mutex<Connection>,
    retention: Retention,
    health: health::Tracker,
}

impl Store {
    /// Opens (or creates) the database at `path`, readable by this process's user only,
    /// creating missing parent directories, and brings its schema up to date.
    ///
    /// A file that is not an SQLite database, that belongs to another application or
    /// another user, that is damaged, or whose schema is newer than this binary's is refused
    /// with a clear error and left as it was; so is a path that another user could have
    /// prepared (see `trust`: symbolic links, their directories, their `-wal` files).
    pub fn open(path: &Path, retention: Retention) -> Result<Store, StoreError> {
        Self::open_with(path, retention, Access::default())
    }

    /// [`Store::open`] with the files readable by `access`'s group too.
    pub fn open_with(
        path: &Path,
        retention: Retention,
        access: Access,
    ) -> Result<Store, StoreError> {
        let (path, dirs) = trust::resolve(path, access)?;
        let path = path.as_path();
        file::create_dirs(&dirs, access)?;
        if !dirs.is_empty() {
            let problems = trust::check_dir_chain(path.parent().unwrap_or(path), true)?;
            if !problems.is_empty() {
                return Err(StoreError::Untrusted {
                    path: path.to_path_buf(),
                    problems: Problems(problems),
                });
            }
        }
        trust::check_files(path)?;
        let opened = file::open_file(path, access)?;
        // The resolved path has no symbolic link: NOFOLLOW makes SQLite refuse one that
        // appears anyway. No CREATE: the file exists, made or checked above.
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_NOFOLLOW
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(path, flags).map_err(|e| open_error(path, e))?;
        let store = Self::setup(conn, path, true, retention)?;
        trust::check_again(path, &opened)?;
        // After the checks, so a refused file keeps its mode; the WAL files exist now.
        file::restrict(path, access)?;
        Ok(store)
    }

    /// Opens a private, empty in-memory database (tests, `--no-history`).
    pub fn open_in_memory(retention: Retention) -> Result<Store, StoreError> {
        let path = Path::new(":memory:");
        let conn = Connection::open_in_memory().map_err(|e| open_error(path, e))?;
        Self::setup(conn, path, false, retention)
    }

    /// Checks the database is ours and not too new, configures the connection, migrates.
    fn setup(
        mut conn: Connection,
        path: &Path,
        file: bool,
        retention: Retention,
    ) -> Result<Store, StoreError> {
        conn.busy_timeout(BUSY_TIMEOUT)
            .map_err(|e| open_error(path, e))?;
        // Read-only checks first: nothing is written to a file we are going to refuse
        // (switching to WAL would rewrite its header).
        schema::check(&conn, path)?;
        if file {
            quick_check(&conn, path)?;
            let mode: String = conn
                .pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))
                .map_err(|e| open_error(path, e))?;
            if !mode.eq_ignore_ascii_case("wal") {
                tracing::warn!(
                    path = %path.display(),
                    mode,
                    "the history database could not switch to WAL mode"
                );
            }
        }
        // With WAL, NORMAL syncs at checkpoints only: committed transactions survive a
        // killed process (the OS keeps the WAL), see the module documentation.
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(|e| open_error(path, e))?;
        conn.pragma_update(None, "foreign_keys", true)
            .map_err(|e| open_error(path, e))?;
        schema::migrate(&mut conn, path)?;
        Ok(Store {
            conn: Mutex::new(conn),
            retention,
            health: health::Tracker::default(),
        })
    }

    /// The retention this store prunes to.
    pub fn retention(&self) -> Retention {
        self.retention
    }

    /// Runs `PRAGMA integrity_check`: `"ok"`, or SQLite's list of problems, one a line.
    pub fn integrity_check(&self) -> Result<String, StoreError> {
        let conn = self.conn();
        let mut stmt = conn.prepare("PRAGMA integrity_check")?;
        let lines = stmt
            .query_map([], |row| row.get::<_, String>(0))?
            .collect::<Result<Vec<_>, _>>()?;
        Ok(lines.join("\n"))
    }

    /// Makes every write fail (`PRAGMA query_only`) or work again: a failing disk, in
    /// process.
    #[cfg(test)]
    pub(crate) fn set_query_only(&self, on: bool) {
        self.conn()
            .pragma_update(None, "query_only", on)
            .expect("PRAGMA query_only");
    }

    /// Whether writes work, since when they fail, and how many failed.
    pub fn health(&self) -> StoreHealth {
        self.health.get()
    }

    /// Runs `f` on the connection as one of the monitor's operations (`what`, for the
    /// log), following the store's health: any failure marks it failing, and a success
    /// that changed rows marks it healthy again. Each change is logged once.
    fn tracked<T>(
        &self,
        what: &'static str,
        f: impl FnOnce(&mut Connection) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let mut conn = self.conn();
        let before = conn.total_changes();
        let result = f(&mut conn);
        let wrote = conn.total_changes() != before;
        drop(conn);
        self.health.observe(what, &result, wrote);
        result
    }

    /// The connection. A panic while it was held cannot leave a half-done write behind
    /// (an unfinished transaction rolls back when dropped), so a poisoned lock is reused.
    fn conn(&self) -> MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Lines of `quick_check` quoted in [`StoreError::Corrupt`].
const QUICK_CHECK_LINES: usize = 5;

/// Refuses a damaged database: `PRAGMA quick_check` (every page and record read, indexes
/// not compared with their tables): 1.2 s for a history at its default limits (100,000 rows
/// per table, 94 MB) read from a cold page cache, 0.13 s warm.
fn quick_check(conn: &Connection, path: &Path) -> Result<(), StoreError> {
    let corrupt = |report: String| StoreError::Corrupt {
        path: path.to_path_buf(),
        report,
    };
    let lines = (|| -> rusqlite::Result<Vec<String>> {
        let mut stmt = conn.prepare(&format!("PRAGMA quick_check({QUICK_CHECK_LINES})"))?;
        let rows = stmt.query_map([], |row| row.get::<_, String>(0))?;
        rows.collect()
    })();
    match lines {
        Ok(lines) if lines.len() == 1 && lines[0] == "ok" => Ok(()),
        Ok(lines) => Err(corrupt(lines.join("; "))),
        Err(e) if e.sqlite_error_code() == Some(ErrorCode::DatabaseCorrupt) => {
            Err(corrupt(e.to_string()))
        }
        Err(e) => Err(open_error(path, e)),
    }
}

/// Maps an error while opening `path`, singling out files that are not databases.
fn open_error(path: &Path, source: rusqlite::Error) -> StoreError {
    let path = path.to_path_buf();
    match source.sqlite_error_code() {
        Some(ErrorCode::NotADatabase) => StoreError::NotADatabase { path, source },
        _ => StoreError::Open { path, source },
    }
}

/// Converts a `u64` count to SQLite's `i64`, saturating.
fn to_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Converts an SQLite count to `u64` (counts are never negative).
fn to_u64(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

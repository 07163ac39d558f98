//! The database file: WAL, reopening, and files that are not ours.

use super::*;

#[test]
fn integrity_check_is_ok() {
    assert_eq!(store().integrity_check().expect("check"), "ok");
}

#[test]
fn open_creates_parent_dirs_and_uses_wal() {
    let dir = tempdir();
    let path = dir.path().join("a/b/history.db");
    let s = Store::open(&path, Retention::default()).expect("open");
    assert!(path.exists());
    let mode: String = s
        .conn()
        .pragma_query_value(None, "journal_mode", |r| r.get(0))
        .expect("journal_mode");
    assert_eq!(mode, "wal");
    let sync: i64 = s
        .conn()
        .pragma_query_value(None, "synchronous", |r| r.get(0))
        .expect("synchronous");
    assert_eq!(sync, 1, "NORMAL");
    let fk: i64 = s
        .conn()
        .pragma_query_value(None, "foreign_keys", |r| r.get(0))
        .expect("foreign_keys");
    assert_eq!(fk, 1);
    assert_eq!(s.integrity_check().expect("check"), "ok");
}

fn pragma(path: &Path, name: &str) -> i64 {
    Connection::open(path)
        .expect("open")
        .pragma_query_value(None, name, |r| r.get(0))
        .expect("pragma")
}

#[test]
fn reopening_a_file_keeps_data_and_version() {
    let dir = tempdir();
    let path = dir.path().join("history.db");
    {
        let s = Store::open(&path, Retention::default()).expect("open");
        s.record("wg0", 1, &[finding("a", Some("p"), Severity::Warning, 0)])
            .expect("record");
        s.insert_sample(&sample("wg0", 1)).expect("insert");
    }
    assert_eq!(pragma(&path, "user_version"), SCHEMA_VERSION);
    assert_eq!(pragma(&path, "application_id"), APPLICATION_ID);

    let s = Store::open(&path, Retention::default()).expect("reopen");
    assert_eq!(pragma(&path, "user_version"), SCHEMA_VERSION);
    let active = s.active_findings().expect("active");
    assert_eq!(active.len(), 1);
    assert_eq!(active[0].subject.as_deref(), Some("p"));
    // The finding is still the same active row: a refresh, not a new opening.
    let t = s
        .record("wg0", 2, &[finding("a", Some("p"), Severity::Warning, 0)])
        .expect("record");
    assert!(t.opened.is_empty());
    assert_eq!(s.active_findings().expect("active")[0].evaluations, 2);
    assert_eq!(
        s.samples(&SampleQuery::default()).expect("samples").total,
        1
    );
}

#[test]
fn a_file_that_is_not_a_database_is_refused_and_untouched() {
    for content in ["hi\n".to_string(), "these are my notes\n".repeat(500)] {
        let dir = tempdir();
        let path = dir.path().join("notes.txt");
        std::fs::write(&path, &content).expect("write");
        private(&path);

        let err = Store::open(&path, Retention::default()).expect_err("must refuse");
        assert!(
            matches!(err, StoreError::NotADatabase { .. }),
            "unexpected error: {err:?}"
        );
        let msg = err.to_string();
        assert!(
            msg.contains("notes.txt") && msg.contains("not an SQLite database"),
            "{msg}"
        );
        assert_eq!(std::fs::read_to_string(&path).expect("read"), content);
        assert!(!dir.path().join("notes.txt-wal").exists());
    }
}

#[test]
fn another_applications_database_is_refused() {
    let dir = tempdir();
    let path = dir.path().join("other.db");
    Connection::open(&path)
        .expect("open")
        .execute_batch("CREATE TABLE contacts (name TEXT);")
        .expect("create");
    private(&path);
    let err = Store::open(&path, Retention::default()).expect_err("must refuse");
    assert!(
        matches!(err, StoreError::ForeignDatabase { .. }),
        "unexpected error: {err:?}"
    );
    assert_eq!(pragma(&path, "user_version"), 0);
}

#[test]
fn a_newer_schema_is_refused() {
    let dir = tempdir();
    let path = dir.path().join("history.db");
    drop(Store::open(&path, Retention::default()).expect("open"));
    Connection::open(&path)
        .expect("open")
        .pragma_update(None, "user_version", SCHEMA_VERSION + 1)
        .expect("bump user_version");

    let err = Store::open(&path, Retention::default()).expect_err("must refuse");
    match &err {
        StoreError::TooNew {
            found, supported, ..
        } => assert_eq!((*found, *supported), (SCHEMA_VERSION + 1, SCHEMA_VERSION)),
        other => panic!("unexpected error: {other:?}"),
    }
    assert!(err.to_string().contains("newer"), "{err}");
    assert_eq!(pragma(&path, "user_version"), SCHEMA_VERSION + 1);
}

#[test]
fn a_damaged_database_is_refused_at_open_untouched() {
    let dir = tempdir();
    let path = dir.path().join("history.db");
    {
        let s = Store::open(&path, Retention::default()).expect("open");
        for ts in 0..200 {
            s.insert_sample(&sample("wg0", ts)).expect("insert");
        }
        s.record("wg0", 1, &[finding("a", None, Severity::Warning, 0)])
            .expect("record");
    }
    // Page 2, the findings table's root: its b-tree header becomes garbage. Page 1 (the
    // header and the schema) stays intact, so only a check of the pages sees it.
    let mut bytes = std::fs::read(&path).expect("read");
    let page = usize::try_from(pragma(&path, "page_size")).expect("page size");
    bytes[page..page + 64].fill(0xFF);
    std::fs::write(&path, &bytes).expect("corrupt");

    let err = Store::open(&path, Retention::default()).expect_err("must refuse");
    assert!(matches!(err, StoreError::Corrupt { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(
        msg.contains("history.db is damaged")
            && msg.contains("quick_check")
            && msg.contains("move it away"),
        "{msg}"
    );
    assert_eq!(std::fs::read(&path).expect("read"), bytes, "left untouched");
}

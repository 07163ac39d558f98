//! The store's health: a failure said once, a recovery said once, and a real full file
//! system (a 2 MiB tmpfs) that leaves the database intact once space returns.

use std::ffi::CString;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use super::*;
use crate::daemon::store::health::{Change, Tracker};

fn full() -> StoreError {
    StoreError::Sqlite(rusqlite::Error::SqliteFailure(
        rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_FULL),
        None,
    ))
}

#[test]
fn health_changes_once_per_failure_and_once_per_recovery() {
    let t = Tracker::default();
    assert_eq!(t.update("w", None, true, 1), None, "healthy stays quiet");
    let first = t.update("recording a sample", Some(&full()), false, 1000);
    assert!(
        matches!(&first, Some(Change::Failing { what: "recording a sample", error }) if error.contains("full")),
        "{first:?}"
    );
    for i in 0..239 {
        assert_eq!(t.update("w", Some(&full()), false, 1001 + i), None);
    }
    let h = t.get();
    assert_eq!(
        (h.status, h.failing_since_ms, h.errors_total),
        ("failing", Some(1000), 240)
    );
    // A success that changed nothing proves nothing (it succeeds on a full disk too).
    assert_eq!(t.update("w", None, false, 2000), None);
    assert!(!t.get().is_ok());
    assert_eq!(
        t.update("w", None, true, 16_000),
        Some(Change::Recovered {
            failed: 240,
            for_ms: 15_000
        })
    );
    let h = t.get();
    assert!(h.is_ok());
    assert_eq!((h.status, h.error, h.errors_total), ("ok", None, 240));
    assert_eq!(t.update("w", None, true, 17_000), None);
}

/// A tmpfs mounted on a directory, unmounted (lazily, if busy) when dropped.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(at: &Path, options: &str) -> Tmpfs {
        let target = CString::new(at.as_os_str().as_bytes()).expect("path");
        let data = CString::new(options).expect("options");
        // SAFETY: every pointer is a NUL-terminated string that outlives the call.
        let rc = unsafe {
            libc::mount(
                c"tmpfs".as_ptr(),
                target.as_ptr(),
                c"tmpfs".as_ptr(),
                0,
                data.as_ptr().cast(),
            )
        };
        assert_eq!(rc, 0, "mount tmpfs: {}", std::io::Error::last_os_error());
        Tmpfs(at.to_path_buf())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        if let Ok(target) = CString::new(self.0.as_os_str().as_bytes()) {
            // SAFETY: a NUL-terminated path that outlives the call.
            unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
        }
    }
}

/// Writes `path` until the file system is full; returns the bytes written.
fn fill(path: &Path) -> usize {
    let mut f = std::fs::File::create(path).expect("filler");
    let chunk = vec![0x5A_u8; 16 * 1024];
    let mut written = 0;
    loop {
        match f.write(&chunk) {
            Ok(0) => break,
            Ok(n) => written += n,
            Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => break,
            Err(e) => panic!("filling: {e}"),
        }
    }
    written
}

#[test]
fn a_full_file_system_fails_writes_once_and_leaves_the_database_intact() {
    if !crate::testing::root_or_skip("to mount a tmpfs") {
        return;
    }
    let dir = tempdir();
    let mnt = Tmpfs::mount(dir.path(), "size=2M,mode=0700");
    let path = mnt.0.join("history.db");
    let s = Store::open(&path, Retention::default()).expect("open");
    s.record("wg0", 1, &[finding("a", None, Severity::Warning, 0)])
        .expect("record");
    for ts in 1..=5 {
        s.insert_sample(&sample("wg0", ts)).expect("insert");
    }
    assert!(s.health().is_ok());

    let filler = mnt.0.join("filler");
    assert!(fill(&filler) > 0);
    let mut failed = 0;
    for ts in 6..=20 {
        if s.insert_sample(&sample("wg0", ts)).is_err() {
            failed += 1;
        }
        if s.record("wg0", ts, &[finding("b", None, Severity::Critical, 0)])
            .is_err()
        {
            failed += 1;
        }
    }
    assert!(
        failed >= 20,
        "only {failed} of 30 writes failed on a full file system"
    );
    let h = s.health();
    assert_eq!(h.status, "failing");
    assert_eq!(h.errors_total, failed);
    assert!(
        h.error.as_deref().is_some_and(|e| e.contains("full")),
        "{h:?}"
    );

    std::fs::remove_file(&filler).expect("free");
    s.insert_sample(&sample("wg0", 21)).expect("space is back");
    assert!(s.health().is_ok());
    assert_eq!(s.integrity_check().expect("check"), "ok");
    let ts = sample_times(&s);
    assert_eq!(&ts[..5], [1, 2, 3, 4, 5], "what was written before is kept");
    assert_eq!(ts.last(), Some(&21));
    drop(s);
    // And from a fresh connection, as the next start would.
    let s = Store::open(&path, Retention::default()).expect("reopen");
    assert_eq!(s.integrity_check().expect("check"), "ok");
}

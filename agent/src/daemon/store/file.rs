//! Who may read the history. It holds peers' endpoints, connections and findings, so
//! the database, its write-ahead log and shared-memory index are the agent's alone
//! (0600), or also readable by one configured group (0640); the directory netdoctor
//! creates for them is 0700 (0750). Modes are set when the file is created and checked
//! again at every open, so a file loosened by hand is tightened on the next start.
//!
//! SQLite creates the `-wal` and `-shm` files with the database file's mode, so setting
//! it on the database before SQLite first opens it covers files created later too.

use std::fs::{DirBuilder, Metadata, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use nix::unistd::Gid;

use super::problem::{with_suffix, Problem, Problems};
use super::StoreError;

/// Who besides the agent's own user may read the history.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Access {
    /// A group whose members may read it; `None`: nobody else.
    pub group: Option<Gid>,
}

impl Access {
    /// Mode of the database files.
    pub fn file_mode(self) -> u32 {
        if self.group.is_some() {
            0o640
        } else {
            0o600
        }
    }

    /// Mode of the directories netdoctor creates (or tightens) for them.
    pub fn dir_mode(self) -> u32 {
        if self.group.is_some() {
            0o750
        } else {
            0o700
        }
    }
}

/// The database's companion files that stay while it is open, which hold the same data.
pub fn companions(path: &Path) -> [PathBuf; 2] {
    [with_suffix(path, "-wal"), with_suffix(path, "-shm")]
}

/// Creates `dirs` (missing directories of the database's path, outermost first) with
/// `access`'s directory mode and group.
pub fn create_dirs(dirs: &[PathBuf], access: Access) -> Result<(), StoreError> {
    for dir in dirs {
        let failed = |source| StoreError::CreateDir {
            path: dir.clone(),
            source,
        };
        match DirBuilder::new().mode(access.dir_mode()).create(dir) {
            Ok(()) => {}
            // Created meanwhile: checked with the rest of the chain afterwards.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(failed(e)),
        }
        // Exactly the mode, whatever the umask.
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(access.dir_mode()))
            .and_then(|()| set_group(dir, access))
            .map_err(failed)?;
    }
    Ok(())
}

/// Opens the database file without following a symbolic link, or creates it (`O_EXCL`)
/// with `access`'s mode and group, and checks what was opened: a regular file of this
/// process's user. Returns its metadata (the identity SQLite must open too).
pub fn open_file(path: &Path, access: Access) -> Result<Metadata, StoreError> {
    let failed = |source| StoreError::Permissions {
        path: path.to_path_buf(),
        source,
    };
    let created = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(access.file_mode())
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path);
    let file = match created {
        Ok(file) => {
            if let Some(gid) = access.group {
                nix::unistd::fchown(std::os::fd::AsRawFd::as_raw_fd(&file), None, Some(gid))
                    .map_err(|e| failed(e.into()))?;
            }
            file
        }
        // O_NONBLOCK: something that is not a regular file must not hang the open.
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open(path)
            .map_err(failed)?,
        Err(e) => return Err(failed(e)),
    };
    let meta = file.metadata().map_err(failed)?;
    if !meta.is_file() {
        return Err(StoreError::Untrusted {
            path: path.to_path_buf(),
            problems: Problems(vec![Problem::NotRegular {
                path: path.to_path_buf(),
            }]),
        });
    }
    let me = nix::unistd::geteuid().as_raw();
    if meta.uid() != me {
        return Err(StoreError::ForeignOwner {
            path: path.to_path_buf(),
            owner: meta.uid(),
            me,
        });
    }
    // Closed before SQLite opens it: closing a second descriptor later would drop the
    // POSIX locks SQLite takes on the file.
    Ok(meta)
}

/// Sets the database's and its companions' mode (and group) to `access`, tightening any
/// that were loosened.
pub fn restrict(path: &Path, access: Access) -> Result<(), StoreError> {
    let [wal, shm] = companions(path);
    for file in [path, &wal, &shm] {
        let meta = match std::fs::metadata(file) {
            Ok(m) => m,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(source) => {
                return Err(StoreError::Permissions {
                    path: file.to_path_buf(),
                    source,
                })
            }
        };
        let result = set_group(file, access).and_then(|()| {
            if meta.permissions().mode() & 0o777 != access.file_mode() {
                tracing::info!(
                    path = %file.display(),
                    "history database mode {:o} → {:o}",
                    meta.permissions().mode() & 0o777,
                    access.file_mode()
                );
                std::fs::set_permissions(file, std::fs::Permissions::from_mode(access.file_mode()))
            } else {
                Ok(())
            }
        });
        result.map_err(|source| StoreError::Permissions {
            path: file.to_path_buf(),
            source,
        })?;
    }
    Ok(())
}

/// Gives `path` `access`'s group, if it has one.
pub(super) fn set_group(path: &Path, access: Access) -> io::Result<()> {
    match access.group {
        Some(gid) => nix::unistd::chown(path, None, Some(gid)).map_err(io::Error::from),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::store::{Retention, Store};

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path)
            .expect("metadata")
            .permissions()
            .mode()
            & 0o777
    }

    /// The database and both companions, which must all exist while a store is open.
    fn files(path: &Path) -> Vec<PathBuf> {
        let mut all = vec![path.to_path_buf()];
        all.extend(companions(path));
        for f in &all {
            assert!(f.exists(), "{} missing", f.display());
        }
        all
    }

    #[test]
    fn history_is_private_and_stays_private() {
        let dir = crate::daemon::store::tests::tempdir();
        let path = dir.path().join("state/history.db");
        // A permissive umask, as a shell's 022 or worse, must not matter.
        let old = nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o000));
        let store = Store::open(&path, Retention::default());
        nix::sys::stat::umask(old);
        let store = store.expect("open");
        assert_eq!(mode(dir.path().join("state").as_path()), 0o700);
        for f in files(&path) {
            assert_eq!(mode(&f), 0o600, "{}", f.display());
        }
        drop(store);

        // Loosened by hand: tightened again at the next open.
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        let store = Store::open(&path, Retention::default()).expect("reopen");
        for f in files(&path) {
            assert_eq!(mode(&f), 0o600, "{}", f.display());
        }
        drop(store);
    }

    #[test]
    fn a_configured_group_may_read() {
        let dir = crate::daemon::store::tests::tempdir();
        let path = dir.path().join("history.db");
        // Our own primary group: chown to it needs no privilege.
        let gid = nix::unistd::getegid();
        let access = Access { group: Some(gid) };
        let store = Store::open_with(&path, Retention::default(), access).expect("open");
        for f in files(&path) {
            assert_eq!(mode(&f), 0o640, "{}", f.display());
            let meta = std::fs::metadata(&f).expect("metadata");
            assert_eq!(meta.gid(), gid.as_raw(), "{}", f.display());
        }
        drop(store);
        // Without the group again: private again.
        let store = Store::open(&path, Retention::default()).expect("reopen");
        for f in files(&path) {
            assert_eq!(mode(&f), 0o600, "{}", f.display());
        }
        drop(store);
    }

    #[test]
    fn a_database_another_user_owns_is_refused_untouched() {
        if !crate::testing::root_or_skip("to give a file to another user") {
            return;
        }
        let dir = crate::daemon::store::tests::tempdir();
        let path = dir.path().join("history.db");
        drop(Store::open(&path, Retention::default()).expect("open"));
        let nobody = nix::unistd::Uid::from_raw(65534);
        nix::unistd::chown(&path, Some(nobody), None).expect("chown");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).expect("chmod");
        let err = Store::open(&path, Retention::default()).expect_err("must refuse");
        assert!(
            matches!(err, StoreError::ForeignOwner { owner: 65534, .. }),
            "{err:?}"
        );
        assert!(err.to_string().contains("uid 65534"), "{err}");
        assert_eq!(mode(&path), 0o666, "a refused file keeps its mode");
    }
}

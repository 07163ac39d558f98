//! Whose files make up the history database. The agent runs as root, and SQLite reads more
//! than the database: a `-journal` or `-wal` file next to it is replayed into it, and the
//! `-shm` file indexes the WAL. Whoever can put a file under one of those names, or swap
//! the database for a symbolic link, can make root overwrite a file of their choosing or
//! serve findings they wrote. So, before SQLite sees anything:
//!
//! - the path is resolved once (symbolic links in the directories are followed, as the
//!   administrator set them up) and SQLite is given the resolved path with
//!   `SQLITE_OPEN_NOFOLLOW`, so it opens exactly what was checked;
//! - the database itself must not be a symbolic link or anything but a regular file;
//! - every directory from `/` to the database's is owned by root or the agent's user and
//!   writable by nobody else; an ancestor may be sticky and world-writable like `/tmp`
//!   (nobody can rename what root owns in it), the database's own directory may not (anyone
//!   could claim the `-journal`, `-wal` and `-shm` names, which SQLite creates on demand and
//!   without `O_EXCL`), except that an empty one of root's that is not sticky (a fresh
//!   Kubernetes emptyDir is 0777) is given the agent's directory mode first;
//! - the database and an existing `-journal`, `-wal` or `-shm` file must be regular files
//!   of the agent's user that no other user can write (one they could read is merely
//!   tightened, by `file`).
//!
//! Everything is checked with `lstat`, and every problem found is reported at once, with
//! its fix; nothing is created, opened or changed in a path that is refused.

use std::fs::Metadata;
use std::io;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::file::{set_group, Access};
use super::problem::{with_suffix, Problem, Problems};
use super::StoreError;
use crate::config::trusted::trusted_uid;

/// Suffixes of the files SQLite opens next to the database, and replays or trusts.
pub const COMPANION_SUFFIXES: [&str; 3] = ["-journal", "-wal", "-shm"];

fn untrusted(path: &Path, problems: Vec<Problem>) -> StoreError {
    StoreError::Untrusted {
        path: path.to_path_buf(),
        problems: Problems(problems),
    }
}

/// Resolves `path` to the absolute, symlink-free path SQLite is given, and checks the
/// directories that exist on the way and the files SQLite would read. Returns it with the
/// directories still to create, outermost first.
pub fn resolve(path: &Path, access: Access) -> Result<(PathBuf, Vec<PathBuf>), StoreError> {
    let (Some(name), Some(parent)) = (path.file_name(), path.parent()) else {
        let problem = Problem::NoFileName {
            path: path.to_path_buf(),
        };
        return Err(untrusted(path, vec![problem]));
    };
    let dot = |p: &Path| -> PathBuf {
        if p.as_os_str().is_empty() {
            PathBuf::from(".")
        } else {
            p.to_path_buf()
        }
    };
    // The deepest directory that exists; the ones below it are created later.
    let mut missing = Vec::new();
    let mut existing = dot(parent);
    while let Err(e) = existing.symlink_metadata() {
        let component = existing
            .file_name()
            .filter(|_| e.kind() == io::ErrorKind::NotFound)
            .map(ToOwned::to_owned);
        let (Some(component), Some(up)) = (component, existing.parent()) else {
            return Err(StoreError::CreateDir {
                path: existing,
                source: e,
            });
        };
        missing.push(component);
        existing = dot(up);
    }
    let base = std::fs::canonicalize(&existing).map_err(|source| StoreError::CreateDir {
        path: existing.clone(),
        source,
    })?;
    let mut dir = base.clone();
    let mut to_create = Vec::new();
    for component in missing.iter().rev() {
        dir.push(component);
        to_create.push(dir.clone());
    }
    let db = dir.join(name);
    let mut problems = check_dir_chain(&base, to_create.is_empty())?;
    if let [Problem::WritableDir { dir, mode }] = problems.as_slice() {
        if *dir == base && tighten_if_empty(dir, *mode, access)? {
            problems.clear();
        }
    }
    if !problems.is_empty() {
        // Looking (lstat) does no harm: name every file to remove at once.
        problems.extend(file_problems(&db));
        return Err(untrusted(&db, problems));
    }
    Ok((db, to_create))
}

/// Gives the deepest existing directory of the database's path, root's but writable by
/// others (not sticky), `access`'s mode and group if it is empty, as a fresh Kubernetes
/// emptyDir (0777) is: once others cannot write it, an empty directory holds nothing they
/// prepared. Otherwise leaves it as it was and returns false. The mode changes first, so
/// nothing can be added in between.
fn tighten_if_empty(dir: &Path, mode: u32, access: Access) -> Result<bool, StoreError> {
    let dir_mode = access.dir_mode();
    if mode & 0o1000 != 0 {
        return Ok(false);
    }
    let failed = |source| StoreError::Permissions {
        path: dir.to_path_buf(),
        source,
    };
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(dir_mode)).map_err(failed)?;
    let empty = std::fs::read_dir(dir).map_err(failed)?.next().is_none();
    if empty {
        set_group(dir, access).map_err(failed)?;
        tracing::info!(dir = %dir.display(), "empty directory of mode {mode:04o} made {dir_mode:04o} for the history database");
    } else {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode)).map_err(failed)?;
    }
    Ok(empty)
}

/// The problems of `dir` and every directory above it, outermost first. `holds_db`: `dir`
/// is the database's own directory, which may not be writable by others even if sticky.
pub fn check_dir_chain(dir: &Path, holds_db: bool) -> Result<Vec<Problem>, StoreError> {
    let mut problems = Vec::new();
    for (i, d) in dir.ancestors().enumerate() {
        let meta = d
            .symlink_metadata()
            .map_err(|source| StoreError::Permissions {
                path: d.to_path_buf(),
                source,
            })?;
        problems.extend(dir_problem(d, &meta, holds_db && i == 0));
    }
    problems.reverse();
    Ok(problems)
}

fn dir_problem(dir: &Path, meta: &Metadata, holds_db: bool) -> Option<Problem> {
    if !meta.is_dir() {
        return Some(Problem::NotDir {
            path: dir.to_path_buf(),
        });
    }
    if !trusted_uid(meta.uid()) {
        return Some(Problem::ForeignDir {
            dir: dir.to_path_buf(),
            owner: meta.uid(),
        });
    }
    let mode = meta.permissions().mode() & 0o7777;
    let others_write = mode & 0o022 != 0;
    let sticky = mode & 0o1000 != 0;
    (others_write && (holds_db || !sticky)).then(|| Problem::WritableDir {
        dir: dir.to_path_buf(),
        mode,
    })
}

/// The problems of the database (`db`, in a checked directory) and of the companions
/// that exist: symbolic links, other kinds of files, other users' files.
fn file_problems(db: &Path) -> Vec<Problem> {
    let mut problems = Vec::new();
    if let Ok(meta) = db.symlink_metadata() {
        if meta.file_type().is_symlink() {
            let target = std::fs::read_link(db).unwrap_or_default();
            problems.push(Problem::Symlink {
                path: db.to_path_buf(),
                target,
            });
        } else {
            problems.extend(file_problem(db, &meta));
        }
    }
    for suffix in COMPANION_SUFFIXES {
        let file = with_suffix(db, suffix);
        if let Ok(meta) = file.symlink_metadata() {
            problems.extend(file_problem(&file, &meta));
        }
    }
    problems
}

fn file_problem(file: &Path, meta: &Metadata) -> Option<Problem> {
    if !meta.is_file() {
        return Some(Problem::NotRegular {
            path: file.to_path_buf(),
        });
    }
    if !trusted_uid(meta.uid()) {
        return Some(Problem::ForeignFile {
            path: file.to_path_buf(),
            owner: meta.uid(),
        });
    }
    let mode = meta.permissions().mode() & 0o7777;
    (mode & 0o022 != 0).then(|| Problem::WritableFile {
        path: file.to_path_buf(),
        mode,
    })
}

/// Refuses the database if it or a companion is a symbolic link, not a regular file, or
/// another user's. Only another user's database alone is [`StoreError::ForeignOwner`].
pub fn check_files(db: &Path) -> Result<(), StoreError> {
    let problems = file_problems(db);
    match problems.as_slice() {
        [] => Ok(()),
        [Problem::ForeignFile { path, owner }] if path == db => Err(foreign_owner(db, *owner)),
        _ => Err(untrusted(db, problems)),
    }
}

/// [`StoreError::ForeignOwner`] for `db` owned by `owner`.
pub fn foreign_owner(db: &Path, owner: u32) -> StoreError {
    StoreError::ForeignOwner {
        path: db.to_path_buf(),
        owner,
        me: nix::unistd::geteuid().as_raw(),
    }
}

/// Checks that `db` is still the file that was opened and checked (same device and
/// inode), and that SQLite's companions are regular files of the agent's user.
pub fn check_again(db: &Path, opened: &Metadata) -> Result<(), StoreError> {
    let now = db
        .symlink_metadata()
        .map_err(|source| StoreError::Permissions {
            path: db.to_path_buf(),
            source,
        })?;
    if now.dev() != opened.dev() || now.ino() != opened.ino() {
        let problem = Problem::Replaced {
            path: db.to_path_buf(),
        };
        return Err(untrusted(db, vec![problem]));
    }
    check_files(db)
}

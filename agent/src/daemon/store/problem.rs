//! What makes a path of the history database untrustworthy ([`Problem`]), each with its
//! fix, as `trust` finds them and `file` reports them.

use std::fmt;
use std::path::{Path, PathBuf};

/// What makes a path of the history database untrustworthy, with its fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// The database path is a symbolic link.
    Symlink {
        /// The link.
        path: PathBuf,
        /// Where it points.
        target: PathBuf,
    },
    /// A file SQLite would open is not a regular file.
    NotRegular {
        /// The file.
        path: PathBuf,
    },
    /// A directory on the way is not a directory.
    NotDir {
        /// The path.
        path: PathBuf,
    },
    /// The database was replaced while it was being opened.
    Replaced {
        /// The file.
        path: PathBuf,
    },
    /// A file SQLite would open belongs to another user.
    ForeignFile {
        /// The file.
        path: PathBuf,
        /// Its owner.
        owner: u32,
    },
    /// A file SQLite would open is writable by other users.
    WritableFile {
        /// The file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// A directory on the way belongs to another user.
    ForeignDir {
        /// The directory.
        dir: PathBuf,
        /// Its owner.
        owner: u32,
    },
    /// A directory on the way is writable by users other than its owner.
    WritableDir {
        /// The directory.
        dir: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// The path does not end in a file name.
    NoFileName {
        /// The path given.
        path: PathBuf,
    },
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::Symlink { path, target } => write!(
                f,
                "{} is a symbolic link (to {}), which netdoctor does not follow: remove it, or \
                 give --database the path it points to if root made it",
                path.display(),
                target.display()
            ),
            Problem::NotRegular { path } => write!(
                f,
                "{} is not a regular file: move it away",
                path.display()
            ),
            Problem::NotDir { path } => write!(f, "{} is not a directory", path.display()),
            Problem::Replaced { path } => write!(
                f,
                "{} was replaced by another file while it was being opened",
                path.display()
            ),
            Problem::ForeignFile { path, owner } => write!(
                f,
                "{} belongs to uid {owner}, who could have written or still read it: remove it",
                path.display()
            ),
            Problem::WritableFile { path, mode } => write!(
                f,
                "{} is writable by other users (mode {mode:04o}), who may have written into it: \
                 `chmod 600 {}` if you trust what it holds, otherwise move it away",
                path.display(),
                path.display()
            ),
            Problem::ForeignDir { dir, owner } => write!(
                f,
                "the directory {} belongs to uid {owner}, who can replace the files in it: \
                 `chown root {}`, or choose a directory root owns",
                dir.display(),
                dir.display()
            ),
            Problem::WritableDir { dir, mode } if mode & 0o1000 != 0 => write!(
                f,
                "the directory {} is writable by other users (mode {mode:04o}; sticky, like \
                 /tmp, still lets anyone create the -journal, -wal and -shm files SQLite \
                 reads): use a directory only root can write, such as /var/lib/netdoctor, \
                 or a new subdirectory that netdoctor creates (--database {}/netdoctor/netdoctor.db)",
                dir.display(),
                dir.display()
            ),
            Problem::WritableDir { dir, mode } => write!(
                f,
                "the directory {} is writable by other users (mode {mode:04o}): `chmod go-w {}`, \
                 or choose a directory only root can write",
                dir.display(),
                dir.display()
            ),
            Problem::NoFileName { path } => {
                write!(f, "{} does not end in a file name", path.display())
            }
        }
    }
}

/// The problems of one refused path, one after the other.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problems(pub Vec<Problem>);

impl fmt::Display for Problems {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, p) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{p}")?;
        }
        Ok(())
    }
}

/// The file (`path` + `suffix`) next to the database.
pub fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(suffix);
    PathBuf::from(p)
}

//! What netdoctor, running as root, believes of what other users may control: the files it
//! reads because another program names them, the processes whose command line it takes
//! as a daemon's, and the sockets it asks. The one place for "is this root's" checks.
//!
//! - A file ([`read_root_owned`], [`read_private`]) is read only when root owns it and
//!   nobody else may write it, from a regular file, at most a given size, checked on the
//!   opened file so one swapped in between cannot pass.
//! - A process ([`Uids`]) counts as root's only when its real, effective and saved uids
//!   are all 0: a setuid-root program another user started has effective uid 0 but is
//!   that user's to steer (its name, arguments and descriptors are theirs).
//! - A socket ([`socket_file`], [`check_listener`]) is asked only when it is a socket
//!   (not a symbolic link to one elsewhere), root owns it, and the process listening on
//!   it (`SO_PEERCRED`) is root's.
//!
//! Wherever netdoctor's own user is trusted too (it may run as a user of its own), it
//! is trusted the same way: every uid root or that user.

mod file;
mod uids;

use std::fmt;
use std::path::PathBuf;

pub use file::{read_private, read_root_owned, socket_file};
pub use uids::{check_listener, Uids};

/// Whether `uid` is root or this process's (effective) user.
pub fn trusted_uid(uid: u32) -> bool {
    uid == 0 || uid == nix::unistd::geteuid().as_raw()
}

/// Why a file, socket or process was not believed.
#[derive(Debug)]
pub enum Untrusted {
    /// Another user than root owns it.
    Owner(u32),
    /// Group or others may write it (the mode).
    Writable(u32),
    /// Others may read it (the mode): a secret would not be one.
    Readable(u32),
    /// Not a regular file.
    NotAFile,
    /// Larger than the caller reads.
    TooLarge(u64),
    /// A symbolic link another user owns (its owner chose where it leads).
    Link(u32),
    /// Its directory belongs to another user, who may replace what it holds.
    DirOwner(PathBuf, u32),
    /// Its directory may be written by others and is not sticky (the mode).
    DirWritable(PathBuf, u32),
    /// Not a socket: a symbolic link to one, or another kind of file.
    NotASocket,
    /// The process listening on the socket runs as another user (`SO_PEERCRED`).
    Listener(u32),
    /// The process listening on the socket has a uid of another user (a setuid program
    /// someone else started): its pid and uids.
    ListenerProcess(i32, Uids),
    /// It could not be opened or read.
    Io(std::io::Error),
}

impl fmt::Display for Untrusted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Untrusted::Owner(uid) => write!(f, "it belongs to uid {uid}, not root"),
            Untrusted::Writable(mode) => {
                write!(f, "users other than root may write it (mode {mode:o})")
            }
            Untrusted::Readable(mode) => {
                write!(f, "users other than root may read it (mode {mode:o})")
            }
            Untrusted::NotAFile => write!(f, "it is not a regular file"),
            Untrusted::TooLarge(n) => write!(f, "it is {n} bytes long"),
            Untrusted::Link(uid) => {
                write!(
                    f,
                    "it is a symbolic link that belongs to uid {uid}, not root"
                )
            }
            Untrusted::DirOwner(dir, uid) => {
                write!(
                    f,
                    "its directory {} belongs to uid {uid}, not root",
                    dir.display()
                )
            }
            Untrusted::DirWritable(dir, mode) => write!(
                f,
                "its directory {} may be written by users other than root and is not sticky \
                 (mode {mode:o})",
                dir.display()
            ),
            Untrusted::NotASocket => write!(f, "it is not a socket (a symbolic link or a file)"),
            Untrusted::Listener(uid) => {
                write!(f, "it is served by a process of uid {uid}, not root")
            }
            Untrusted::ListenerProcess(pid, uids) => write!(
                f,
                "it is served by process {pid}, which runs as {uids}, not only as root"
            ),
            Untrusted::Io(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for Untrusted {}

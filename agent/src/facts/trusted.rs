//! Reading files that other programs name, as root, without trusting their owners.
//!
//! netdoctor runs as root and learns paths from other processes (a daemon's binary, its
//! `--config` file). Such a file is read only when root owns it and nobody else may write
//! it, so an unprivileged user cannot feed netdoctor what it reads. It is only ever read,
//! never executed.

use std::fmt;
use std::fs::File;
use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;

/// Why a file was not read.
#[derive(Debug)]
pub enum Untrusted {
    /// Another user than root owns it.
    Owner(u32),
    /// Group or others may write it (the mode).
    Writable(u32),
    /// Not a regular file.
    NotAFile,
    /// Larger than the caller reads.
    TooLarge(u64),
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
            Untrusted::NotAFile => write!(f, "it is not a regular file"),
            Untrusted::TooLarge(n) => write!(f, "it is {n} bytes long"),
            Untrusted::Io(e) => write!(f, "{e}"),
        }
    }
}

/// Reads `path` (at most `max` bytes) if root owns it and only root may write it. The
/// checks are made on the opened file, so a file swapped in between cannot pass.
pub fn read_root_owned(path: &Path, max: u64) -> Result<Vec<u8>, Untrusted> {
    // O_NONBLOCK: a FIFO put in the file's place must not hang the diagnosis.
    let file = File::options()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(Untrusted::Io)?;
    let meta = file.metadata().map_err(Untrusted::Io)?;
    if !meta.is_file() {
        return Err(Untrusted::NotAFile);
    }
    if meta.uid() != 0 {
        return Err(Untrusted::Owner(meta.uid()));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(Untrusted::Writable(meta.mode() & 0o7777));
    }
    if meta.len() > max {
        return Err(Untrusted::TooLarge(meta.len()));
    }
    let mut data = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.take(max)
        .read_to_end(&mut data)
        .map_err(Untrusted::Io)?;
    Ok(data)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn root() -> bool {
        nix::unistd::geteuid().is_root()
    }

    #[test]
    fn root_owned_files_are_read_and_others_refused() {
        if !root() {
            assert!(std::env::var("CI").is_err(), "CI must run this as root");
            println!("SKIP: needs root to own files as root and as another user");
            return;
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("fastd.conf");
        std::fs::write(&path, "method \"null\";\n").expect("write");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        assert_eq!(
            read_root_owned(&path, 1 << 20).expect("root's file"),
            b"method \"null\";\n"
        );
        assert!(matches!(
            read_root_owned(&path, 4),
            Err(Untrusted::TooLarge(15))
        ));

        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o664)).expect("chmod");
        assert!(matches!(
            read_root_owned(&path, 1 << 20),
            Err(Untrusted::Writable(0o664))
        ));

        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        nix::unistd::chown(&path, Some(nix::unistd::Uid::from_raw(65534)), None).expect("chown");
        let e = read_root_owned(&path, 1 << 20).expect_err("another user's file");
        assert!(matches!(e, Untrusted::Owner(65534)), "{e:?}");
        assert_eq!(e.to_string(), "it belongs to uid 65534, not root");

        assert!(matches!(
            read_root_owned(dir.path(), 1 << 20),
            Err(Untrusted::NotAFile)
        ));
    }
}

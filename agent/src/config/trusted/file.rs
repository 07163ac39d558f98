//! Reading files other programs name, and checking socket files, as [`super`] says: only
//! regular files (sockets) root owns and nobody else may write, at most a given size.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::Path;

use super::{trusted_uid, Untrusted};

/// Opens `path` for reading without hanging or taking a terminal (a FIFO with no writer
/// must not hang, a tty must not become netdoctor's), and returns it with its metadata
/// if it is a regular file.
fn open_regular(path: &Path) -> Result<(File, std::fs::Metadata), Untrusted> {
    let file = File::options()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(Untrusted::Io)?;
    let meta = file.metadata().map_err(Untrusted::Io)?;
    if !meta.is_file() {
        return Err(Untrusted::NotAFile);
    }
    Ok((file, meta))
}

/// At most `max` bytes of `file`, whose metadata says `meta`; longer is an error, even
/// when the file grew since.
fn read_bounded(file: File, meta: &std::fs::Metadata, max: u64) -> Result<Vec<u8>, Untrusted> {
    if meta.len() > max {
        return Err(Untrusted::TooLarge(meta.len()));
    }
    let mut data = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.take(max + 1)
        .read_to_end(&mut data)
        .map_err(Untrusted::Io)?;
    if data.len() as u64 > max {
        return Err(Untrusted::TooLarge(data.len() as u64));
    }
    Ok(data)
}

/// Reads `path` (at most `max` bytes) if root owns it and only root may write it. The
/// checks are made on the opened file, so a file swapped in between cannot pass.
pub fn read_root_owned(path: &Path, max: u64) -> Result<Vec<u8>, Untrusted> {
    let (file, meta) = open_regular(path)?;
    if meta.uid() != 0 {
        return Err(Untrusted::Owner(meta.uid()));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(Untrusted::Writable(meta.mode() & 0o7777));
    }
    read_bounded(file, &meta, max)
}

/// Reads a secret at `path` (at most `max` bytes): a regular file that root (or this
/// process's user) owns, that nobody else may write and that others may not read; its
/// group may read it (mode 0640 or 0440: whoever gave the file a group chose its members,
/// as Kubernetes does for a Secret mounted with `fsGroup`). The path may be a symbolic
/// link (Kubernetes mounts Secrets as `token -> ..data/token`) when root (or this user)
/// owns the link, in a directory no other user may replace it in: one root (or this
/// user) owns, that others may not write unless it is sticky (as `/tmp`, or the tmpfs a
/// Secret is mounted on).
pub fn read_private(path: &Path, max: u64) -> Result<Vec<u8>, Untrusted> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let d = std::fs::metadata(dir).map_err(Untrusted::Io)?;
    if !trusted_uid(d.uid()) {
        return Err(Untrusted::DirOwner(dir.to_owned(), d.uid()));
    }
    if d.mode() & 0o022 != 0 && d.mode() & 0o1000 == 0 {
        return Err(Untrusted::DirWritable(dir.to_owned(), d.mode() & 0o7777));
    }
    let link = std::fs::symlink_metadata(path).map_err(Untrusted::Io)?;
    if link.file_type().is_symlink() && !trusted_uid(link.uid()) {
        return Err(Untrusted::Link(link.uid()));
    }
    let (file, meta) = open_regular(path)?;
    if !trusted_uid(meta.uid()) {
        return Err(Untrusted::Owner(meta.uid()));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(Untrusted::Writable(meta.mode() & 0o7777));
    }
    if meta.mode() & 0o007 != 0 {
        return Err(Untrusted::Readable(meta.mode() & 0o7777));
    }
    read_bounded(file, &meta, max)
}

/// Checks that `path` is itself a socket (not a symbolic link to one, which whoever
/// owns its target chose) and that root (or this process's user) owns it. Who listens
/// on it is [`super::check_listener`]'s to check once connected.
pub fn socket_file(path: &Path) -> Result<(), Untrusted> {
    let meta = std::fs::symlink_metadata(path).map_err(Untrusted::Io)?;
    if !meta.file_type().is_socket() {
        return Err(Untrusted::NotASocket);
    }
    if !trusted_uid(meta.uid()) {
        return Err(Untrusted::Owner(meta.uid()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn root_owned_files_are_read_and_others_refused() {
        if !crate::testing::root_or_skip("to own files as root and as another user") {
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

    /// A Secret volume as the kubelet lays it out: a sticky tmpfs-like directory (1777)
    /// holding `token -> ..data/token`, `..data -> ..TIMESTAMP`, the file 0400 (0440 and
    /// the group `fsGroup` names when one is set): read. A symbolic link another user
    /// planted, or a directory another user may write: refused.
    #[test]
    fn secrets_through_root_links_in_sticky_directories_are_read() {
        if !crate::testing::root_or_skip("to own files as root and as another user") {
            return;
        }
        let volume = tempfile::tempdir().expect("tempdir");
        let v = volume.path();
        std::fs::set_permissions(v, std::fs::Permissions::from_mode(0o1777)).expect("chmod");
        let data = v.join("..2026_01_01_00_00_00.000000001");
        std::fs::create_dir(&data).expect("mkdir");
        std::fs::write(data.join("token"), "s3cr3t-t0ken-0123456789\n").expect("write");
        let file = data.join("token");
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o400)).expect("chmod");
        std::os::unix::fs::symlink("..2026_01_01_00_00_00.000000001", v.join("..data"))
            .expect("symlink");
        std::os::unix::fs::symlink("..data/token", v.join("token")).expect("symlink");
        let token = v.join("token");
        assert_eq!(
            read_private(&token, 4096).expect("root's Secret"),
            b"s3cr3t-t0ken-0123456789\n"
        );
        // fsGroup: group-readable, the group chosen.
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o440)).expect("chmod");
        nix::unistd::chown(&file, None, Some(nix::unistd::Gid::from_raw(2000))).expect("chgrp");
        assert!(read_private(&token, 4096).is_ok());

        // The same link planted by another user, leading to root's file.
        let planted = v.join("planted");
        std::os::unix::fs::symlink(&file, &planted).expect("symlink");
        let nobody = Some(nix::unistd::Uid::from_raw(65534));
        nix::unistd::fchownat(
            None,
            &planted,
            nobody,
            None,
            nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
        )
        .expect("lchown");
        let e = read_private(&planted, 4096).expect_err("another user's link");
        assert!(matches!(e, Untrusted::Link(65534)), "{e:?}");

        // Root's file in a directory another user may write (not sticky), or owns.
        std::fs::set_permissions(v, std::fs::Permissions::from_mode(0o777)).expect("chmod");
        let e = read_private(&token, 4096).expect_err("a writable directory");
        assert!(matches!(e, Untrusted::DirWritable(_, 0o777)), "{e:?}");
        std::fs::set_permissions(v, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        nix::unistd::chown(v, nobody, None).expect("chown");
        let e = read_private(&token, 4096).expect_err("another user's directory");
        assert!(matches!(e, Untrusted::DirOwner(_, 65534)), "{e:?}");
    }

    #[test]
    fn only_sockets_themselves_are_sockets() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("wg0.sock");
        let _listener = std::os::unix::net::UnixListener::bind(&path).expect("bind");
        socket_file(&path).expect("a socket of this user");
        let link = dir.path().join("wg1.sock");
        std::os::unix::fs::symlink(&path, &link).expect("symlink");
        assert!(matches!(socket_file(&link), Err(Untrusted::NotASocket)));
        let file = dir.path().join("wg2.sock");
        std::fs::write(&file, "").expect("write");
        assert!(matches!(socket_file(&file), Err(Untrusted::NotASocket)));
        if !crate::testing::root_or_skip("to give the socket to another user") {
            return;
        }
        nix::unistd::chown(&path, Some(nix::unistd::Uid::from_raw(65534)), None).expect("chown");
        assert!(matches!(socket_file(&path), Err(Untrusted::Owner(65534))));
    }
}

//! The agent's bearer token, read from `--token-file`: a secret only root (or the agent's
//! own user) may choose or read, so the file is read only when
//! [`crate::config::trusted::read_private`] allows it: a regular file (no FIFO, device or
//! directory) of at most [`MAX_TOKEN_FILE`] bytes, owned by root or the agent's user,
//! written by nobody else and read by nobody but them and its group (0600, 0400; 0640 or
//! 0440 shares it with the file's group, as Kubernetes does for a Secret mounted with
//! `fsGroup`), through a path no other user may have swapped. A refusal names the fix.

use std::path::Path;

use crate::config::trusted::{self, Untrusted};

/// A token file holds one line of at most a few hundred characters.
pub const MAX_TOKEN_FILE: u64 = 4096;

/// Shortest token accepted.
const MIN_TOKEN: usize = 16;

/// Reads the token in `path`, refusing a file another user may control or read.
pub fn read(path: &Path) -> anyhow::Result<String> {
    let shown = path.display();
    let bytes = trusted::read_private(path, MAX_TOKEN_FILE).map_err(|why| {
        let fix = fix(path, &why);
        match why {
            Untrusted::Io(e) => anyhow::anyhow!("reading the token file {shown}: {e}"),
            why => anyhow::anyhow!("refusing the token file {shown}: {why}; {fix}"),
        }
    })?;
    let text = String::from_utf8(bytes)
        .map_err(|_| anyhow::anyhow!("the token file {shown} is not UTF-8 text"))?;
    let token = text.trim().to_owned();
    anyhow::ensure!(
        token.len() >= MIN_TOKEN,
        "the token in {shown} is {} characters long; use at least {MIN_TOKEN} (e.g. \
         `(umask 077; openssl rand -hex 32 > {shown})`)",
        token.len()
    );
    Ok(token)
}

/// What makes the file acceptable.
fn fix(path: &Path, why: &Untrusted) -> String {
    let shown = path.display();
    let me = nix::unistd::geteuid();
    let owner = if me.is_root() {
        "root".to_owned()
    } else {
        me.to_string()
    };
    match why {
        Untrusted::Owner(_) => format!(
            "another user could choose the token: `chown {owner} {shown}` (after checking \
             what it holds)"
        ),
        Untrusted::Writable(_) | Untrusted::Readable(_) => format!(
            "another user could choose or read the token: `chmod 600 {shown}` (or 640 for \
             its group to read it)"
        ),
        Untrusted::NotAFile => "give a regular file holding the token".to_owned(),
        Untrusted::TooLarge(_) => format!(
            "a token file holds only the token, at most {MAX_TOKEN_FILE} bytes (e.g. \
             `(umask 077; openssl rand -hex 32 > {shown})`)"
        ),
        Untrusted::Link(_) => format!(
            "another user chose where it leads: remove the link and give the file itself \
             (`rm {shown}`)"
        ),
        Untrusted::DirOwner(dir, _) | Untrusted::DirWritable(dir, _) => format!(
            "another user could swap the file: keep it in a directory only {owner} may \
             write, e.g. `chown {owner} {d} && chmod go-w {d}`",
            d = dir.display()
        ),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn token_file(dir: &Path, mode: u32) -> std::path::PathBuf {
        let path = dir.join("token");
        std::fs::write(&path, "0123456789abcdef0123456789abcdef\n").expect("write");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).expect("chmod");
        path
    }

    #[test]
    fn a_private_token_file_is_read_and_others_refused_with_the_fix() {
        let dir = tempfile::tempdir().expect("tempdir");
        for mode in [0o600, 0o400, 0o640, 0o440] {
            let path = token_file(dir.path(), mode);
            assert_eq!(
                read(&path).expect("a private file"),
                "0123456789abcdef0123456789abcdef"
            );
        }
        let path = token_file(dir.path(), 0o644);
        let e = read(&path).expect_err("others may read it").to_string();
        assert!(
            e.contains("may read it (mode 644)")
                && e.contains(&format!("`chmod 600 {}`", path.display())),
            "{e}"
        );
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o620)).expect("chmod");
        let e = read(&path).expect_err("group may write it").to_string();
        assert!(
            e.contains("may write it (mode 620)") && e.contains("chmod 600"),
            "{e}"
        );
        if !crate::testing::root_or_skip("to give the file to another user") {
            return;
        }
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        nix::unistd::chown(&path, Some(nix::unistd::Uid::from_raw(65534)), None).expect("chown");
        let e = read(&path).expect_err("another user's file").to_string();
        assert!(
            e.contains("belongs to uid 65534, not root")
                && e.contains(&format!("`chown root {}`", path.display())),
            "{e}"
        );
    }

    /// /dev/zero and a FIFO nobody writes: refused at once, nothing read.
    #[test]
    fn devices_fifos_and_long_files_are_refused_at_once() {
        let started = std::time::Instant::now();
        let e = read(Path::new("/dev/zero"))
            .expect_err("a device")
            .to_string();
        assert!(e.contains("not a regular file"), "{e}");
        let dir = tempfile::tempdir().expect("tempdir");
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600))
            .expect("mkfifo");
        let e = read(&fifo).expect_err("a FIFO").to_string();
        assert!(e.contains("not a regular file"), "{e}");
        assert!(
            started.elapsed() < std::time::Duration::from_secs(1),
            "{:?}",
            started.elapsed()
        );
        let long = dir.path().join("long");
        std::fs::write(&long, "a".repeat(5000)).expect("write");
        std::fs::set_permissions(&long, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        let e = read(&long).expect_err("too long").to_string();
        assert!(
            e.contains("5000 bytes long") && e.contains("at most 4096"),
            "{e}"
        );
        let e = read(&dir.path().join("missing"))
            .expect_err("missing")
            .to_string();
        assert!(e.starts_with("reading the token file"), "{e}");
    }
}

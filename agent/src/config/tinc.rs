//! Which protocol a tinc daemon speaks: 1.0's legacy protocol or 1.1's SPTPS, which frame
//! packets differently and so add different overheads.
//!
//! The version is read from the daemon's own binary *as data*: tinc compiles its version
//! (`PACKAGE_VERSION`, e.g. "1.0.36", "1.1pre18") in as a string of its own. The binary
//! is never run (netdoctor runs as root; whoever owns the binary would choose what root
//! runs), and read only for a daemon that is root's by every uid, when root owns the
//! binary and nobody else may write it.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use super::process::TunOwner;
use super::trusted::{self, Untrusted};

/// tincd binaries are a few hundred kilobytes; a static build a few megabytes.
const MAX_BINARY: u64 = 64 << 20;

/// The version compiled into the binary of the daemon `owner`; the error says why it
/// was not read.
pub fn version_of(owner: &TunOwner) -> Result<Option<String>, String> {
    let exe = format!("/proc/{}/exe", owner.pid);
    if !owner.uids.root() {
        // Whose the binary is, too, when that is another user's as well.
        let binary = match std::fs::metadata(&exe) {
            Ok(m) if m.uid() != 0 => format!("{}, and ", Untrusted::Owner(m.uid())),
            _ => String::new(),
        };
        return Err(format!(
            "{binary}the daemon runs as {}, not root",
            owner.uids
        ));
    }
    let binary =
        trusted::read_root_owned(Path::new(&exe), MAX_BINARY).map_err(|e| e.to_string())?;
    Ok(version_in(&binary))
}

/// Whether `version` is tinc 1.1 (SPTPS) rather than 1.0.
pub fn speaks_sptps(version: &str) -> bool {
    version.starts_with("1.1")
}

/// The first string in `binary` shaped like a tinc version: `1.0.N`, `1.1preN` or
/// `1.1.N`, optionally followed by a `-`, `+` or `~` suffix (`git describe`, distribution
/// builds). Strings are the runs of bytes between NULs.
fn version_in(binary: &[u8]) -> Option<String> {
    binary
        .split(|b| *b == 0)
        .filter(|s| (5..=40).contains(&s.len()))
        .filter_map(|s| std::str::from_utf8(s).ok())
        .find(|s| is_version(s))
        .map(str::to_owned)
}

fn is_version(s: &str) -> bool {
    let Some(rest) = ["1.0.", "1.1pre", "1.1."]
        .iter()
        .find_map(|prefix| s.strip_prefix(prefix))
    else {
        return false;
    };
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    let suffix = &rest[digits..];
    digits > 0
        && (suffix.is_empty()
            || (suffix.starts_with(['-', '+', '~'])
                && suffix[1..]
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-+~.".contains(&b))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_version_string_among_others() {
        let binary = b"\x7fELF\0\0%s version %s\0tinc\0OpenSSL 1.1.1w  11 Sep 2023\0\
                       1.1.1w\0Peer %s uses incompatible version %d\x001.0.36\0--version\0";
        assert_eq!(version_in(binary).as_deref(), Some("1.0.36"));
        let binary = b"\0tinc\x001.1pre18-3-gabc123\0";
        assert_eq!(version_in(binary).as_deref(), Some("1.1pre18-3-gabc123"));
        assert!(speaks_sptps("1.1pre18-3-gabc123"));
        assert!(!speaks_sptps("1.0.36"));
        assert_eq!(version_in(b"\x001.0.\0 1.0.3\x001.2.0\0v1.0.3\0"), None);
    }

    #[test]
    fn reads_this_machines_tincd_without_running_it() {
        // The tincd of this machine, when installed (the lab installs Debian's tinc).
        let path = Path::new("/usr/sbin/tincd");
        let Ok(binary) = trusted::read_root_owned(path, MAX_BINARY) else {
            assert!(std::env::var("CI").is_err(), "CI installs tinc (.ci/setup)");
            println!("SKIP: no root-owned /usr/sbin/tincd");
            return;
        };
        let version = version_in(&binary).expect("a version string in tincd");
        assert!(
            version.starts_with("1.0.") || version.starts_with("1.1"),
            "{version}"
        );
    }
}

//! Rule files that are not small regular files are refused at once, naming the file: a
//! FIFO (which would block the loader for good), a link to `/dev/zero` (which would be read
//! until memory runs out), a directory, a file past 64 KiB, bytes that are not UTF-8.

use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use super::rule_file;
use crate::rules::{RuleError, RuleSet};

/// A valid rule file.
fn valid() -> String {
    rule_file("site.valid", "interface", "iface.mtu > 0")
}

/// The errors of loading `dir`, which must come within a second.
fn load_within_a_second(dir: &Path) -> Result<RuleSet, Vec<RuleError>> {
    let (tx, rx) = mpsc::channel();
    let dir = dir.to_owned();
    std::thread::spawn(move || {
        let _ = tx.send(RuleSet::load_dir(&dir));
    });
    rx.recv_timeout(Duration::from_secs(1))
        .expect("loading the rules answers within a second")
}

/// The one error of loading `dir`.
fn only_error(dir: &Path) -> String {
    match load_within_a_second(dir) {
        Ok(set) => panic!("loaded {} rules", set.rules().len()),
        Err(errors) => {
            assert_eq!(errors.len(), 1, "{errors:?}");
            errors[0].to_string()
        }
    }
}

#[test]
fn a_fifo_is_refused_without_waiting_for_a_writer() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let fifo = dir.path().join("fifo.toml");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).expect("mkfifo");
    let e = only_error(dir.path());
    assert!(
        e.starts_with(&fifo.display().to_string())
            && e.contains("is a FIFO, not a regular file: a rule file must be a regular file"),
        "{e}"
    );
}

#[test]
fn a_link_to_a_device_is_refused_without_reading_it() {
    let dir = tempfile::tempdir().expect("temporary directory");
    std::os::unix::fs::symlink("/dev/zero", dir.path().join("zero.toml")).expect("symlink");
    let e = only_error(dir.path());
    assert!(
        e.contains("zero.toml: is a character device, not a regular file"),
        "{e}"
    );

    let dir = tempfile::tempdir().expect("temporary directory");
    std::fs::create_dir(dir.path().join("d.toml")).expect("mkdir");
    let e = only_error(dir.path());
    assert!(
        e.contains("d.toml: is a directory, not a regular file"),
        "{e}"
    );
}

#[test]
fn a_file_past_64_kib_or_not_utf8_is_refused() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let padding = "# padding\n".repeat(6600);
    std::fs::write(dir.path().join("big.toml"), valid() + &padding).expect("write");
    let e = only_error(dir.path());
    assert!(
        e.contains("big.toml: is 65 KiB, more than the 64 KiB a rule file may have"),
        "{e}"
    );

    let dir = tempfile::tempdir().expect("temporary directory");
    let mut bytes = valid().into_bytes();
    bytes.extend_from_slice(b"# \xff\n");
    std::fs::write(dir.path().join("latin1.toml"), bytes).expect("write");
    let e = only_error(dir.path());
    assert!(e.contains("latin1.toml: is not UTF-8 text"), "{e}");
}

/// The healthy twins: a rule file just under the limit, and a link to a rule file.
#[test]
fn regular_files_up_to_64_kib_and_links_to_them_load() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let mut text = valid();
    while text.len() + 10 <= 64 * 1024 {
        text.push_str("# padding\n");
    }
    std::fs::write(dir.path().join("full.toml"), &text).expect("write");
    let other = tempfile::tempdir().expect("temporary directory");
    let target = other.path().join("linked.toml");
    std::fs::write(
        &target,
        rule_file("site.linked", "interface", "iface.mtu > 0"),
    )
    .expect("write");
    std::os::unix::fs::symlink(&target, dir.path().join("linked.toml")).expect("symlink");
    let set = load_within_a_second(dir.path()).expect("both load");
    let mut ids: Vec<&str> = set.rules().iter().map(|r| r.id.as_str()).collect();
    ids.sort();
    assert_eq!(ids, ["site.linked", "site.valid"]);
}

fn chmod(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

/// Rules print the fix an administrator runs as root: a rule file or a rules directory
/// another user owns or may write is refused, naming the fix.
#[test]
fn rules_another_user_may_write_are_refused() {
    if !crate::testing::root_or_skip("to give files to another user") {
        return;
    }
    let nobody = Some(nix::unistd::Uid::from_raw(65534));

    let dir = tempfile::tempdir().expect("temporary directory");
    let file = dir.path().join("theirs.toml");
    std::fs::write(&file, valid()).expect("write");
    nix::unistd::chown(&file, nobody, None).expect("chown");
    let e = only_error(dir.path());
    assert!(
        e.contains("theirs.toml: the rule file belongs to uid 65534")
            && e.contains(&format!("`chown root {}`", file.display())),
        "{e}"
    );

    let dir = tempfile::tempdir().expect("temporary directory");
    let file = dir.path().join("shared.toml");
    std::fs::write(&file, valid()).expect("write");
    chmod(&file, 0o664);
    let e = only_error(dir.path());
    assert!(
        e.contains(
            "shared.toml: the rule file may be written by users other than its owner (mode 0664)"
        ) && e.contains("`chmod go-w"),
        "{e}"
    );

    for mode in [0o777, 0o1777, 0o775] {
        let dir = tempfile::tempdir().expect("temporary directory");
        std::fs::write(dir.path().join("site.toml"), valid()).expect("write");
        chmod(dir.path(), mode);
        let e = only_error(dir.path());
        assert!(
            e.contains(&format!(
                "the rules directory may be written by users other than its owner (mode {mode:04o})"
            )),
            "{e}"
        );
    }

    let dir = tempfile::tempdir().expect("temporary directory");
    std::fs::write(dir.path().join("site.toml"), valid()).expect("write");
    nix::unistd::chown(dir.path(), nobody, None).expect("chown");
    let e = only_error(dir.path());
    assert!(
        e.contains("the rules directory belongs to uid 65534"),
        "{e}"
    );
}

/// The healthy twin: root's files, readable by all (0644, 0444), in root's 0755 directory,
/// and a link root made to its own directory.
#[test]
fn roots_rules_readable_by_all_load() {
    if !crate::testing::root_or_skip("to give files to another user") {
        return;
    }
    let dir = tempfile::tempdir().expect("temporary directory");
    chmod(dir.path(), 0o755);
    let a = dir.path().join("a.toml");
    std::fs::write(&a, rule_file("site.a", "interface", "iface.mtu > 0")).expect("write");
    chmod(&a, 0o444);
    std::fs::write(dir.path().join("b.toml"), valid()).expect("write");
    let link_dir = tempfile::tempdir().expect("temporary directory");
    let link = link_dir.path().join("rules");
    std::os::unix::fs::symlink(dir.path(), &link).expect("symlink");
    let set = load_within_a_second(&link).expect("root's rules load");
    assert_eq!(set.rules().len(), 2);
}

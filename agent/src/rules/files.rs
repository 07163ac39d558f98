//! Reading a rule file: a regular file of at most [`MAX_RULE_FILE`] bytes of UTF-8, in a
//! directory and from a file no user but root (or netdoctor's own user) controls.
//!
//! Rules decide what the agent reports and the fix it prints (the dashboard copies it with
//! one click), so whoever may write a rule file, or add one to the directory, writes what
//! an administrator may run as root. The directory must therefore belong to root (or this
//! process's user) and be writable by nobody else, sticky or not (anyone could add a file
//! to a sticky one), and so must each file, checked on the opened descriptor.
//!
//! A `*.toml` in a rules directory may be anything a name can be: a FIFO (reading it waits
//! for a writer that never comes, and the agent serves nothing meanwhile), a link to
//! `/dev/zero` (read until memory runs out), a directory. The file is opened without
//! blocking and without becoming a controlling terminal, its type and size are taken from
//! the opened descriptor (so nothing can be swapped in between), and at most one byte more
//! than the limit is read.

use std::fs::{File, Metadata, OpenOptions};
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::Path;

use super::limits::MAX_RULE_FILE;
use crate::config::trusted::trusted_uid;

/// Why another user may control `meta`'s file or directory at `path`, with the fix.
fn controlled_by_another_user(meta: &Metadata, path: &Path) -> Option<String> {
    if !trusted_uid(meta.uid()) {
        return Some(format!(
            "belongs to uid {}, who could write the rules' findings and the fixes they print: \
             `chown root {}`",
            meta.uid(),
            path.display()
        ));
    }
    let mode = meta.mode() & 0o7777;
    if mode & 0o022 != 0 {
        return Some(format!(
            "may be written by users other than its owner (mode {mode:04o}), who could write \
             the rules' findings and the fixes they print: `chmod go-w {}`",
            path.display()
        ));
    }
    None
}

/// Checks that no other user controls the rules directory `dir` (it may be a symbolic
/// link an administrator made: what it leads to is checked).
pub fn check_dir(dir: &Path) -> Result<(), String> {
    let meta = std::fs::metadata(dir).map_err(|e| format!("cannot read rules directory: {e}"))?;
    match controlled_by_another_user(&meta, dir) {
        Some(why) => Err(format!("the rules directory {why}")),
        None => Ok(()),
    }
}

/// What kind of file `meta` describes, for messages.
fn kind(meta: &Metadata) -> &'static str {
    let t = meta.file_type();
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

/// The text of the rule file at `path`; the error says what is wrong and what to do.
pub fn read(path: &Path) -> Result<String, String> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| format!("cannot open the rule file: {e}"))?;
    let meta = file
        .metadata()
        .map_err(|e| format!("cannot read the rule file's type: {e}"))?;
    if !meta.file_type().is_file() {
        return Err(format!(
            "is {}, not a regular file: a rule file must be a regular file; remove it or \
             rename it so it does not end in .toml",
            kind(&meta)
        ));
    }
    if let Some(why) = controlled_by_another_user(&meta, path) {
        return Err(format!("the rule file {why}"));
    }
    let too_big = |size: u64| {
        format!(
            "is {} KiB, more than the {} KiB a rule file may have: a rule is a few KiB, put \
             each rule in a file of its own",
            size.div_ceil(1024),
            MAX_RULE_FILE / 1024
        )
    };
    if meta.len() > MAX_RULE_FILE {
        return Err(too_big(meta.len()));
    }
    bounded(file, too_big)
}

/// Reads `file` (a regular file), failing with `too_big` if it has grown past the limit.
fn bounded(file: File, too_big: impl Fn(u64) -> String) -> Result<String, String> {
    let mut bytes = Vec::new();
    file.take(MAX_RULE_FILE + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read the rule file: {e}"))?;
    if bytes.len() as u64 > MAX_RULE_FILE {
        return Err(too_big(bytes.len() as u64));
    }
    String::from_utf8(bytes).map_err(|e| {
        format!(
            "is not UTF-8 text (invalid byte at offset {}): save it as UTF-8",
            e.utf8_error().valid_up_to()
        )
    })
}

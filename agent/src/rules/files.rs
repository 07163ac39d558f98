//! Reading a rule file: a regular file of at most [`MAX_RULE_FILE`] bytes of UTF-8.
//!
//! A `*.toml` in a rules directory may be anything a name can be: a FIFO (reading it waits
//! for a writer that never comes, and the agent serves nothing meanwhile), a link to
//! `/dev/zero` (read until memory runs out), a directory. The file is opened without
//! blocking and without becoming a controlling terminal, its type and size are taken from
//! the opened descriptor (so nothing can be swapped in between), and at most one byte more
//! than the limit is read.

use std::fs::{File, Metadata, OpenOptions};
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

use super::limits::MAX_RULE_FILE;

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

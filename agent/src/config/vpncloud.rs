//! VpnCloud (2.x), a TUN/TAP mesh daemon like tinc and fastd: which crypto algorithms it
//! may use, which decide its overhead (see `facts::overhead`).
//!
//! Every algorithm VpnCloud offers (AES128, AES256, CHACHA20: ring's AEADs) adds the same 24
//! bytes; only `plain` (also `none`, `unencrypted`), used when both peers allow it, adds
//! none. The algorithms come from `--algorithm`/`--algo` on the command line, or else the
//! configuration file's `crypto: algorithms:` (YAML, `--config FILE`; VpnCloud's `-c` is
//! `--peer`, not a file), read only for a daemon that is root's by every uid, from a file
//! root owns and only root may write, of at most [`MAX_CONFIG`] bytes. VpnCloud is never
//! run: its `--version` would run whatever binary a user placed.

use std::path::PathBuf;

use yaml_rust2::parser::{Event, Parser};

use super::process::TunOwner;
use super::trusted;

/// VpnCloud's configurations are a kilobyte or two.
pub const MAX_CONFIG: u64 = 64 << 10;

/// The algorithms the daemon `owner` is configured to allow, as written (empty: VpnCloud's
/// defaults, AES128, AES256 and CHACHA20, or not read). What was not read, and why, goes
/// to `notes`.
pub fn algorithms(owner: &TunOwner, notes: &mut Vec<String>) -> Vec<String> {
    let skipped = |what: &str, why: String| {
        format!(
            "VpnCloud's {what} was not read, so its overhead assumes an encrypting algorithm: \
             {why}"
        )
    };
    if !owner.uids.root() {
        notes.push(skipped(
            "configuration",
            format!(
                "the daemon (pid {}) runs as {}, not root",
                owner.pid, owner.uids
            ),
        ));
        return Vec::new();
    }
    let from_args = args_algorithms(&owner.args);
    if !from_args.is_empty() {
        return from_args;
    }
    let Some(path) = config_file(owner) else {
        return Vec::new();
    };
    let what = format!("configuration {}", path.display());
    let text = match trusted::read_root_owned(&path, MAX_CONFIG) {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(why) => {
            notes.push(skipped(&what, why.to_string()));
            return Vec::new();
        }
    };
    match config_algorithms(&text) {
        Ok(algos) => algos,
        Err(why) => {
            notes.push(skipped(&what, why));
            Vec::new()
        }
    }
}

/// Whether only unencrypted operation is allowed: `plain` (or `none`, `unencrypted`) and
/// nothing else; VpnCloud then adds no crypto framing.
pub fn only_plain(algorithms: &[String]) -> bool {
    !algorithms.is_empty()
        && algorithms
            .iter()
            .all(|a| matches!(a.to_uppercase().as_str(), "PLAIN" | "NONE" | "UNENCRYPTED"))
}

/// `--algorithm A,B`, `--algorithm=A`, `--algo A` (repeatable, comma-delimited).
fn args_algorithms(args: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let value = match a.as_str() {
            "--algorithm" | "--algo" => it.next().cloned(),
            _ => a
                .strip_prefix("--algorithm=")
                .or_else(|| a.strip_prefix("--algo="))
                .map(str::to_owned),
        };
        for v in value.iter().flat_map(|v| v.split(',')) {
            if !v.trim().is_empty() {
                out.push(v.trim().to_owned());
            }
        }
    }
    out
}

/// `--config FILE` or `--config=FILE`, resolved against the daemon's working directory.
fn config_file(owner: &TunOwner) -> Option<PathBuf> {
    let mut it = owner.args.iter();
    let mut file = None;
    while let Some(a) = it.next() {
        if a == "--config" {
            file = it.next().cloned();
        } else if let Some(f) = a.strip_prefix("--config=") {
            file = Some(f.to_owned());
        }
    }
    let file = PathBuf::from(file?);
    Some(if file.is_absolute() {
        file
    } else {
        std::fs::read_link(format!("/proc/{}/cwd", owner.pid))
            .ok()?
            .join(file)
    })
}

/// `crypto: algorithms:` of a VpnCloud 2.x configuration (empty when not given, as in a
/// version 1 file, whose `crypto` names one encrypting method). Walks the parser's events
/// without building a document: aliases are not expanded, and nesting deeper than
/// [`MAX_DEPTH`] is refused, so a file costs time and memory in proportion to its size.
fn config_algorithms(text: &str) -> Result<Vec<String>, String> {
    let mut parser = Parser::new_from_str(text);
    let mut stack: Vec<Frame> = Vec::new();
    let mut out = Vec::new();
    loop {
        let (event, mark) = parser
            .next_token()
            .map_err(|e| format!("it is not YAML: {e}"))?;
        match event {
            // The first document only, as VpnCloud reads it.
            Event::StreamEnd | Event::DocumentEnd => return Ok(out),
            Event::Scalar(value, ..) => {
                if matches!(stack.last(), Some(Frame::Key)) {
                    node_done(&mut stack, Some(value));
                    continue;
                }
                if in_algorithms(&stack) {
                    out.push(value);
                }
                node_done(&mut stack, None);
            }
            Event::Alias(_) => node_done(&mut stack, None),
            Event::MappingStart(..) | Event::SequenceStart(..) => {
                if stack.len() >= MAX_DEPTH {
                    return Err(format!(
                        "it nests deeper than a VpnCloud configuration needs ({MAX_DEPTH} \
                         levels, line {})",
                        mark.line()
                    ));
                }
                stack.push(if matches!(event, Event::MappingStart(..)) {
                    Frame::Key
                } else {
                    Frame::Seq
                });
            }
            Event::MappingEnd | Event::SequenceEnd => {
                stack.pop();
                node_done(&mut stack, None);
            }
            Event::Nothing | Event::StreamStart | Event::DocumentStart => {}
        }
    }
}

/// At most this many nested mappings and sequences (VpnCloud's use two or three).
const MAX_DEPTH: usize = 32;

/// An open collection while walking a configuration's events.
enum Frame {
    /// A mapping whose next node is a key.
    Key,
    /// A mapping whose next node is the value of this key (`None`: not a plain key).
    Value(Option<String>),
    /// A sequence.
    Seq,
}

/// A node ended in the innermost collection: a mapping's key (`key`, when a scalar)
/// leads to its value, a value to the next key.
fn node_done(stack: &mut [Frame], key: Option<String>) {
    if let Some(top) = stack.last_mut() {
        *top = match top {
            Frame::Key => Frame::Value(key),
            Frame::Value(_) => Frame::Key,
            Frame::Seq => Frame::Seq,
        };
    }
}

/// Whether the next value is `crypto: algorithms:` or one of its items.
fn in_algorithms(stack: &[Frame]) -> bool {
    let named = |f: &Frame, name: &str| matches!(f, Frame::Value(Some(k)) if k == name);
    match stack {
        [crypto, algos] | [crypto, algos, Frame::Seq] => {
            named(crypto, "crypto") && named(algos, "algorithms")
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn algorithms_from_the_command_line() {
        let args = strings(&[
            "vpncloud",
            "-c",
            "10.0.0.2:3210",
            "--algorithm",
            "plain,AES128",
            "--algo=chacha20",
        ]);
        assert_eq!(args_algorithms(&args), ["plain", "AES128", "chacha20"]);
        assert!(args_algorithms(&strings(&["vpncloud", "--algorithm"])).is_empty());
        assert!(only_plain(&strings(&["plain", "NONE", "Unencrypted"])));
        assert!(!only_plain(&strings(&["plain", "aes128"])));
        assert!(!only_plain(&[]));
    }

    #[test]
    fn algorithms_from_the_configuration() {
        // As `vpncloud config` writes it, and in flow style.
        let block = "device:\n  type: tap\n  name: vpncloud%d\ncrypto:\n  password: secret\n  \
                     algorithms:\n    - plain\nlisten: 3210\nmode: switch\n";
        assert_eq!(config_algorithms(block), Ok(strings(&["plain"])));
        let flow = "crypto: {password: x, algorithms: [AES256, chacha20]}\n";
        assert_eq!(
            config_algorithms(flow),
            Ok(strings(&["AES256", "chacha20"]))
        );
        // Version 1 (`crypto: aes256`) and no crypto section: VpnCloud's defaults.
        assert_eq!(config_algorithms("crypto: aes256\n"), Ok(Vec::new()));
        assert_eq!(config_algorithms("listen: 3210\n"), Ok(Vec::new()));
        assert_eq!(config_algorithms(""), Ok(Vec::new()));
        assert!(config_algorithms("crypto: [unclosed\n").is_err());
        // Only the first document; other keys named `algorithms` are not VpnCloud's.
        let other = "beacon: {algorithms: [x]}\ncrypto:\n  algorithms: [plain]\n---\ncrypto: \
                     {algorithms: [AES128]}\n";
        assert_eq!(config_algorithms(other), Ok(strings(&["plain"])));
        // Deep nesting, block or flow, is refused without recursing; aliases are not
        // expanded (a "billion laughs" file parses in linear time).
        for deep in ["- ".repeat(20_000), "[".repeat(20_000)] {
            let err = config_algorithms(&deep).expect_err("refused");
            assert!(
                err.contains("nests deeper") || err.contains("not YAML"),
                "{err}"
            );
        }
        let mut laughs = String::from("a: &a [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 0..40 {
            laughs += &format!(
                "l{i}: &l{i} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n",
                p = if i == 0 {
                    "a".to_owned()
                } else {
                    format!("l{}", i - 1)
                }
            );
        }
        laughs += "crypto: {algorithms: [chacha20]}\n";
        assert_eq!(config_algorithms(&laughs), Ok(strings(&["chacha20"])));
    }

    /// The configuration is read for root's daemon from root's file; another user's file,
    /// one another user may write, or a daemon not root's by every uid: not read, and the
    /// note says why (the overhead then assumes an encrypting algorithm).
    #[test]
    fn the_configuration_is_read_only_under_the_trust_rules() {
        use std::os::unix::fs::PermissionsExt;
        if !crate::testing::root_or_skip("to own files as root and as another user") {
            return;
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let conf = dir.path().join("mesh.net");
        std::fs::write(&conf, "crypto:\n  algorithms: [plain]\n").expect("write");
        std::fs::set_permissions(&conf, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        let owner = |uid: u32| TunOwner {
            pid: std::process::id(),
            command: "vpncloud".into(),
            args: strings(&["vpncloud", "--config", &conf.to_string_lossy()]),
            uids: trusted::Uids {
                real: uid,
                effective: 0,
                saved: 0,
            },
            udp_ports: vec![3210],
        };
        let mut notes = Vec::new();
        assert_eq!(algorithms(&owner(0), &mut notes), ["plain"]);
        assert!(notes.is_empty(), "{notes:?}");

        // A setuid-root vpncloud another user started: its configuration is theirs.
        assert!(algorithms(&owner(65534), &mut notes).is_empty());
        assert!(notes[0].contains("not root"), "{notes:?}");

        std::fs::set_permissions(&conf, std::fs::Permissions::from_mode(0o666)).expect("chmod");
        notes.clear();
        assert!(algorithms(&owner(0), &mut notes).is_empty());
        assert!(notes[0].contains("was not read"), "{notes:?}");

        std::fs::set_permissions(&conf, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        nix::unistd::chown(&conf, Some(nix::unistd::Uid::from_raw(65534)), None).expect("chown");
        notes.clear();
        assert!(algorithms(&owner(0), &mut notes).is_empty());
        assert!(notes[0].contains("uid 65534, not root"), "{notes:?}");
        // The command line is root's daemon's own word, read before any file.
        let mut cli = owner(0);
        cli.args.extend(strings(&["--algorithm", "plain"]));
        assert_eq!(algorithms(&cli, &mut notes), ["plain"]);
    }
}

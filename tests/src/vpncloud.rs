//! VpnCloud 2.3.0, the field report's version, for the TAP mesh tests: built from crates.io
//! by `tests/vpncloud/build` once per machine (cached in `/var/cache/netdoctor/vpncloud`,
//! `.ci/setup` builds it), found here on first use in a process.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use anyhow::Result;

use crate::cmd;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// The `vpncloud` binary, built by `tests/vpncloud/build` on first use in this process (a
/// cached build costs a test; the first one on a machine about two minutes).
pub fn binary() -> Result<PathBuf> {
    static BUILT: OnceLock<std::result::Result<PathBuf, String>> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let mut command = Command::new("bash");
            command.arg(repo_root().join("tests/vpncloud/build"));
            let dir = cmd::run_checked(&mut command, Duration::from_secs(1800))
                .map_err(|e| format!("{e:#}"))?;
            Ok(PathBuf::from(dir.trim()).join("vpncloud"))
        })
        .clone()
        .map_err(|e| anyhow::anyhow!("building VpnCloud 2.3.0: {e}"))
}

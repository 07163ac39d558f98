//! The web dashboard in a real browser: `dashboard/e2e/e2e.mjs` (headless Chromium through
//! playwright-core) against a running agent, with what the page must show.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::agent::Agent;
use crate::{ci, Netns};

/// The repository's root directory.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// Chromium, Node and the dashboard's npm packages (installed by `.ci/setup`).
///
/// # Panics
/// When one is missing and [`ci::is_ci`] is true.
pub fn require_browser_or_skip() -> bool {
    let playwright = repo_root().join("dashboard/node_modules/playwright-core");
    if !ci::on_path("chromium") || !ci::on_path("node") || !playwright.exists() {
        return ci::skip(
            "the dashboard test needs chromium, node and `npm ci --prefix dashboard` (run .ci/setup)",
        );
    }
    true
}

/// Runs `dashboard/e2e/e2e.mjs` in headless Chromium against `agent`, with `token` if
/// given, saving screenshots to `shots`. `expect` is its `--expect` document. The browser
/// runs in `ns` (where the agent listens), or in the calling thread's namespace.
pub fn e2e(
    agent: &Agent,
    ns: Option<&Netns>,
    expect: &serde_json::Value,
    shots: &Path,
    token: Option<&str>,
) -> Result<()> {
    std::fs::create_dir_all(shots)?;
    let script = repo_root().join("dashboard/e2e/e2e.mjs");
    let mut command = match ns {
        Some(ns) => ns.command("node", [&script]),
        None => {
            let mut c = Command::new("node");
            c.arg(&script);
            c
        }
    };
    command
        .arg("--url")
        .arg(format!("http://{}/", agent.addr()))
        .arg("--screenshots")
        .arg(shots)
        .arg("--expect")
        .arg(expect.to_string());
    if let Some(t) = token {
        command.arg("--token").arg(t);
    }
    let out = command.output().context("running dashboard/e2e/e2e.mjs")?;
    if !out.status.success() {
        bail!(
            "dashboard e2e{} failed ({}):\n{}\n{}\nagent stderr:\n{}",
            if token.is_some() { " with a token" } else { "" },
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            crate::agent::tail(&agent.stderr(), 3000)
        );
    }
    println!("{}", String::from_utf8_lossy(&out.stdout));
    Ok(())
}

/// Moves the calling thread into `ns` (`setns` affects only it; children inherit it), so
/// that a browser or client it starts reaches what listens on that namespace's loopback.
pub fn enter(ns: &Netns) -> Result<()> {
    let file = std::fs::File::open(ns.path())?;
    nix::sched::setns(&file, nix::sched::CloneFlags::CLONE_NEWNET).context("setns")?;
    Ok(())
}

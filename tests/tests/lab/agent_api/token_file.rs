//! Section 7 of the contract, the token file: one another user owns or may read, a
//! device, a FIFO nobody writes: refused at once with the fix named, nothing listening;
//! a Secret volume as the kubelet mounts it (links into a sticky directory, 0440 with
//! `fsGroup`) is read.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{ensure, Result};
use netdoctor_lab::agent::{Agent, Auth};
use netdoctor_lab::netdoctor;
use netdoctor_lab::{lab_guard, Netns};

const TOKEN: &str = "0123456789abcdef0123456789abcdef";

fn write(path: &Path, mode: u32, uid: u32) -> Result<()> {
    std::fs::write(path, format!("{TOKEN}\n"))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))?;
    nix::unistd::chown(path, Some(nix::unistd::Uid::from_raw(uid)), None)?;
    Ok(())
}

/// `netdoctor agent --listen 0.0.0.0:9471 --token-file PATH` must exit non-zero within
/// 5 s, its message holding every one of `parts`, nothing listening.
fn refused(ns: &Netns, path: &Path, parts: &[&str]) -> Result<()> {
    let db = tempfile::tempdir()?;
    let database = db.path().join("netdoctor.db");
    let started = Instant::now();
    let out = netdoctor::run(
        Some(ns),
        &[
            "agent",
            "--listen",
            "0.0.0.0:9471",
            "--database",
            &database.to_string_lossy(),
            "--token-file",
            &path.to_string_lossy(),
        ],
        Duration::from_secs(15),
    )?;
    let took = started.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    ensure!(
        out.status.code().is_some_and(|c| c != 0) && parts.iter().all(|p| stderr.contains(p)),
        "--token-file {}: expected a refusal naming {parts:?}, got {}; stderr: {stderr}",
        path.display(),
        out.status
    );
    ensure!(took < Duration::from_secs(5), "refusing took {took:?}");
    let listening = ns.run(&["ss", "-Htln"])?;
    ensure!(
        listening.trim().is_empty(),
        "something listens: {listening}"
    );
    Ok(())
}

#[test]
fn agent_refuses_a_token_file_another_user_controls_or_may_read() -> Result<()> {
    lab_guard!("ss");
    let ns = Netns::new()?;
    let dir = tempfile::tempdir()?;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))?;

    let users = dir.path().join("users");
    write(&users, 0o600, 65534)?;
    let fix = format!("`chown root {}`", users.display());
    refused(&ns, &users, &["belongs to uid 65534, not root", &fix])?;

    let readable = dir.path().join("readable");
    write(&readable, 0o644, 0)?;
    let fix = format!("`chmod 600 {}`", readable.display());
    refused(&ns, &readable, &["may read it (mode 644)", &fix])?;

    refused(&ns, Path::new("/dev/zero"), &["not a regular file"])?;
    let fifo = dir.path().join("fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600))?;
    refused(&ns, &fifo, &["not a regular file"])?;
    Ok(())
}

/// The twin: the layout of a Kubernetes Secret volume (what the chart mounts), its file
/// 0440 and of the group `fsGroup` names: the agent starts and the token opens the API.
#[test]
fn agent_reads_a_token_from_a_secret_volume() -> Result<()> {
    lab_guard!();
    let ns = Netns::new()?;
    let volume = tempfile::tempdir()?;
    let v = volume.path();
    std::fs::set_permissions(v, std::fs::Permissions::from_mode(0o1777))?;
    let data = "..2026_01_01_00_00_00.000000001";
    std::fs::create_dir(v.join(data))?;
    write(&v.join(data).join("token"), 0o440, 0)?;
    nix::unistd::chown(
        &v.join(data).join("token"),
        None,
        Some(nix::unistd::Gid::from_raw(2000)),
    )?;
    std::os::unix::fs::symlink(data, v.join("..data"))?;
    std::os::unix::fs::symlink("..data/token", v.join("token"))?;
    let token_file = v.join("token").to_string_lossy().into_owned();
    let agent = Agent::start_with_token(
        &ns,
        &["--no-probe", "--token-file", &token_file],
        Some(TOKEN),
    )?;
    let r = agent.request("GET", "/api/v1/interfaces", Auth::Agent)?;
    ensure!(r.status == 200, "{}", r.describe());
    let r = agent.request("GET", "/api/v1/interfaces", Auth::Missing)?;
    ensure!(r.status == 401, "{}", r.describe());
    Ok(())
}

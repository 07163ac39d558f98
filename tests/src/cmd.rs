//! Running external commands: bounded in time, with errors that carry the
//! command line, exit status and stderr; and background processes that are
//! stopped on `Drop`.

use std::fs::File;
use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use tempfile::NamedTempFile;

/// Timeout used by the `run` helpers that take none.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// Prefix of background-process log files in the temp dir
/// (`ndlab-<pid>-out-*`, `ndlab-<pid>-err-*`).
pub(crate) const LOG_PREFIX: &str = "ndlab-";

/// How long [`BgProcess::stop`] waits after SIGTERM before SIGKILL.
const TERM_GRACE: Duration = Duration::from_secs(2);

/// Renders `cmd` as a shell-like line for error messages.
pub fn describe(cmd: &Command) -> String {
    let mut line = cmd.get_program().to_string_lossy().into_owned();
    for arg in cmd.get_args() {
        line.push(' ');
        line.push_str(&arg.to_string_lossy());
    }
    line
}

/// Runs `cmd` to completion with stdin from `/dev/null` and stdout/stderr
/// captured, killing it after `timeout`. The exit status is *not* checked.
///
/// Errors: the program cannot be started, or it did not finish in time.
pub fn output_timeout(cmd: &mut Command, timeout: Duration) -> Result<Output> {
    let line = describe(cmd);
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot start `{line}`"))?;
    let (tx, rx) = mpsc::channel::<(bool, Vec<u8>)>();
    if let Some(mut out) = child.stdout.take() {
        let tx = tx.clone();
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = out.read_to_end(&mut buf);
            let _ = tx.send((true, buf));
        });
    }
    if let Some(mut err) = child.stderr.take() {
        let tx = tx.clone();
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = err.read_to_end(&mut buf);
            let _ = tx.send((false, buf));
        });
    }
    drop(tx);

    let deadline = Instant::now() + timeout;
    let status = loop {
        if let Some(status) = child
            .try_wait()
            .with_context(|| format!("waiting for `{line}`"))?
        {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            bail!("`{line}` did not finish within {timeout:?} and was killed");
        }
        std::thread::sleep(Duration::from_millis(5));
    };

    let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
    // A background grandchild could keep a pipe open: do not wait forever.
    let pipe_deadline = Instant::now() + Duration::from_secs(5);
    for _ in 0..2 {
        let left = pipe_deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok((true, buf)) => stdout = buf,
            Ok((false, buf)) => stderr = buf,
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                bail!("`{line}` exited but a background process keeps its output pipes open")
            }
        }
    }
    Ok(Output {
        status,
        stdout,
        stderr,
    })
}

/// Runs `cmd` (see [`output_timeout`]) and requires exit status 0.
/// Returns stdout (lossy UTF-8). The error names the command line, the exit
/// status, stderr and stdout.
pub fn run_checked(cmd: &mut Command, timeout: Duration) -> Result<String> {
    let line = describe(cmd);
    let out = output_timeout(cmd, timeout)?;
    check(&line, &out)?;
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Runs `argv` (program first) in the *host* network namespace and requires
/// success; returns stdout. Uses [`DEFAULT_TIMEOUT`].
pub fn host_run(argv: &[&str]) -> Result<String> {
    let (program, args) = argv.split_first().context("host_run: empty argv")?;
    let mut cmd = Command::new(program);
    cmd.args(args);
    run_checked(&mut cmd, DEFAULT_TIMEOUT)
}

/// Turns a non-zero exit into an error that carries stderr and stdout.
pub(crate) fn check(line: &str, out: &Output) -> Result<()> {
    if out.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    bail!(
        "`{line}` failed ({}): stderr: {} stdout: {}",
        out.status,
        stderr.trim(),
        truncate(stdout.trim(), 2000)
    )
}

fn truncate(s: &str, max: usize) -> &str {
    match s.char_indices().nth(max) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

/// Sends `signal` to `pid`, ignoring "no such process".
pub(crate) fn signal_pid(pid: u32, signal: Signal) -> Result<()> {
    let raw = i32::try_from(pid).with_context(|| format!("pid {pid} out of range"))?;
    match kill(Pid::from_raw(raw), signal) {
        Ok(()) | Err(nix::errno::Errno::ESRCH) => Ok(()),
        Err(e) => Err(e).with_context(|| format!("kill({pid}, {signal})")),
    }
}

/// A background process whose stdout and stderr go to temporary log files
/// (so it can never block on a full pipe).
///
/// On `Drop` it is stopped: SIGTERM, up to 2 s grace, then SIGKILL, and
/// reaped. The log files are deleted with it; read them before.
#[derive(Debug)]
pub struct BgProcess {
    label: String,
    child: Child,
    status: Option<ExitStatus>,
    stdout: NamedTempFile,
    stderr: NamedTempFile,
}

impl BgProcess {
    /// Spawns `cmd` with stdin from `/dev/null` and stdout/stderr to log
    /// files. `label` names it in errors (e.g. the command line).
    pub fn spawn(label: &str, mut cmd: Command) -> Result<BgProcess> {
        let pid = std::process::id();
        let stdout = NamedTempFile::with_prefix(format!("{LOG_PREFIX}{pid}-out-"))
            .context("creating stdout log")?;
        let stderr = NamedTempFile::with_prefix(format!("{LOG_PREFIX}{pid}-err-"))
            .context("creating stderr log")?;
        let out_file = stdout.reopen().context("opening stdout log")?;
        let err_file = stderr.reopen().context("opening stderr log")?;
        let child = cmd
            .stdin(Stdio::null())
            .stdout(out_file)
            .stderr(err_file)
            .spawn()
            .with_context(|| format!("cannot start background `{}`", describe(&cmd)))?;
        Ok(BgProcess {
            label: label.to_owned(),
            child,
            status: None,
            stdout,
            stderr,
        })
    }

    /// The label given at spawn time.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// Process id (inside a namespace started via `nsenter`, this is the
    /// program itself: nsenter execs it).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Mutable access to the underlying [`Child`] (already spawned; its
    /// stdio handles are `None`).
    pub fn child_mut(&mut self) -> &mut Child {
        &mut self.child
    }

    /// Returns the exit status if the process has exited, without blocking.
    pub fn try_status(&mut self) -> Result<Option<ExitStatus>> {
        if self.status.is_none() {
            self.status = self
                .child
                .try_wait()
                .with_context(|| format!("polling `{}`", self.label))?;
        }
        Ok(self.status)
    }

    /// True while the process has not exited.
    pub fn is_running(&mut self) -> bool {
        matches!(self.try_status(), Ok(None))
    }

    /// Waits up to `timeout` for the process to exit by itself; errors on
    /// timeout (the process is left running).
    pub fn wait_timeout(&mut self, timeout: Duration) -> Result<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.try_status()? {
                return Ok(status);
            }
            if Instant::now() >= deadline {
                bail!(
                    "`{}` still running after {timeout:?}; stderr: {}",
                    self.label,
                    self.stderr().unwrap_or_default().trim()
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Sends `signal` to the process (no-op once it has exited).
    pub fn signal(&mut self, signal: Signal) -> Result<()> {
        if self.try_status()?.is_some() {
            return Ok(());
        }
        signal_pid(self.pid(), signal)
    }

    /// Stops the process: SIGTERM, up to 2 s grace, then SIGKILL; reaps it
    /// and returns its exit status.
    pub fn stop(&mut self) -> Result<ExitStatus> {
        if let Some(status) = self.try_status()? {
            return Ok(status);
        }
        self.signal(Signal::SIGTERM)?;
        if let Ok(status) = self.wait_timeout(TERM_GRACE) {
            return Ok(status);
        }
        self.signal(Signal::SIGKILL)?;
        let status = self
            .child
            .wait()
            .with_context(|| format!("reaping `{}`", self.label))?;
        self.status = Some(status);
        Ok(status)
    }

    /// Everything the process wrote to stdout so far (lossy UTF-8).
    pub fn stdout(&self) -> Result<String> {
        read_lossy(self.stdout.path())
    }

    /// Everything the process wrote to stderr so far (lossy UTF-8).
    pub fn stderr(&self) -> Result<String> {
        read_lossy(self.stderr.path())
    }

    /// Path of the stdout log file (valid while `self` lives).
    pub fn stdout_path(&self) -> &Path {
        self.stdout.path()
    }

    /// Path of the stderr log file (valid while `self` lives).
    pub fn stderr_path(&self) -> &Path {
        self.stderr.path()
    }

    /// Polls stdout and stderr until `needle` appears; errors after `timeout`
    /// or if the process exits first.
    pub fn wait_for_output(&mut self, needle: &str, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            let (out, err) = (self.stdout()?, self.stderr()?);
            if out.contains(needle) || err.contains(needle) {
                return Ok(());
            }
            if let Some(status) = self.try_status()? {
                bail!(
                    "`{}` exited ({status}) before printing {needle:?}; stdout: {} stderr: {}",
                    self.label,
                    out.trim(),
                    err.trim()
                );
            }
            if Instant::now() >= deadline {
                bail!(
                    "`{}` did not print {needle:?} within {timeout:?}; stdout: {} stderr: {}",
                    self.label,
                    out.trim(),
                    err.trim()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for BgProcess {
    fn drop(&mut self) {
        if let Err(e) = self.stop() {
            eprintln!("netdoctor-lab: stopping `{}`: {e:#}", self.label);
        }
    }
}

fn read_lossy(path: &Path) -> Result<String> {
    let mut buf = Vec::new();
    File::open(path)
        .and_then(|mut f| f.read_to_end(&mut buf))
        .with_context(|| format!("reading {}", path.display()))?;
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

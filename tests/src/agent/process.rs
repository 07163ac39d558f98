//! The `netdoctor agent` process in a namespace: started with the lab's defaults,
//! asked over HTTP from inside the namespace, polled, and stopped by signal.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use nix::sys::signal::Signal;
use serde_json::Value;

use super::http::http_in_netns;
use super::{Reply, DEFAULT_PORT, READY_TIMEOUT};
use crate::cmd::BgProcess;
use crate::netdoctor;
use crate::netns::Netns;

/// What the `Authorization` header of a request carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Auth<'a> {
    /// The agent's token (`Bearer <token>`) if it has one, else nothing.
    Agent,
    /// No header at all.
    Missing,
    /// This exact header value (e.g. `"Bearer wrong"`).
    Header(&'a str),
}

/// A `netdoctor agent` running inside a namespace; stopped (SIGTERM, then SIGKILL) on
/// `Drop`. Its stdout and stderr go to temporary files ([`Agent::stderr`]).
#[derive(Debug)]
pub struct Agent {
    ns_name: String,
    ns_path: PathBuf,
    addr: SocketAddr,
    token: Option<String>,
    database: PathBuf,
    process: BgProcess,
    /// Holds the database when the caller gave no `--database`.
    _dir: Option<tempfile::TempDir>,
}

fn has_flag(args: &[&str], flag: &str) -> bool {
    let prefix = format!("{flag}=");
    args.iter().any(|a| *a == flag || a.starts_with(&prefix))
}

fn flag_value(args: &[&str], flag: &str) -> Option<String> {
    let prefix = format!("{flag}=");
    args.iter().enumerate().find_map(|(i, a)| {
        if *a == flag {
            args.get(i + 1).map(|v| (*v).to_owned())
        } else {
            a.strip_prefix(&prefix).map(str::to_owned)
        }
    })
}

impl Agent {
    /// Starts `netdoctor agent ARGS...` inside `ns` (adding `--listen 127.0.0.1:9469`,
    /// `--database <temp dir>/netdoctor.db` and `--interval 1s` when `args` lack them)
    /// and waits until `/readyz` answers 200 (at most [`READY_TIMEOUT`]). The error
    /// carries the agent's stderr, also when it exits early.
    pub fn start(ns: &Netns, args: &[&str]) -> Result<Agent> {
        Self::start_with_token(ns, args, None)
    }

    /// Like [`Agent::start`] for an agent given `--token-file`: `token` is what the file
    /// holds; requests (the readiness check too) carry it unless told otherwise.
    pub fn start_with_token(ns: &Netns, args: &[&str], token: Option<&str>) -> Result<Agent> {
        let mut agent = Self::spawn(ns, args, token)?;
        agent.wait_ready(READY_TIMEOUT)?;
        Ok(agent)
    }

    /// Like [`Agent::start`], run through `wrapper` (e.g. `setpriv ... --`), which gets
    /// the binary's path and arguments appended.
    pub fn start_wrapped(ns: &Netns, wrapper: &[&str], args: &[&str]) -> Result<Agent> {
        let mut agent = Self::spawn_inner(ns, wrapper, args, None)?;
        agent.wait_ready(READY_TIMEOUT)?;
        Ok(agent)
    }

    /// Starts the agent like [`Agent::start_with_token`] without waiting for anything.
    pub fn spawn(ns: &Netns, args: &[&str], token: Option<&str>) -> Result<Agent> {
        Self::spawn_inner(ns, &[], args, token)
    }

    fn spawn_inner(
        ns: &Netns,
        wrapper: &[&str],
        args: &[&str],
        token: Option<&str>,
    ) -> Result<Agent> {
        let bin = netdoctor::binary()?;
        let mut argv: Vec<String> = vec!["agent".to_owned()];
        argv.extend(args.iter().map(|a| (*a).to_owned()));
        let listen = match flag_value(args, "--listen") {
            Some(l) => l,
            None => {
                let l = format!("127.0.0.1:{DEFAULT_PORT}");
                argv.extend(["--listen".to_owned(), l.clone()]);
                l
            }
        };
        let mut addr: SocketAddr = listen
            .parse()
            .with_context(|| format!("--listen {listen:?} is not ADDR:PORT"))?;
        if addr.ip().is_unspecified() {
            addr.set_ip(if addr.is_ipv4() {
                std::net::Ipv4Addr::LOCALHOST.into()
            } else {
                std::net::Ipv6Addr::LOCALHOST.into()
            });
        }
        let mut dir = None;
        let database = match flag_value(args, "--database") {
            Some(d) => PathBuf::from(d),
            None => {
                let tmp = tempfile::Builder::new()
                    .prefix("ndlab-agent-")
                    .tempdir()
                    .context("creating a directory for the agent's database")?;
                let path = tmp.path().join("netdoctor.db");
                argv.extend(["--database".to_owned(), path.to_string_lossy().into_owned()]);
                dir = Some(tmp);
                path
            }
        };
        if !has_flag(args, "--interval") {
            argv.extend(["--interval".to_owned(), "1s".to_owned()]);
        }
        let mut command = match wrapper.split_first() {
            Some((program, rest)) => {
                let mut all: Vec<String> = rest.iter().map(|a| (*a).to_owned()).collect();
                all.push(bin.to_string_lossy().into_owned());
                all.extend(argv.iter().cloned());
                ns.command(program, &all)
            }
            None => ns.command(&bin.to_string_lossy(), &argv),
        };
        // Settings of the environment running the tests must not leak into the agent.
        for (key, _) in std::env::vars_os() {
            if key.to_string_lossy().starts_with("NETDOCTOR_") {
                command.env_remove(key);
            }
        }
        let label = format!("netdoctor {}", argv.join(" "));
        let process = ns.spawn_command(&label, command)?;
        Ok(Agent {
            ns_name: ns.name().to_owned(),
            ns_path: ns.path(),
            addr,
            token: token.map(str::to_owned),
            database,
            process,
            _dir: dir,
        })
    }

    /// Polls `/readyz` until it answers 200; errors with the agent's stderr when it
    /// exits first or `timeout` expires.
    pub fn wait_ready(&mut self, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        let mut last = String::from("no answer yet");
        loop {
            if let Some(status) = self.process.try_status()? {
                bail!(
                    "`{}` exited ({status}) before /readyz answered 200 (last: {last}); stderr:\n{}",
                    self.process.label(),
                    self.stderr().trim()
                );
            }
            match self.request("GET", "/readyz", Auth::Agent) {
                Ok(r) if r.status == 200 => return Ok(()),
                Ok(r) => last = r.describe(),
                Err(e) => last = format!("{e:#}"),
            }
            if Instant::now() >= deadline {
                bail!(
                    "`{}` not ready after {timeout:?} (last /readyz: {last}); stderr:\n{}",
                    self.process.label(),
                    self.stderr().trim()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Sends `METHOD PATH` (PATH with its query string) from inside the namespace, as
    /// an API client does: a POST carries `Content-Type: application/json`.
    /// Any HTTP status is a reply; errors are transport failures (refused, timeout).
    pub fn request(&self, method: &str, path: &str, auth: Auth<'_>) -> Result<Reply> {
        self.request_with(method, path, auth, &[])
    }

    /// [`Agent::request`] with extra headers, which replace the client's own (`Host`,
    /// `Content-Type`), e.g. to play a web page of another site.
    pub fn request_with(
        &self,
        method: &str,
        path: &str,
        auth: Auth<'_>,
        headers: &[(&str, &str)],
    ) -> Result<Reply> {
        let mut all: Vec<(String, String)> = headers
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        let given = |name: &str| headers.iter().any(|(k, _)| k.eq_ignore_ascii_case(name));
        match auth {
            Auth::Agent => {
                if let Some(t) = &self.token {
                    all.push(("Authorization".into(), format!("Bearer {t}")));
                }
            }
            Auth::Missing => {}
            Auth::Header(h) => all.push(("Authorization".into(), h.to_owned())),
        }
        if method == "POST" && !given("content-type") {
            all.push(("Content-Type".into(), "application/json".into()));
        }
        let url = format!("http://{}{path}", self.addr);
        let label = format!("{method} {path}");
        http_in_netns(&self.ns_path, method, &url, all, &label)
            .with_context(|| format!("{label} to the agent in {}", self.ns_name))
    }

    /// `GET PATH` with the agent's token.
    pub fn get(&self, path: &str) -> Result<Reply> {
        self.request("GET", path, Auth::Agent)
    }

    /// `POST PATH` (empty body) with the agent's token.
    pub fn post(&self, path: &str) -> Result<Reply> {
        self.request("POST", path, Auth::Agent)
    }

    /// `GET PATH`, requiring 200 and a JSON body; returns the JSON.
    pub fn get_json(&self, path: &str) -> Result<Value> {
        let r = self.get(path)?;
        ensure!(
            r.status == 200 && !r.json.is_null(),
            "expected HTTP 200 with JSON: {}",
            r.describe()
        );
        Ok(r.json)
    }

    /// `GET /metrics`, requiring 200; returns the Prometheus text.
    pub fn metrics(&self) -> Result<String> {
        let r = self.get("/metrics")?;
        r.expect_status(200)?;
        Ok(r.text)
    }

    /// GETs `path` every 200 ms until `check` returns `Some`, at most `timeout`. The
    /// error names `what` and shows the last reply (and the agent's stderr if it died).
    pub fn poll<T>(
        &self,
        path: &str,
        timeout: Duration,
        what: &str,
        mut check: impl FnMut(&Reply) -> Option<T>,
    ) -> Result<T> {
        let deadline = Instant::now() + timeout;
        loop {
            let last = match self.get(path) {
                Ok(r) => match check(&r) {
                    Some(v) => return Ok(v),
                    None => r.describe(),
                },
                Err(e) => format!("{e:#}"),
            };
            if Instant::now() >= deadline {
                bail!(
                    "{what}: not seen within {timeout:?}; last reply: {last}\nagent stderr (end):\n{}",
                    tail(&self.stderr(), 3000)
                );
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// The agent's network namespace (a path under /run/netns).
    pub fn ns_path(&self) -> &Path {
        &self.ns_path
    }

    /// Address the agent listens on (inside its namespace).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The database file.
    pub fn database(&self) -> &Path {
        &self.database
    }

    /// Process id of the agent (nsenter execs it).
    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// True while the process has not exited.
    pub fn is_running(&mut self) -> bool {
        self.process.is_running()
    }

    /// Everything the agent wrote to stderr so far ("" if unreadable).
    pub fn stderr(&self) -> String {
        self.process.stderr().unwrap_or_default()
    }

    /// The process, e.g. to send other signals.
    pub fn process_mut(&mut self) -> &mut BgProcess {
        &mut self.process
    }

    /// SIGKILL; waits (10 s at most) and returns the exit status.
    pub fn kill9(&mut self) -> Result<ExitStatus> {
        self.process.signal(Signal::SIGKILL)?;
        self.process.wait_timeout(Duration::from_secs(10))
    }

    /// SIGTERM; waits at most `timeout` for the exit and returns its status (the
    /// process is left running on timeout, and killed on `Drop`).
    pub fn terminate(&mut self, timeout: Duration) -> Result<ExitStatus> {
        self.process.signal(Signal::SIGTERM)?;
        self.process.wait_timeout(timeout)
    }
}

/// The last `max` bytes of `text` (on a character boundary).
pub fn tail(text: &str, max: usize) -> &str {
    let mut start = text.len().saturating_sub(max);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

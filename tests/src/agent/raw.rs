//! Raw TCP connections to the agent, from inside its namespace: connections that stay idle
//! or send their request head slowly, HTTP/1.1 exchanges on one kept-alive connection,
//! requests whose client gives up, and whether the agent has closed a connection. For what
//! an HTTP client library hides: keep-alive, timeouts, half-sent requests.

use std::fs::File;
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use super::Agent;

/// What the agent answered.
#[derive(Debug, Clone)]
pub struct RawReply {
    /// HTTP status.
    pub status: u16,
    /// The status line and headers, in lower case.
    pub head: String,
    /// Body (as text).
    pub body: String,
}

impl Agent {
    /// Opens `n` TCP connections to the agent from inside its namespace and sends nothing
    /// on them (a socket keeps the namespace it was created in).
    pub fn connect_many(&self, n: usize) -> Result<Vec<TcpStream>> {
        let ns = File::open(self.ns_path())
            .with_context(|| format!("opening {}", self.ns_path().display()))?;
        let addr = self.addr();
        std::thread::spawn(move || -> Result<Vec<TcpStream>> {
            nix::sched::setns(&ns, nix::sched::CloneFlags::CLONE_NEWNET)
                .context("setns(CLONE_NEWNET)")?;
            (0..n)
                .map(|i| {
                    TcpStream::connect_timeout(&addr, Duration::from_secs(5))
                        .with_context(|| format!("connection {} of {n} to {addr}", i + 1))
                })
                .collect()
        })
        .join()
        .map_err(|_| anyhow::anyhow!("the connecting thread panicked"))?
    }

    /// One TCP connection to the agent from inside its namespace.
    pub fn connect(&self) -> Result<TcpStream> {
        self.connect_many(1)?
            .pop()
            .context("no connection was opened")
    }
}

/// Sends `METHOD PATH` with `headers` (and `Host`, and the JSON content type of a POST)
/// on `stream`, keeping the connection alive, and reads the answer within `timeout`.
pub fn exchange(
    stream: &mut TcpStream,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    timeout: Duration,
) -> Result<RawReply> {
    let mut request = format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n");
    if method == "POST" {
        request.push_str("Content-Type: application/json\r\nContent-Length: 0\r\n");
    }
    for (k, v) in headers {
        request.push_str(&format!("{k}: {v}\r\n"));
    }
    request.push_str("\r\n");
    stream
        .write_all(request.as_bytes())
        .with_context(|| format!("sending {method} {path}"))?;
    read_reply(stream, timeout).with_context(|| format!("the answer to {method} {path}"))
}

/// Reads one response (head, then a `Content-Length` body) within `timeout`.
pub fn read_reply(stream: &mut TcpStream, timeout: Duration) -> Result<RawReply> {
    let deadline = Instant::now() + timeout;
    let mut data = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    loop {
        if let Some(end) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&data[..end]).to_ascii_lowercase();
            let length = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or(0);
            if data.len() >= end + 4 + length {
                let status = head
                    .split_whitespace()
                    .nth(1)
                    .and_then(|s| s.parse().ok())
                    .context("no status in the response")?;
                let body = String::from_utf8_lossy(&data[end + 4..end + 4 + length]).into_owned();
                return Ok(RawReply { status, head, body });
            }
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            bail!(
                "no whole response within {timeout:?} ({} bytes)",
                data.len()
            );
        }
        stream.set_read_timeout(Some(left))?;
        match stream.read(&mut buf) {
            Ok(0) => bail!("closed after {} bytes of a response", data.len()),
            Ok(n) => data.extend_from_slice(&buf[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) => return Err(e).context("reading the response"),
        }
    }
}

/// Whether the agent has closed `stream` (end of stream or reset), reading and discarding
/// whatever it sent first; never blocks.
pub fn is_closed(stream: &mut TcpStream) -> bool {
    if stream.set_nonblocking(true).is_err() {
        return true;
    }
    let mut buf = [0u8; 4096];
    let closed = loop {
        match stream.read(&mut buf) {
            Ok(0) => break true,
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::WouldBlock => break false,
            Err(_) => break true,
        }
    };
    let _ = stream.set_nonblocking(false);
    closed
}

/// Raises this process's soft open-file limit to its hard one (a test holding many
/// connections needs them); returns the new limit.
pub fn raise_open_files() -> Result<u64> {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let (_, hard) = getrlimit(Resource::RLIMIT_NOFILE)?;
    setrlimit(Resource::RLIMIT_NOFILE, hard, hard)?;
    Ok(hard)
}

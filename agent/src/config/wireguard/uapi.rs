//! A userspace WireGuard's UAPI socket (`/var/run/wireguard/NAME.sock`): asked `get=1` only
//! when the path is the socket itself (not a symbolic link), root (or this process's
//! user) owns it and listens on it (`SO_PEERCRED`, [`trusted::check_listener`]): anyone
//! else could answer with peers of their choosing. The answer is read within
//! [`TIMEOUT`] in all, and bounded in line length, lines, peers and bytes, so a stuck or
//! misbehaving implementation costs a clear error, never a hang or netdoctor's memory.

use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;

use super::device::{hex_to_base64, Device, Peer};
use crate::config::trusted::{self, Untrusted};

/// Where wireguard-go (and other userspace WireGuard implementations) put their UAPI sockets.
pub const WIREGUARD_UAPI_DIR: &str = "/var/run/wireguard";

/// The whole exchange (connect, ask, read the answer): implementations answer from memory
/// at once, so one that takes longer is stuck.
pub const TIMEOUT: Duration = Duration::from_secs(3);
/// Longest line of an answer: `key=value`, the longest value being an endpoint or an
/// allowed IP (about 60 bytes).
pub const MAX_LINE: usize = 4096;
/// Most lines of an answer: about 8 per peer plus its allowed IPs.
pub const MAX_LINES: usize = 1 << 20;
/// Most peers of one device.
pub const MAX_PEERS: usize = 1 << 16;
/// Most bytes of an answer.
pub const MAX_ANSWER: usize = 32 << 20;

/// Why a UAPI answer was refused.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The socket, or who listens on it, is not root's.
    #[error("{0}: {1}: not asked")]
    Untrusted(PathBuf, Untrusted),
    /// Connecting, writing or reading failed.
    #[error("{0}: {1}")]
    Io(PathBuf, std::io::Error),
    /// The answer did not end within [`TIMEOUT`] (lines read by then).
    #[error(
        "{0}: no complete answer to `get=1` within {t} s ({1} lines read): not read; the \
         WireGuard implementation serving it is stuck (restart it)",
        t = TIMEOUT.as_secs()
    )]
    Timeout(PathBuf, usize),
    /// The answer broke a bound, or reported an error.
    #[error("{0}: {1}")]
    Answer(PathBuf, Bad),
}

/// What is wrong with an answer.
#[derive(Debug, thiserror::Error)]
pub enum Bad {
    /// A line longer than [`MAX_LINE`].
    #[error(
        "the answer has a line longer than {MAX_LINE} bytes: not read; whatever serves the \
         socket does not answer as WireGuard does"
    )]
    LongLine,
    /// More than [`MAX_LINES`] lines.
    #[error(
        "the answer has more than {MAX_LINES} lines: not read; whatever serves the socket \
         does not answer as WireGuard does"
    )]
    TooManyLines,
    /// More than [`MAX_PEERS`] peers.
    #[error(
        "the answer has more than {MAX_PEERS} peers: not read; whatever serves the socket \
         does not answer as WireGuard does"
    )]
    TooManyPeers,
    /// More than [`MAX_ANSWER`] bytes.
    #[error(
        "the answer is longer than {} MiB: not read; whatever serves the socket does not \
         answer as WireGuard does",
        MAX_ANSWER >> 20
    )]
    TooLarge,
    /// The implementation answered with an error number.
    #[error("UAPI get failed with errno {0}")]
    Errno(String),
}

impl From<Error> for std::io::Error {
    fn from(e: Error) -> Self {
        std::io::Error::other(e)
    }
}

/// True if a userspace WireGuard serves `name`: wireguard-go's UAPI socket exists and
/// root (or this process's user) owns it, so no other user can dress a TUN device up.
pub fn has_wireguard_uapi(name: &str) -> bool {
    uapi_socket(name).is_ok_and(|s| s.is_some())
}

/// The UAPI socket of interface `name`: `Ok(None)` when there is none, an error when it
/// is not the socket itself or another user than root (or this process's user) owns it.
pub fn uapi_socket(name: &str) -> std::io::Result<Option<PathBuf>> {
    let path = Path::new(WIREGUARD_UAPI_DIR).join(format!("{name}.sock"));
    match trusted::socket_file(&path) {
        Ok(()) => Ok(Some(path)),
        Err(Untrusted::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(why) => Err(Error::Untrusted(path, why).into()),
    }
}

/// Asks the UAPI socket of interface `name` ([`uapi_socket`]); `Ok(None)` when there is
/// no such socket.
pub async fn query_uapi(name: &str) -> std::io::Result<Option<Device>> {
    let Some(path) = uapi_socket(name)? else {
        return Ok(None);
    };
    let mut device = ask(&path).await?;
    device.name = name.to_owned();
    Ok(Some(device))
}

/// `get=1` on the socket at `path`, within [`TIMEOUT`] and the bounds.
pub async fn ask(path: &Path) -> Result<Device, Error> {
    let mut answer = Answer::default();
    match tokio::time::timeout(TIMEOUT, exchange(path, &mut answer)).await {
        Ok(result) => result.map(|()| answer.device),
        Err(_) => Err(Error::Timeout(path.to_owned(), answer.lines)),
    }
}

async fn exchange(path: &Path, answer: &mut Answer) -> Result<(), Error> {
    let io = |e| Error::Io(path.to_owned(), e);
    let bad = |b| Error::Answer(path.to_owned(), b);
    let mut stream = UnixStream::connect(path).await.map_err(io)?;
    let cred = stream.peer_cred().map_err(io)?;
    trusted::check_listener(cred.uid(), cred.pid())
        .map_err(|why| Error::Untrusted(path.to_owned(), why))?;
    stream.write_all(b"get=1\n\n").await.map_err(io)?;
    let mut reader = BufReader::new(stream);
    let mut line = Vec::new();
    let mut total = 0usize;
    loop {
        let buf = reader.fill_buf().await.map_err(io)?;
        if buf.is_empty() {
            break;
        }
        let end = buf.iter().position(|b| *b == b'\n');
        let chunk = &buf[..end.unwrap_or(buf.len())];
        if line.len() + chunk.len() > MAX_LINE {
            return Err(bad(Bad::LongLine));
        }
        line.extend_from_slice(chunk);
        let used = end.map_or(buf.len(), |e| e + 1);
        reader.consume(used);
        total += used;
        if total > MAX_ANSWER {
            return Err(bad(Bad::TooLarge));
        }
        if end.is_some() {
            // A blank line ends the answer.
            if line.is_empty() {
                return Ok(());
            }
            answer.line(&String::from_utf8_lossy(&line)).map_err(bad)?;
            line.clear();
        }
    }
    if !line.is_empty() {
        answer.line(&String::from_utf8_lossy(&line)).map_err(bad)?;
    }
    Ok(())
}

/// Parses a `get=1` answer.
#[cfg(test)]
pub fn parse(lines: &[String]) -> std::io::Result<Device> {
    let mut answer = Answer::default();
    for line in lines {
        answer.line(line).map_err(std::io::Error::other)?;
    }
    Ok(answer.device)
}

/// A `get=1` answer read line by line.
#[derive(Debug, Default)]
struct Answer {
    device: Device,
    lines: usize,
}

impl Answer {
    /// Takes one `key=value` line (others are skipped); an `errno` other than 0 is an error.
    fn line(&mut self, line: &str) -> Result<(), Bad> {
        self.lines += 1;
        if self.lines > MAX_LINES {
            return Err(Bad::TooManyLines);
        }
        let Some((key, value)) = line.split_once('=') else {
            return Ok(());
        };
        let dev = &mut self.device;
        let peers = dev.peers.len();
        let peer = dev.peers.last_mut();
        match (key, peer) {
            ("errno", _) if value != "0" => return Err(Bad::Errno(value.to_owned())),
            ("listen_port", _) => dev.listen_port = value.parse().unwrap_or(0),
            ("fwmark", _) => dev.fwmark = value.parse().unwrap_or(0),
            ("public_key", _) if peers >= MAX_PEERS => return Err(Bad::TooManyPeers),
            ("public_key", _) => dev.peers.push(Peer {
                public_key: hex_to_base64(value),
                ..Peer::default()
            }),
            ("endpoint", Some(p)) => p.endpoint = value.parse().ok(),
            ("allowed_ip", Some(p)) => p.allowed_ips.push(value.to_owned()),
            ("last_handshake_time_sec", Some(p)) => {
                p.last_handshake_unix = value.parse().unwrap_or(0)
            }
            ("rx_bytes", Some(p)) => p.rx_bytes = value.parse().unwrap_or(0),
            ("tx_bytes", Some(p)) => p.tx_bytes = value.parse().unwrap_or(0),
            ("persistent_keepalive_interval", Some(p)) => {
                p.persistent_keepalive = value.parse().unwrap_or(0)
            }
            _ => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, Write};
    use std::time::Instant;

    /// A UAPI stand-in of this process (root's, or this user's) at a fresh path: it reads
    /// the request, then writes what `answer` writes until it fails (the client left).
    fn serve(answer: fn(&mut dyn Write) -> std::io::Result<()>) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("wg0.sock");
        let listener = std::os::unix::net::UnixListener::bind(&path).expect("bind");
        std::thread::spawn(move || {
            for mut stream in listener.incoming().flatten() {
                let mut reader = std::io::BufReader::new(&stream);
                let mut line = String::new();
                while reader.read_line(&mut line).is_ok_and(|n| n > 0) && line != "\n" {
                    line.clear();
                }
                let _ = answer(&mut stream);
            }
        });
        (dir, path)
    }

    const PEER: &str =
        "public_key=b85996fecc9c7f1fc6d2572a76eda11d59bcd20be8e543b15ce4bd85a8e75a33\n\
                        endpoint=192.0.2.7:51820\nallowed_ip=10.0.0.2/32\n";

    #[tokio::test]
    async fn a_prompt_answer_is_read() {
        let (_dir, path) = serve(|w| write!(w, "listen_port=51820\n{PEER}errno=0\n\n"));
        let dev = ask(&path).await.expect("answer");
        assert_eq!(dev.listen_port, 51820);
        assert_eq!(dev.peers.len(), 1);
        assert_eq!(
            dev.peers[0].endpoint,
            Some("192.0.2.7:51820".parse().expect("addr"))
        );
        let (_dir, path) = serve(|w| write!(w, "errno=13\n\n"));
        let e = ask(&path).await.expect_err("errno");
        assert!(e.to_string().contains("errno 13"), "{e}");
    }

    /// One line every 200 ms, never the blank line: cut at [`TIMEOUT`] for the whole
    /// exchange, however often lines come.
    #[tokio::test]
    async fn a_dribbling_answer_is_cut_at_the_deadline() {
        let (_dir, path) = serve(|w| loop {
            w.write_all(b"allowed_ip=10.0.0.2/32\n")?;
            std::thread::sleep(Duration::from_millis(200));
        });
        let started = Instant::now();
        let e = ask(&path).await.expect_err("no end");
        let took = started.elapsed();
        assert!(matches!(e, Error::Timeout(_, n) if n >= 10), "{e}");
        assert!(
            e.to_string()
                .contains("no complete answer to `get=1` within 3 s"),
            "{e}"
        );
        assert!(
            took >= TIMEOUT && took < TIMEOUT + Duration::from_millis(500),
            "{took:?}"
        );
    }

    /// Endless peers, endless lines, an endless line: each stopped at its bound with an
    /// error naming it, long before memory runs out.
    #[tokio::test]
    async fn endless_answers_stop_at_a_bound() {
        // Written in large pieces, so the stand-in keeps up with the reader.
        let (_dir, peers) = serve(|w| {
            let many = PEER.repeat(1000);
            loop {
                w.write_all(many.as_bytes())?;
            }
        });
        let (_dir2, lines) = serve(|w| {
            w.write_all(PEER.as_bytes())?;
            let many = "allowed_ip=10.0.0.2/32\n".repeat(1000);
            loop {
                w.write_all(many.as_bytes())?;
            }
        });
        let (_dir3, line) = serve(|w| {
            w.write_all(b"endpoint=")?;
            loop {
                w.write_all(&[b'1'; 1024])?;
            }
        });
        for (path, bound) in [
            (&peers, "more than 65536 peers"),
            (&lines, "more than 1048576 lines"),
            (&line, "a line longer than 4096 bytes"),
        ] {
            let e = ask(path).await.expect_err(bound);
            assert!(
                matches!(e, Error::Answer(..)) && e.to_string().contains(bound),
                "{bound}: {e}"
            );
        }
    }
}

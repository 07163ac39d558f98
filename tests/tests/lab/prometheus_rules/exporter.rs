//! [`StaticExporter`]: a tiny HTTP server with a fixed exposition text for Prometheus to
//! scrape, optionally behind a bearer token.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{ensure, Result};

/// A tiny HTTP server answering every request with a fixed exposition text, or 401
/// when a token is required and the request lacks `Authorization: Bearer <token>`.
/// Stopped on `Drop`.
pub(crate) struct StaticExporter {
    port: u16,
    stop: Arc<AtomicBool>,
    pub(crate) served: Arc<AtomicUsize>,
    pub(crate) refused: Arc<AtomicUsize>,
    thread: Option<JoinHandle<()>>,
}

impl StaticExporter {
    pub(crate) fn start(token: Option<&str>, body: String) -> Result<StaticExporter> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let port = listener.local_addr()?.port();
        let stop = Arc::new(AtomicBool::new(false));
        let served = Arc::new(AtomicUsize::new(0));
        let refused = Arc::new(AtomicUsize::new(0));
        let expected = token.map(|t| format!("bearer {t}"));
        let (stop2, served2, refused2) = (stop.clone(), served.clone(), refused.clone());
        let thread = std::thread::spawn(move || {
            while !stop2.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((stream, _)) => {
                        let counter = match serve(stream, expected.as_deref(), &body) {
                            Ok(true) => &served2,
                            Ok(false) => &refused2,
                            Err(e) => {
                                eprintln!("static exporter: {e:#}");
                                continue;
                            }
                        };
                        counter.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        std::thread::sleep(Duration::from_millis(10));
                    }
                    Err(e) => {
                        eprintln!("static exporter: accept: {e}");
                        std::thread::sleep(Duration::from_millis(10));
                    }
                }
            }
        });
        Ok(StaticExporter {
            port,
            stop,
            served,
            refused,
            thread: Some(thread),
        })
    }

    pub(crate) fn target(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
}

impl Drop for StaticExporter {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Answers one request; true when it was authorized (or no token is required).
fn serve(mut stream: TcpStream, expected_auth: Option<&str>, body: &str) -> Result<bool> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut request = Vec::new();
    let mut buf = [0u8; 4096];
    while !request.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut buf)?;
        if n == 0 {
            break;
        }
        request.extend_from_slice(&buf[..n]);
        ensure!(request.len() < 65536, "request headers too large");
    }
    let request = String::from_utf8_lossy(&request);
    let authorized = expected_auth.is_none_or(|expected| {
        request.lines().any(|l| {
            l.split_once(':').is_some_and(|(k, v)| {
                k.trim().eq_ignore_ascii_case("authorization")
                    && v.trim().eq_ignore_ascii_case(expected)
            })
        })
    });
    let (status, body) = if authorized {
        ("200 OK", body)
    } else {
        ("401 Unauthorized", "missing or wrong bearer token\n")
    };
    write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    stream.flush()?;
    Ok(authorized)
}

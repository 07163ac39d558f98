//! The server over real loopback sockets, in process: timeouts, the connection cap, and
//! shutdown. The server runs on a runtime of its own; the clients are plain blocking
//! sockets. Short timeouts stand in for the agent's.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use axum::routing::get;

use super::*;

/// A running server of two routes, `/` and `/slow` (answers after 600 ms).
struct Server {
    addr: SocketAddr,
    stop: watch::Sender<bool>,
    done: std::sync::mpsc::Receiver<()>,
    _runtime: tokio::runtime::Runtime,
}

fn start(connections: usize, header_read_timeout: Duration) -> Server {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let app = Router::new().route("/", get(|| async { "ok" })).route(
        "/slow",
        get(|| async {
            tokio::time::sleep(Duration::from_millis(600)).await;
            "slow"
        }),
    );
    let listener = runtime
        .block_on(TcpListener::bind("127.0.0.1:0"))
        .expect("bind");
    let addr = listener.local_addr().expect("address");
    let (stop, stop_rx) = watch::channel(false);
    let (done_tx, done) = std::sync::mpsc::channel();
    let limits = Limits {
        connections,
        header_read_timeout,
    };
    runtime.spawn(async move {
        serve(listener, app, limits, stop_rx).await;
        let _ = done_tx.send(());
    });
    Server {
        addr,
        stop,
        done,
        _runtime: runtime,
    }
}

impl Server {
    fn connect(&self) -> TcpStream {
        let s = TcpStream::connect(self.addr).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(5)))
            .expect("read timeout");
        s
    }
}

fn send(s: &mut TcpStream, path: &str) {
    let request = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    s.write_all(request.as_bytes()).expect("write");
}

/// Reads one response (head and `Content-Length` body): its status line and body.
fn response(s: &mut TcpStream) -> (String, String) {
    let mut data = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let text = String::from_utf8_lossy(&data).into_owned();
        if let Some(end) = text.find("\r\n\r\n") {
            let length = text[..end]
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .and_then(|v| v.trim().parse::<usize>().ok())
                })
                .unwrap_or(0);
            if data.len() >= end + 4 + length {
                let status = text.lines().next().unwrap_or_default().to_owned();
                return (status, text[end + 4..end + 4 + length].to_owned());
            }
        }
        let n = s.read(&mut buf).expect("a response within 5 s");
        assert!(n > 0, "closed before a whole response: {text:?}");
        data.extend_from_slice(&buf[..n]);
    }
}

/// Whether the server closes `s` within `within` (whatever it writes before).
fn closed_within(s: &mut TcpStream, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    let mut buf = [0u8; 1024];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        s.set_read_timeout(Some(left)).expect("read timeout");
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return false
            }
            Err(_) => return true,
        }
    }
}

#[test]
fn idle_and_slow_connections_close_after_the_header_timeout() {
    let timeout = Duration::from_millis(500);
    let server = start(64, timeout);
    let started = Instant::now();
    let mut idle = server.connect();
    let mut slow = server.connect();
    slow.write_all(b"GET / HTTP/1.1\r\n").expect("write");
    // A header line every 100 ms, never the end of the head, for up to 3 s.
    let dripping = std::thread::spawn(move || {
        for i in 0..30 {
            std::thread::sleep(Duration::from_millis(100));
            if slow
                .write_all(format!("X-Line-{i}: 1\r\n").as_bytes())
                .is_err()
            {
                break;
            }
        }
        slow
    });
    assert!(
        closed_within(&mut idle, Duration::from_secs(3)),
        "an idle connection was held for 3 s"
    );
    assert!(started.elapsed() >= timeout, "closed before the timeout");
    let mut slow = dripping.join().expect("dripping thread");
    assert!(
        closed_within(&mut slow, Duration::from_millis(100)),
        "a connection sending its head slowly was held for {:?}",
        started.elapsed()
    );

    // Healthy twin: requests 100 ms apart keep one connection for longer than the timeout.
    let mut kept = server.connect();
    let started = Instant::now();
    while started.elapsed() < timeout * 3 {
        send(&mut kept, "/");
        let (status, body) = response(&mut kept);
        assert!(status.contains(" 200 ") && body == "ok", "{status} {body}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn at_the_cap_a_new_connection_closes_the_oldest_idle_one() {
    let server = start(3, Duration::from_secs(30));
    // One connection answering a slow request, then two idle ones: the cap.
    let mut busy = server.connect();
    send(&mut busy, "/slow");
    std::thread::sleep(Duration::from_millis(100));
    let mut oldest_idle = server.connect();
    std::thread::sleep(Duration::from_millis(50));
    let mut newer_idle = server.connect();
    std::thread::sleep(Duration::from_millis(50));

    // A new client still gets its answer.
    let mut client = server.connect();
    send(&mut client, "/");
    let (status, _) = response(&mut client);
    assert!(status.contains(" 200 "), "{status}");
    // The oldest idle connection made room; the busy one answers, the newer idle one is
    // still open.
    assert!(closed_within(&mut oldest_idle, Duration::from_secs(1)));
    let (status, body) = response(&mut busy);
    assert!(
        status.contains(" 200 ") && body == "slow",
        "{status} {body}"
    );
    send(&mut newer_idle, "/");
    let (status, _) = response(&mut newer_idle);
    assert!(status.contains(" 200 "), "{status}");
}

#[test]
fn shutdown_closes_idle_connections_and_finishes_requests() {
    let server = start(8, Duration::from_secs(30));
    let mut idle = server.connect();
    let mut busy = server.connect();
    send(&mut busy, "/slow");
    std::thread::sleep(Duration::from_millis(100));
    server.stop.send(true).expect("stop");
    assert!(closed_within(&mut idle, Duration::from_secs(1)));
    let (status, body) = response(&mut busy);
    assert!(
        status.contains(" 200 ") && body == "slow",
        "{status} {body}"
    );
    server
        .done
        .recv_timeout(Duration::from_secs(2))
        .expect("the server ends once its connections have");
}

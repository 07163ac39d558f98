//! The load of the tracing section's windows: iperf3 through the lossy link, and short TCP
//! connections over `lo` in the watched namespace (socket state changes).

use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, ensure, Context, Result};
use netdoctor_lab::{traffic, Netns};

use crate::lab::Lab;
use crate::STOP;

/// Request and reply size of one short connection.
pub(crate) const SHORT_CONN_BYTES: usize = 64;

/// Sockets `ss -tan` lists in a namespace.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SsCount {
    pub(crate) sockets: u64,
    pub(crate) time_wait: u64,
}

pub(crate) fn ss_count(ns: &Netns) -> Option<SsCount> {
    let out = ns.run(&["ss", "-Htan"]).ok()?;
    let lines = out.lines().filter(|l| !l.trim().is_empty());
    let (mut sockets, mut time_wait) = (0, 0);
    for l in lines {
        sockets += 1;
        if l.starts_with("TIME-WAIT") {
            time_wait += 1;
        }
    }
    Some(SsCount { sockets, time_wait })
}

/// Short TCP connections made by the client loop.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ConnStats {
    pub(crate) connections: u64,
    pub(crate) failures: u64,
}

/// Connect, send a request, read the reply until the server closes, close.
pub(crate) fn one_connection(addr: SocketAddr) -> io::Result<()> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
    s.set_read_timeout(Some(Duration::from_secs(2)))?;
    s.write_all(&[0x5a; SHORT_CONN_BYTES])?;
    let mut reply = Vec::with_capacity(SHORT_CONN_BYTES);
    s.read_to_end(&mut reply)?;
    if reply.len() != SHORT_CONN_BYTES {
        return Err(io::Error::other("short reply"));
    }
    Ok(())
}

pub(crate) fn client_loop(addr: SocketAddr, stop: &AtomicBool) -> ConnStats {
    let mut st = ConnStats::default();
    while !stop.load(Ordering::Relaxed) && !STOP.load(Ordering::Relaxed) {
        match one_connection(addr) {
            Ok(()) => st.connections += 1,
            Err(_) => {
                st.failures += 1;
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    }
    st
}

/// Serves one connection at a time: read the request, answer, close first (the
/// TIME-WAIT stays on this side). The listener's receive timeout bounds each accept.
pub(crate) fn serve_loop(listener: &TcpListener, stop: &AtomicBool) {
    let mut buf = [0u8; SHORT_CONN_BYTES];
    while !stop.load(Ordering::Relaxed) {
        let Ok((mut s, _)) = listener.accept() else {
            continue;
        };
        let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
        if s.read_exact(&mut buf).is_ok() {
            let _ = s.write_all(&buf);
        }
    }
}

/// A listener on 127.0.0.1 in `ns` whose accept() returns after 100 ms without a client
/// (SO_RCVTIMEO applies to accept; std sets it only through TcpStream).
pub(crate) fn short_conn_listener(ns: &Netns) -> Result<TcpListener> {
    ns.run_in(|| -> io::Result<TcpListener> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
        let sock = TcpStream::from(OwnedFd::from(listener));
        sock.set_read_timeout(Some(Duration::from_millis(100)))?;
        Ok(TcpListener::from(OwnedFd::from(sock)))
    })?
    .context("creating the short-connection listener")
}

/// What was generated in one load window.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TraceTraffic {
    pub(crate) secs: f64,
    pub(crate) gbps: f64,
    pub(crate) retransmits: Option<u64>,
    pub(crate) conns: ConnStats,
    pub(crate) nft_dropped: Option<u64>,
}

/// iperf3 a→b for `secs` (through the lossy link) while a client loop makes short TCP
/// connections over lo in the watched namespace.
pub(crate) fn tracing_traffic(lab: &Lab, secs: u32) -> Result<(traffic::Iperf3Report, ConnStats)> {
    let ns = lab.watched();
    let listener = short_conn_listener(ns)?;
    let addr = listener.local_addr()?;
    let stop = Arc::new(AtomicBool::new(false));
    std::thread::scope(|scope| -> Result<(traffic::Iperf3Report, ConnStats)> {
        let server = {
            let stop = Arc::clone(&stop);
            scope.spawn(move || serve_loop(&listener, &stop))
        };
        let client = {
            let stop = Arc::clone(&stop);
            scope.spawn(move || ns.run_in(move || client_loop(addr, &stop)))
        };
        let iperf = lab.iperf(secs, 1);
        stop.store(true, Ordering::SeqCst);
        let conns = client.join();
        let served = server.join();
        let conns = match conns {
            Ok(c) => c?,
            Err(_) => bail!("the short-connection client panicked"),
        };
        ensure!(served.is_ok(), "the short-connection server panicked");
        Ok((iperf?, conns))
    })
}

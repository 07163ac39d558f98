//! Steady UDP from one namespace to another, with no handshake for loss to swallow.
//!
//! iperf3 opens a TCP control connection and, in UDP mode, exchanges a first datagram before
//! it streams; on a path that drops packets at random either can be lost, and iperf3 then
//! waits far past the window (seen at 5 % loss). Tests that only need packets at a known rate
//! through a lossy tunnel use this instead: a sink bound in the receiving namespace and a
//! paced sender in the sending one, both on threads in their namespace ([`Netns::spawn_in`]).
//!
//! ```no_run
//! # fn main() -> anyhow::Result<()> {
//! # let (a, b) = (netdoctor_lab::Netns::new()?, netdoctor_lab::Netns::new()?);
//! use netdoctor_lab::udp_stream::{UdpStream, udp_stream};
//! let report = udp_stream(&a, &b, &UdpStream::new("10.250.0.2", 6001, 16_000_000))?;
//! assert!(report.received <= report.sent);
//! # Ok(())
//! # }
//! ```

use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::Netns;

/// What to send: `size`-byte datagrams to `dst:port` at `rate_bps` for `duration`.
#[derive(Debug, Clone)]
pub struct UdpStream {
    /// The receiver's address (IPv4 or IPv6) inside the receiving namespace.
    pub dst: String,
    /// The UDP port the sink binds.
    pub port: u16,
    /// Payload bytes per datagram.
    pub size: usize,
    /// Payload bits per second.
    pub rate_bps: u64,
    /// How long the sender sends.
    pub duration: Duration,
}

impl UdpStream {
    /// 1200-byte datagrams to `dst:port` at `rate_bps` for 5 s.
    pub fn new(dst: &str, port: u16, rate_bps: u64) -> Self {
        UdpStream {
            dst: dst.to_string(),
            port,
            size: 1200,
            rate_bps,
            duration: Duration::from_secs(5),
        }
    }
}

/// What was sent and what the sink received.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpReport {
    /// Datagrams the sender handed to its socket without an error.
    pub sent: u64,
    /// Datagrams the sink read.
    pub received: u64,
}

impl UdpReport {
    /// The share of sent datagrams the sink never read, in percent.
    pub fn loss_percent(&self) -> f64 {
        if self.sent == 0 {
            return 0.0;
        }
        100.0 * self.sent.saturating_sub(self.received) as f64 / self.sent as f64
    }
}

/// How long the sink keeps reading after the sender stops, for datagrams in flight.
const DRAIN: Duration = Duration::from_millis(500);

/// Sends `stream` from namespace `from` to a sink in namespace `to`; returns when the sender
/// has sent for `stream.duration` and the sink has drained.
pub fn udp_stream(from: &Netns, to: &Netns, stream: &UdpStream) -> Result<UdpReport> {
    let ip: IpAddr = stream
        .dst
        .parse()
        .with_context(|| format!("udp_stream: {:?} is not an IP address", stream.dst))?;
    if stream.size == 0 || stream.rate_bps == 0 {
        bail!("udp_stream: size and rate must be above zero: {stream:?}");
    }
    let (ready_tx, ready_rx) = mpsc::channel();
    let port = stream.port;
    let listen_for = stream.duration + DRAIN;
    let sink = to.spawn_in(move || sink(ip, port, listen_for, ready_tx))?;
    ready_rx
        .recv_timeout(Duration::from_secs(5))
        .context("udp_stream: the sink did not bind")?
        .context("udp_stream: binding the sink")?;
    let s = stream.clone();
    let sent = from.spawn_in(move || send(SocketAddr::new(ip, s.port), &s))?;
    let sent = join(sent, "sender")?;
    let received = join(sink, "sink")?;
    Ok(UdpReport { sent, received })
}

fn join<R>(handle: JoinHandle<Result<R>>, what: &str) -> Result<R> {
    match handle.join() {
        Ok(result) => result.with_context(|| format!("udp_stream {what}")),
        Err(_) => bail!("udp_stream: the {what} thread panicked"),
    }
}

/// Binds `port` on every address of `dst`'s family, says so on `ready`, then counts datagrams
/// for `listen_for`.
fn sink(
    dst: IpAddr,
    port: u16,
    listen_for: Duration,
    ready: mpsc::Sender<Result<()>>,
) -> Result<u64> {
    let any: IpAddr = if dst.is_ipv4() {
        [0u8; 4].into()
    } else {
        [0u16; 8].into()
    };
    let bound = UdpSocket::bind(SocketAddr::new(any, port)).and_then(|s| {
        s.set_read_timeout(Some(Duration::from_millis(100)))
            .map(|_| s)
    });
    let socket = match bound {
        Ok(s) => {
            let _ = ready.send(Ok(()));
            s
        }
        Err(e) => {
            let _ = ready.send(Err(anyhow::anyhow!("binding port {port}: {e}")));
            bail!("binding port {port}: {e}");
        }
    };
    let until = Instant::now() + listen_for;
    let mut buf = vec![0u8; 65_536];
    let mut received = 0u64;
    while Instant::now() < until {
        if socket.recv(&mut buf).is_ok() {
            received += 1;
        }
    }
    Ok(received)
}

/// Sends datagrams on a fixed schedule (the n-th at n × interval), sleeping between them; a
/// send the path refuses (an ICMP error reported on the socket) is not counted.
fn send(to: SocketAddr, stream: &UdpStream) -> Result<u64> {
    let any: SocketAddr = if to.is_ipv4() {
        "0.0.0.0:0".parse()?
    } else {
        "[::]:0".parse()?
    };
    let socket = UdpSocket::bind(any).context("binding the sender")?;
    socket
        .connect(to)
        .with_context(|| format!("connecting to {to}"))?;
    let payload = vec![0x5au8; stream.size];
    let interval = Duration::from_secs_f64((stream.size * 8) as f64 / stream.rate_bps as f64);
    let start = Instant::now();
    let mut sent = 0u64;
    for n in 0u32.. {
        let due = start + interval * n;
        if due >= start + stream.duration {
            break;
        }
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        if socket.send(&payload).is_ok() {
            sent += 1;
        }
    }
    Ok(sent)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loss_is_what_the_sink_never_read() {
        let r = UdpReport {
            sent: 1000,
            received: 950,
        };
        assert!((r.loss_percent() - 5.0).abs() < 1e-9);
        let none = UdpReport {
            sent: 0,
            received: 0,
        };
        assert_eq!(none.loss_percent(), 0.0);
    }
}

//! A delay line between two network namespaces, for paths with a round trip this host's
//! kernel cannot give (it has no netem): a TUN device in each namespace, joined by threads of
//! the test process that hold every packet for a fixed time before writing it to the other
//! side. No loss, no reordering, no rate limit but what the threads copy (hundreds of
//! Mbit/s, more than the tests need).

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::netns::Netns;

/// Two TUN devices [`DelayLine::IFNAME`], one in each namespace, addressed point to point,
/// and the threads between them. Dropping it stops the threads; the devices go with them.
#[derive(Debug)]
pub struct DelayLine {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl DelayLine {
    /// The devices' name in both namespaces.
    pub const IFNAME: &'static str = "ndelay";

    /// Joins `a` (address `a_ip`) and `b` (`b_ip`) by a path of `one_way` each way.
    pub fn new(a: &Netns, a_ip: &str, b: &Netns, b_ip: &str, one_way: Duration) -> Result<Self> {
        let fa = Arc::new(open_tun(a)?);
        let fb = Arc::new(open_tun(b)?);
        for (ns, me, peer) in [(a, a_ip, b_ip), (b, b_ip, a_ip)] {
            ns.ip(&["addr", "add", me, "peer", peer, "dev", Self::IFNAME])?;
            ns.ip(&["link", "set", Self::IFNAME, "txqueuelen", "10000"])?;
            ns.set_up(Self::IFNAME)?;
        }
        let stop = Arc::new(AtomicBool::new(false));
        let mut threads = forward(fa.clone(), fb.clone(), one_way, stop.clone())?;
        threads.extend(forward(fb, fa, one_way, stop.clone())?);
        Ok(DelayLine { stop, threads })
    }
}

impl Drop for DelayLine {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Creates TUN device [`DelayLine::IFNAME`] in `ns` and returns its file.
fn open_tun(ns: &Netns) -> Result<OwnedFd> {
    ns.run_in(|| -> Result<OwnedFd> {
        const TUNSETIFF: libc::c_ulong = 0x4004_54ca;
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/net/tun")
            .context("opening /dev/net/tun")?;
        let fd: OwnedFd = file.into();
        // struct ifreq: the name, then the flags.
        let mut req = [0u8; 40];
        let name = DelayLine::IFNAME.as_bytes();
        req[..name.len()].copy_from_slice(name);
        let flags = (libc::IFF_TUN | libc::IFF_NO_PI) as u16;
        req[16..18].copy_from_slice(&flags.to_ne_bytes());
        // SAFETY: TUNSETIFF reads and writes one `struct ifreq` (40 bytes) at `req`.
        let rc = unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETIFF, req.as_mut_ptr()) };
        if rc != 0 {
            bail!(
                "TUNSETIFF {}: {}",
                DelayLine::IFNAME,
                std::io::Error::last_os_error()
            );
        }
        Ok(fd)
    })?
}

/// Waits up to 100 ms for `fd` to be readable.
fn readable(fd: &OwnedFd) -> bool {
    let mut p = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    unsafe { libc::poll(&mut p, 1, 100) > 0 }
}

/// Packets read from `from` written to `to` `delay` later, in order: a reader and a writer.
fn forward(
    from: Arc<OwnedFd>,
    to: Arc<OwnedFd>,
    delay: Duration,
    stop: Arc<AtomicBool>,
) -> Result<Vec<JoinHandle<()>>> {
    let (tx, rx) = mpsc::channel::<(Instant, Vec<u8>)>();
    let reader_stop = stop.clone();
    let reader = std::thread::Builder::new()
        .name("delay-read".into())
        .spawn(move || {
            let mut buf = vec![0u8; 65_536];
            while !reader_stop.load(Ordering::Relaxed) {
                if !readable(&from) {
                    continue;
                }
                // SAFETY: `buf` is writable for its length.
                let n = unsafe { libc::read(from.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
                let Ok(n) = usize::try_from(n) else { continue };
                if tx
                    .send((Instant::now() + delay, buf[..n].to_vec()))
                    .is_err()
                {
                    break;
                }
            }
        })
        .context("spawning the delay line's reader")?;
    let writer = std::thread::Builder::new()
        .name("delay-write".into())
        .spawn(move || {
            for (due, packet) in rx {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let wait = due.saturating_duration_since(Instant::now());
                if !wait.is_zero() {
                    std::thread::sleep(wait);
                }
                // SAFETY: `packet` is readable for its length.
                unsafe { libc::write(to.as_raw_fd(), packet.as_ptr().cast(), packet.len()) };
            }
        })
        .context("spawning the delay line's writer")?;
    Ok(vec![reader, writer])
}

//! The socket snapshot against `getsockopt(TCP_INFO)` of the same socket: real connections
//! over loopback in a network namespace of the test's own, real BPF.

use std::io::{Read, Write};
use std::mem::MaybeUninit;
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{Socket, SocketProbes};

/// What `getsockopt(TCP_INFO)` says (offsets of `struct tcp_info`, linux/tcp.h).
#[derive(Debug, Clone, Copy)]
pub(super) struct TcpInfo {
    pub(super) app_limited: bool,
    pub(super) rcv_ssthresh: u32,
    pub(super) rtt_us: u32,
    pub(super) notsent_bytes: u32,
    pub(super) delivery_rate: u64,
    pub(super) busy_us: u64,
    pub(super) rwnd_limited_us: u64,
    pub(super) sndbuf_limited_us: u64,
    pub(super) delivered: u32,
    pub(super) dsack_dups: u32,
    pub(super) reord_seen: u32,
    /// Linux 5.19 and later.
    pub(super) snd_wnd: Option<u32>,
    /// Linux 6.2 and later.
    pub(super) rcv_wnd: Option<u32>,
}

pub(super) fn tcp_info(s: &impl AsRawFd) -> TcpInfo {
    let mut buf = [0u8; 512];
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: `buf` is writable for `len` bytes and `len` is a valid in/out length.
    let rc = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            buf.as_mut_ptr().cast(),
            &mut len,
        )
    };
    assert_eq!(rc, 0, "TCP_INFO: {}", std::io::Error::last_os_error());
    let len = len as usize;
    let u32_at = |o: usize| {
        (o + 4 <= len).then(|| u32::from_ne_bytes(buf[o..o + 4].try_into().unwrap_or_default()))
    };
    let u64_at = |o: usize| u64::from_ne_bytes(buf[o..o + 8].try_into().unwrap_or_default());
    let u32_of = |o: usize| u32_at(o).unwrap_or(0);
    TcpInfo {
        app_limited: buf[7] & 1 != 0,
        rcv_ssthresh: u32_of(64),
        rtt_us: u32_of(68),
        notsent_bytes: u32_of(144),
        delivery_rate: u64_at(160),
        busy_us: u64_at(168),
        rwnd_limited_us: u64_at(176),
        sndbuf_limited_us: u64_at(184),
        delivered: u32_of(192),
        dsack_dups: u32_of(216),
        reord_seen: u32_of(220),
        snd_wnd: u32_at(228),
        rcv_wnd: u32_at(232),
    }
}

pub(super) fn int_opt(s: &impl AsRawFd, level: i32, name: i32) -> u64 {
    let mut v = 0u64;
    let mut len = std::mem::size_of::<u64>() as libc::socklen_t;
    // SAFETY: `v` is writable for `len` bytes; the kernel writes at most that many.
    let rc = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            level,
            name,
            std::ptr::from_mut(&mut v).cast(),
            &mut len,
        )
    };
    assert_eq!(rc, 0, "getsockopt: {}", std::io::Error::last_os_error());
    if len == 4 {
        u64::from(v as u32)
    } else {
        v
    }
}

/// The socket's cookie: what the snapshot's rows are keyed by.
pub(super) fn cookie(s: &impl AsRawFd) -> u64 {
    int_opt(s, libc::SOL_SOCKET, libc::SO_COOKIE)
}

/// Runs `test` on a thread of its own in a new network namespace with loopback up.
pub(super) fn in_namespace(test: impl FnOnce() + Send + 'static) {
    std::thread::spawn(|| {
        nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET).expect("unshare");
        let up = std::process::Command::new("ip")
            .args(["link", "set", "lo", "up"])
            .status()
            .expect("ip link");
        assert!(up.success(), "ip link set lo up");
        test();
    })
    .join()
    .expect("the namespace's thread failed");
}

/// A loopback connection whose receiver's buffer is `rcvbuf` bytes (its window a part of
/// it): (sender, receiver).
pub(super) fn connection(rcvbuf: usize) -> (TcpStream, TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    nix::sys::socket::setsockopt(&listener, nix::sys::socket::sockopt::RcvBuf, &rcvbuf)
        .expect("SO_RCVBUF");
    let sender = TcpStream::connect(listener.local_addr().expect("addr")).expect("connect");
    let (receiver, _) = listener.accept().expect("accept");
    (sender, receiver)
}

/// Writes `chunk`-byte blocks into `s` until `stop`, sleeping `pause` between them.
pub(super) fn write_until(
    mut s: TcpStream,
    stop: Arc<AtomicBool>,
    chunk: usize,
    pause: Duration,
) -> std::thread::JoinHandle<TcpStream> {
    std::thread::spawn(move || {
        let block = vec![7u8; chunk];
        while !stop.load(Ordering::Relaxed) {
            if s.write_all(&block).is_err() {
                break;
            }
            if !pause.is_zero() {
                std::thread::sleep(pause);
            }
        }
        s
    })
}

/// Reads `s` until `stop`, `chunk` bytes at a time with `pause` between reads; then drains
/// what is left for a while without pausing.
pub(super) fn read_until(
    mut s: TcpStream,
    stop: Arc<AtomicBool>,
    chunk: usize,
    pause: Duration,
) -> std::thread::JoinHandle<TcpStream> {
    std::thread::spawn(move || {
        let mut buf = vec![0u8; chunk.max(65536)];
        s.set_read_timeout(Some(Duration::from_millis(200)))
            .expect("timeout");
        while !stop.load(Ordering::Relaxed) {
            if matches!(s.read(&mut buf[..chunk]), Ok(0)) {
                break;
            }
            std::thread::sleep(pause);
        }
        let until = Instant::now() + Duration::from_millis(500);
        while Instant::now() < until {
            match s.read(&mut buf) {
                Ok(n) if n > 0 => {}
                _ => break,
            }
        }
        s
    })
}

pub(super) fn find(sockets: &[Socket], cookie: u64) -> Socket {
    sockets
        .iter()
        .find(|s| s.cookie == cookie)
        .cloned()
        .unwrap_or_else(|| panic!("socket {cookie} not in the snapshot"))
}

/// Microseconds in `jiffies` at `hz`, as tcp_info computes them (`jiffies * USEC_PER_SEC /
/// HZ`, integers).
pub(super) fn usecs(jiffies: u32, hz: f64) -> u64 {
    u64::from(jiffies) * 1_000_000 / hz as u64
}

#[test]
fn a_snapshot_reads_what_tcp_info_says() {
    if !crate::testing::root_or_skip("to load BPF and make a network namespace") {
        return;
    }
    in_namespace(|| {
        let mut storage = MaybeUninit::uninit();
        let probes = SocketProbes::load(&mut storage).expect("load the socket programs");
        assert!(probes.signals().snapshots, "iter/tcp");
        let first = probes.snapshot().expect("snapshot");
        assert!(first.clock.is_some(), "an empty snapshot carries its clock");

        // A receiver that reads slowly behind a small buffer: the sender waits for its
        // window, then everything drains and the connection goes quiet.
        let (sender, receiver) = connection(16 * 1024);
        let stop = Arc::new(AtomicBool::new(false));
        let w = write_until(sender, stop.clone(), 64 * 1024, Duration::ZERO);
        let r = read_until(receiver, stop.clone(), 4096, Duration::from_millis(2));
        std::thread::sleep(Duration::from_millis(1200));
        stop.store(true, Ordering::Relaxed);
        let sender = w.join().expect("writer");
        let receiver = r.join().expect("reader");
        std::thread::sleep(Duration::from_millis(200));

        let snap = probes.snapshot().expect("snapshot");
        let ti = tcp_info(&sender);
        let ri = tcp_info(&receiver);
        let hz = probes
            .hz(&snap.clock.expect("clock"))
            .expect("HZ measured over a second");
        assert!(
            [100.0, 250.0, 300.0, 1000.0].contains(&hz),
            "HZ {hz} is not a configured rate"
        );
        let s = find(&snap.sockets, cookie(&sender));
        let r = find(&snap.sockets, cookie(&receiver));

        assert_eq!(
            s.chrono.state, 0,
            "a quiet connection's chronograph is stopped"
        );
        let c = s.chrono;
        assert!(
            c.rwnd_limited > 0,
            "the sender waited for the window: {c:?}"
        );
        assert_eq!(
            usecs(c.busy + c.rwnd_limited + c.sndbuf_limited, hz),
            ti.busy_us,
            "busy time (tcpi_busy_time counts every sending state)"
        );
        assert_eq!(
            usecs(c.rwnd_limited, hz),
            ti.rwnd_limited_us,
            "rwnd_limited"
        );
        assert_eq!(
            usecs(c.sndbuf_limited, hz),
            ti.sndbuf_limited_us,
            "sndbuf_limited"
        );
        assert_eq!(s.delivered, ti.delivered, "delivered");
        assert_eq!(s.notsent_bytes, ti.notsent_bytes, "notsent");
        assert_eq!(s.unacked_bytes, 0, "all acknowledged");
        assert_eq!(s.delivery_rate_app_limited, ti.app_limited, "app_limited");
        assert!(
            s.delivery_rate_bps.abs_diff(ti.delivery_rate * 8) <= 8,
            "delivery rate {} bit/s vs tcpi_delivery_rate {} B/s",
            s.delivery_rate_bps,
            ti.delivery_rate
        );
        assert_eq!(s.srtt_us, ti.rtt_us, "srtt");
        assert_eq!((s.dsack_dups, s.reord_seen), (ti.dsack_dups, ti.reord_seen));
        if let Some(w) = ti.snd_wnd {
            assert_eq!(s.snd_wnd, w, "tcpi_snd_wnd");
        }
        assert!(s.max_window >= s.snd_wnd);
        for (sock, info) in [(&s, &ti), (&r, &ri)] {
            assert_eq!(sock.rcv_ssthresh, info.rcv_ssthresh, "rcv_ssthresh");
            if let Some(w) = info.rcv_wnd {
                assert_eq!(sock.rcv_wnd, w, "tcpi_rcv_wnd");
            }
        }
        assert_eq!(
            u64::from(r.rcvbuf),
            int_opt(&receiver, libc::SOL_SOCKET, libc::SO_RCVBUF),
            "SO_RCVBUF"
        );
        assert_eq!(
            u64::from(s.sndbuf),
            int_opt(&sender, libc::SOL_SOCKET, libc::SO_SNDBUF),
            "SO_SNDBUF"
        );
        assert!(r.window_clamp > 0 && r.rcv_wnd <= r.window_clamp);
    });
}

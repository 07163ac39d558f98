//! The window's shares, limit and ceiling against `getsockopt(TCP_INFO)` of the same
//! socket, read at the window's two ends: real loopback connections in a network namespace
//! of the test's own, real BPF.

use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::super::{ceiling, Limit, Limits};
use crate::kernel::sockets::rates::{Baseline, SocketRow};
use crate::kernel::sockets::tcp_info_tests::{
    connection, cookie, find, in_namespace, read_until, tcp_info, write_until, TcpInfo,
};
use crate::kernel::sockets::SocketProbes;

/// A window of `secs` over the connection (sender, receiver) the caller started:
/// TCP_INFO of the sender at its start and end, and the sender's row.
fn observe(
    probes: &SocketProbes<'_>,
    sender: &impl std::os::fd::AsRawFd,
    secs: f64,
) -> (TcpInfo, TcpInfo, SocketRow) {
    let baseline = Baseline::take(probes).expect("baseline");
    let before = tcp_info(sender);
    let started = Instant::now();
    std::thread::sleep(Duration::from_secs_f64(secs));
    let (rows, _) = baseline
        .close(probes, started.elapsed().as_secs_f64())
        .expect("close the window");
    let after = tcp_info(sender);
    let id = cookie(sender);
    let row = rows
        .into_iter()
        .find(|r| r.socket.cookie == id)
        .expect("the sender's row");
    (before, after, row)
}

/// `ms` (ours) within two ticks of `us` microseconds (tcp_info's): each end of the window
/// was read by both a tick apart at most.
fn near(ms: f64, us: u64, hz: f64, what: &str) {
    let tolerance = 2.0 * 2000.0 / hz;
    let theirs = us as f64 / 1000.0;
    assert!(
        (ms - theirs).abs() <= tolerance,
        "{what}: {ms:.1} ms here, {theirs:.1} ms in tcp_info (tolerance {tolerance} ms)"
    );
}

#[test]
fn window_shares_and_ceiling_match_tcp_info() {
    if !crate::testing::root_or_skip("to load BPF and make a network namespace") {
        return;
    }
    in_namespace(|| {
        let mut storage = MaybeUninit::uninit();
        let probes = SocketProbes::load(&mut storage).expect("load the socket programs");
        let first = probes.snapshot().expect("snapshot");
        // A receiver reading slowly behind a 16 KiB buffer: the sender waits for its window.
        let (sender, receiver) = connection(16 * 1024);
        let stop = Arc::new(AtomicBool::new(false));
        let w = write_until(
            sender.try_clone().expect("clone"),
            stop.clone(),
            65536,
            Duration::ZERO,
        );
        let r = read_until(receiver, stop.clone(), 4096, Duration::from_millis(2));
        std::thread::sleep(Duration::from_millis(300));
        let (before, after, row) = observe(&probes, &sender, 1.5);
        let hz = probes
            .hz(&row.socket.clock)
            .expect("HZ measured over a second");
        assert!(first.clock.is_some());
        let l = &row.limits;
        near(
            l.rwnd_limited_ms,
            after.rwnd_limited_us - before.rwnd_limited_us,
            hz,
            "receiver-window-limited time",
        );
        near(
            l.sndbuf_limited_ms,
            after.sndbuf_limited_us - before.sndbuf_limited_us,
            hz,
            "send-buffer-limited time",
        );
        near(
            l.busy_ms + l.rwnd_limited_ms + l.sndbuf_limited_ms,
            after.busy_us - before.busy_us,
            hz,
            "tcpi_busy_time (every sending state)",
        );
        assert!((l.observed_ms - 1500.0).abs() < 50.0, "observed {l:?}");
        assert_eq!(l.limit, Limit::ReceiverWindow, "{l:?}");
        assert!(l.limit_share > 0.5, "{l:?}");
        assert!(
            (l.rwnd_limited_share - l.rwnd_limited_ms / l.observed_ms).abs() < 1e-6,
            "{l:?}"
        );

        // Quiet again: the window and srtt tcp_info reports give the same ceiling.
        stop.store(true, Ordering::Relaxed);
        drop(w.join().expect("writer"));
        drop(r.join().expect("reader"));
        std::thread::sleep(Duration::from_millis(200));
        let s = find(
            &probes.snapshot().expect("snapshot").sockets,
            cookie(&sender),
        );
        let ti = tcp_info(&sender);
        let mut quiet = Limits {
            limit: Limit::ReceiverWindow,
            ..Limits::default()
        };
        ceiling(&mut quiet, &s, 0.0, false);
        let window = ti.snd_wnd.expect("tcpi_snd_wnd (Linux 5.19)");
        assert!(
            quiet.window_bytes >= i64::from(window),
            "{quiet:?} vs {ti:?}"
        );
        let expected = quiet.window_bytes as f64 * 8.0 / (f64::from(ti.rtt_us) / 1e6);
        assert!(
            (quiet.ceiling_bps - expected).abs() < 1.0,
            "{quiet:?}: window {} B / tcpi_rtt {} us",
            quiet.window_bytes,
            ti.rtt_us
        );
    });
}

#[test]
fn a_paced_sender_is_limited_by_the_application() {
    if !crate::testing::root_or_skip("to load BPF and make a network namespace") {
        return;
    }
    in_namespace(|| {
        let mut storage = MaybeUninit::uninit();
        let probes = SocketProbes::load(&mut storage).expect("load the socket programs");
        probes.snapshot().expect("snapshot");
        // 4 KiB every 5 ms (about 6 Mbit/s) to a receiver that keeps up.
        let (sender, receiver) = connection(1 << 20);
        let stop = Arc::new(AtomicBool::new(false));
        let w = write_until(
            sender.try_clone().expect("clone"),
            stop.clone(),
            4096,
            Duration::from_millis(5),
        );
        let r = read_until(receiver, stop.clone(), 65536, Duration::ZERO);
        std::thread::sleep(Duration::from_millis(300));
        let (before, after, row) = observe(&probes, &sender, 1.5);
        stop.store(true, Ordering::Relaxed);
        drop(w.join().expect("writer"));
        drop(r.join().expect("reader"));
        let hz = probes.hz(&row.socket.clock).expect("HZ");
        let l = &row.limits;
        near(
            l.busy_ms + l.rwnd_limited_ms + l.sndbuf_limited_ms,
            after.busy_us - before.busy_us,
            hz,
            "tcpi_busy_time",
        );
        assert_eq!(l.limit, Limit::Application, "{l:?}");
        assert!(l.idle_share > 0.5, "{l:?}");
        assert!(row.window_bytes_acked >= 64 * 1024, "{row:?}");
        assert_eq!(
            row.socket.delivery_rate_app_limited, after.app_limited,
            "tcpi_delivery_rate_app_limited"
        );
        assert!(row.socket.delivery_rate_app_limited);
    });
}

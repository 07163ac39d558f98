//! The limits arithmetic on crafted snapshots: shares of the window, the dominant limit,
//! ceilings and the rate the path has shown. `tcp_info.rs` checks it against the kernel.

use std::net::IpAddr;

use super::*;
use crate::kernel::sockets::rates::{rows, SocketRow};
use crate::kernel::sockets::{Chrono, ClosedSocket};

mod tcp_info;

/// A socket read at `jiffies` (and `jiffies * 4 ms`: HZ 250) with these chronographs.
fn at(cookie: u64, jiffies: u64, busy: u32, rwnd: u32, sndbuf: u32) -> Socket {
    let mut s = Socket::sample(cookie);
    s.clock = Clock {
        jiffies,
        ns: jiffies * 4_000_000,
    };
    s.chrono = Chrono {
        busy,
        rwnd_limited: rwnd,
        sndbuf_limited: sndbuf,
        state: 0,
    };
    s
}

fn window(start_jiffies: u64) -> Window {
    Window {
        secs: 4.0,
        start: Some(Clock {
            jiffies: start_jiffies,
            ns: start_jiffies * 4_000_000,
        }),
        hz: Some(250.0),
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

#[test]
fn shares_are_the_chronographs_moves_over_the_connections_span() {
    let start = at(1, 1000, 100, 0, 0);
    let end = at(1, 2000, 150, 700, 0);
    let l = shares(Some(&start), &end, &window(1000));
    assert!(close(l.busy_share, 0.05), "{l:?}");
    assert!(close(l.rwnd_limited_share, 0.70), "{l:?}");
    assert!(close(l.sndbuf_limited_share, 0.0), "{l:?}");
    assert!(close(l.idle_share, 0.25), "{l:?}");
    // 1000 jiffies at 250 Hz: 4 s; 700 of them 2.8 s.
    assert!(close(l.observed_ms, 4000.0) && close(l.rwnd_limited_ms, 2800.0));
    assert!(close(l.busy_ms, 200.0) && close(l.sndbuf_limited_ms, 0.0));

    // 32-bit chronographs wrap: the difference still counts.
    let start = at(2, 1000, 0, u32::MAX - 9, 0);
    let end = at(2, 2000, 0, 90, 0);
    let l = shares(Some(&start), &end, &window(1000));
    assert!(close(l.rwnd_limited_share, 0.1), "{l:?}");

    // Without HZ the shares stand, the times are unknown.
    let mut w = window(1000);
    w.hz = None;
    let l = shares(Some(&at(3, 1000, 0, 0, 0)), &at(3, 2000, 0, 0, 500), &w);
    assert!(close(l.sndbuf_limited_share, 0.5) && l.sndbuf_limited_ms < 0.0);
}

#[test]
fn a_connection_opened_in_the_window_counts_from_its_opening() {
    // The window began at jiffy 1000; the connection opened 2 s (500 jiffies) before its
    // last figures at jiffy 2000 and spent 400 of them waiting for the window.
    let mut end = at(1, 2000, 0, 400, 0);
    end.born_ns = Some(end.clock.ns - 2_000_000_000);
    let l = shares(None, &end, &window(1000));
    assert!(close(l.rwnd_limited_share, 0.8), "{l:?}");
    assert!(close(l.observed_ms, 2000.0), "{l:?}");
    // Opening unknown: from the window's start.
    end.born_ns = None;
    let l = shares(None, &end, &window(1000));
    assert!(close(l.rwnd_limited_share, 0.4), "{l:?}");
    // No clocks (a kernel without them): nothing measured.
    let l = shares(None, &end, &Window::secs(4.0));
    assert_eq!(l, Limits::default());
}

fn traffic(s: &Socket, acked: u64, retransmits: u64) -> Traffic<'_> {
    Traffic {
        socket: s,
        start: None,
        closed: false,
        acked,
        segments: acked / 1448,
        retransmits,
        throughput_bps: acked as f64 * 8.0 / 4.0,
    }
}

fn limit_of(busy: u32, rwnd: u32, sndbuf: u32, t: impl Fn(&Socket) -> Traffic<'_>) -> Limits {
    let (start, end) = (at(1, 1000, 0, 0, 0), at(1, 2000, busy, rwnd, sndbuf));
    let mut l = shares(Some(&start), &end, &window(1000));
    dominant(&mut l, &t(&end));
    l
}

#[test]
fn the_dominant_limit_is_the_largest_share() {
    fn bulk(s: &Socket) -> Traffic<'_> {
        traffic(s, 10_000_000, 0)
    }
    let l = limit_of(100, 800, 0, bulk);
    assert_eq!(l.limit, Limit::ReceiverWindow);
    assert!(close(l.limit_share, 0.8), "{l:?}");
    assert_eq!(limit_of(100, 0, 700, bulk).limit, Limit::SendBuffer);
    let l = limit_of(900, 50, 0, |s| traffic(s, 10_000_000, 40));
    assert_eq!((l.limit, l.under_loss), (Limit::Congestion, true));
    let l = limit_of(100, 100, 0, bulk);
    assert_eq!(l.limit, Limit::Application);
    assert!(close(l.limit_share, 0.8), "{l:?}");
    // Bits acknowledged per second of sending time: 10 MB over 3.6 s busy or limited.
    let l = limit_of(100, 800, 0, bulk);
    assert!((l.sending_rate_bps - 80e6 / 3.6).abs() < 1.0, "{l:?}");
    // A few ticks of sending are too coarse to divide by: the window's average.
    let l = limit_of(5, 5, 0, bulk);
    assert!((l.sending_rate_bps - 20e6).abs() < 1.0, "{l:?}");
}

#[test]
fn too_little_traffic_says_unknown() {
    let l = limit_of(0, 1000, 0, |s| traffic(s, 60 * 1024, 0));
    assert_eq!((l.limit, l.limit_share), (Limit::Unknown, 0.0));
    // Enough segments (retransmitted, unacknowledged) is traffic enough.
    let l = limit_of(900, 0, 0, |s| Traffic {
        segments: 60,
        ..traffic(s, 0, 60)
    });
    assert_eq!(l.limit, Limit::Congestion);
}

#[test]
fn busy_at_the_applications_pace_is_the_application() {
    // In flight most of the time, but everything written was sent and the last delivery
    // sample was application-limited: a paced sender on a long path.
    fn paced(s: &Socket) -> Traffic<'_> {
        traffic(s, 2_000_000, 0)
    }
    let (start, mut end) = (at(1, 1000, 0, 0, 0), at(1, 2000, 900, 0, 0));
    end.delivery_rate_app_limited = true;
    let mut l = shares(Some(&start), &end, &window(1000));
    dominant(&mut l, &paced(&end));
    assert_eq!(l.limit, Limit::Application);
    assert!(close(l.limit_share, 1.0), "{l:?}");
    // Less than a congestion window waiting (one write being paced out): still the
    // application's pace.
    end.notsent_bytes = 14_000;
    let mut l = shares(Some(&start), &end, &window(1000));
    dominant(&mut l, &paced(&end));
    assert_eq!(l.limit, Limit::Application);
    // A backlog: the congestion window, not the application, held it.
    end.notsent_bytes = 100_000;
    let mut l = shares(Some(&start), &end, &window(1000));
    dominant(&mut l, &paced(&end));
    assert_eq!(l.limit, Limit::Congestion);
    // Application-limited at the window's start (a snapshot caught mid-write at its end).
    let mut l = shares(Some(&start), &end, &window(1000));
    let mut was_paced = start.clone();
    was_paced.delivery_rate_app_limited = true;
    dominant(
        &mut l,
        &Traffic {
            start: Some(&was_paced),
            ..paced(&end)
        },
    );
    assert_eq!(l.limit, Limit::Application);
    // At close every transfer ends application-limited: that says nothing.
    end.notsent_bytes = 0;
    let mut l = shares(Some(&start), &end, &window(1000));
    dominant(
        &mut l,
        &Traffic {
            closed: true,
            ..paced(&end)
        },
    );
    assert_eq!(l.limit, Limit::Congestion);
}

#[test]
fn a_window_limit_has_a_ceiling_and_the_window_the_path_needs() {
    let mut s = at(1, 2000, 0, 900, 0);
    s.srtt_us = 40_000;
    s.max_window = 65_536;
    s.snd_wnd = 32_768;
    let mut l = Limits {
        limit: Limit::ReceiverWindow,
        ..Limits::default()
    };
    ceiling(&mut l, &s, 52e6, false);
    // 64 KiB every 40 ms: 13.1 Mbit/s; 52 Mbit/s needs 260 kB in flight.
    assert_eq!(l.window_bytes, 65_536);
    assert!((l.ceiling_bps - 13_107_200.0).abs() < 1.0, "{l:?}");
    assert_eq!(l.needed_window_bytes, 260_000);
    assert!(close(l.path_rate_bps, 52e6));

    // The send buffer's ceiling counts the data it holds: 100 kB of data in 200 kB of
    // buffer memory, so a 64 KiB buffer holds 32 KiB of data.
    s.sndbuf = 65_536;
    s.wmem_queued = 200_000;
    s.unacked_bytes = 100_000;
    let mut l = Limits {
        limit: Limit::SendBuffer,
        ..Limits::default()
    };
    ceiling(&mut l, &s, 52e6, false);
    assert_eq!(l.window_bytes, 32_768);
    // Nothing queued: half the buffer.
    s.wmem_queued = 0;
    ceiling(&mut l, &s, 52e6, false);
    assert_eq!(l.window_bytes, 32_768);

    // Other limits have no window to lift.
    let mut l = Limits {
        limit: Limit::Congestion,
        ..Limits::default()
    };
    ceiling(&mut l, &s, 52e6, false);
    assert_eq!((l.window_bytes, l.ceiling_bps), (-1, -1.0));
}

#[test]
fn the_path_has_shown_the_most_its_connections_carried() {
    let a: IpAddr = "10.0.0.2".parse().expect("ip");
    let b: IpAddr = "10.0.0.3".parse().expect("ip");
    let rates = path_rates(&[(a, 10e6, 12e6), (a, 10e6, 11e6), (b, 5e6, 40e6)]);
    // Together 20 Mbit/s to a (more than either alone); b's one connection ran at 40
    // Mbit/s while it sent, 5 on average.
    assert!(close(rates[&a], 20e6) && close(rates[&b], 40e6));
}

/// Four window-limited connections to one host, and the receiving ends of two of them.
fn parallel() -> Vec<SocketRow> {
    let start: Vec<Socket> = (1..=4).map(|c| at(c, 1000, 0, 0, 0)).collect();
    let mut end: Vec<Socket> = (1..=4)
        .map(|c| {
            let mut s = at(c, 2000, 50, 900, 0);
            s.local.set_port(40000 + c as u16);
            s.bytes_acked = 6_553_600; // 64 KiB every 40 ms for 4 s
            s.srtt_us = 40_000;
            s.max_window = 65_536;
            s
        })
        .collect();
    let mut receiver = at(9, 2000, 0, 0, 0);
    (receiver.local, receiver.remote) = (end[0].remote, end[0].local);
    end.push(receiver);
    rows(&start, &end, &[], &[], &[], &window(1000))
}

#[test]
fn parallel_connections_show_what_the_path_carries_beyond_each_window() {
    let rows = parallel();
    let limited: Vec<&SocketRow> = rows
        .iter()
        .filter(|r| r.limits.limit == Limit::ReceiverWindow)
        .collect();
    assert_eq!(limited.len(), 4, "{rows:#?}");
    for r in &limited {
        let l = &r.limits;
        assert!((l.ceiling_bps - 13_107_200.0).abs() < 1.0, "{l:?}");
        // Four connections carried 52.4 Mbit/s together.
        assert!((l.path_rate_bps - 4.0 * 13_107_200.0).abs() < 1.0, "{l:?}");
        assert_eq!(l.needed_window_bytes, 262_144);
        // Only the first one's receiver is a socket of this host.
        assert_eq!(l.receiver_local, r.socket.local.port() == 40001, "{r:?}");
    }
    // The receiving end acknowledged nothing: too little to say.
    let receiver = rows
        .iter()
        .find(|r| r.socket.cookie == 9)
        .expect("receiver");
    assert_eq!(receiver.limits.limit, Limit::Unknown);
}

#[test]
fn a_connection_that_closed_ends_its_span_at_close() {
    let start = [at(1, 1000, 0, 0, 0)];
    let mut gone = at(1, 1500, 0, 450, 0);
    gone.bytes_acked = 10_000_000;
    let closed = [ClosedSocket {
        socket: gone,
        duration_ms: None,
        closed_from: "fin-wait-1",
    }];
    let rows = rows(&start, &[], &closed, &[], &[], &window(1000));
    let l = &rows[0].limits;
    assert_eq!(l.limit, Limit::ReceiverWindow);
    assert!(close(l.limit_share, 0.9), "{l:?}");
    assert!(close(l.observed_ms, 2000.0));
}

#[test]
fn a_paced_sender_held_by_a_full_window_is_limited_by_the_window() {
    // bbr paces: the kernel counted 56 % busy and 41 % waiting for the window, but the
    // 39 KiB window was below the congestion window (70 segments), with data waiting.
    fn bound(s: &mut Socket) {
        (s.snd_wnd, s.cwnd, s.unacked_bytes, s.notsent_bytes) = (39_552, 70, 39_552, 460_400);
    }
    let mut start = at(1, 1000, 0, 0, 0);
    let mut end = at(1, 2000, 560, 410, 0);
    bound(&mut start);
    bound(&mut end);
    let measure = |start: &Socket, end: &Socket| {
        let mut l = shares(Some(start), end, &window(1000));
        dominant(
            &mut l,
            &Traffic {
                start: Some(start),
                ..traffic(end, 10_000_000, 0)
            },
        );
        l
    };
    let l = measure(&start, &end);
    assert_eq!(l.limit, Limit::ReceiverWindow, "{l:?}");
    assert!(close(l.limit_share, 0.97), "{l:?}");
    // The kernel's own shares are kept as they are.
    assert!(close(l.busy_share, 0.56) && close(l.rwnd_limited_share, 0.41));

    // The congestion window below the peer's: busy is the congestion window's.
    let mut small_cwnd = end.clone();
    small_cwnd.cwnd = 20;
    assert_eq!(measure(&start, &small_cwnd).limit, Limit::Congestion);
    // Nothing waiting: not held by anything but what it had to send.
    let mut drained = end.clone();
    drained.notsent_bytes = 0;
    assert_eq!(measure(&start, &drained).limit, Limit::Congestion);
    // Not bound at the window's start: the window was the larger then.
    let mut free = start.clone();
    free.snd_wnd = 4_000_000;
    assert_eq!(measure(&free, &end).limit, Limit::Congestion);
    // Hardly ever waiting for the window: the busy time is the congestion window's.
    let mut rarely = end.clone();
    rarely.chrono.busy = 910;
    rarely.chrono.rwnd_limited = 60;
    assert_eq!(measure(&start, &rarely).limit, Limit::Congestion);
}

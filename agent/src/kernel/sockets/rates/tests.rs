//! Rows over a window: deltas, new and closed connections, interfaces.

use super::*;

fn sock(cookie: u64, cc: &str, segs: u32, retrans: u32, acked: u64) -> Socket {
    Socket {
        cookie,
        local: "10.0.0.1:40000".parse().expect("addr"),
        remote: "10.0.0.2:5201".parse().expect("addr"),
        state: "established",
        ifindex: 3,
        cc: cc.into(),
        ca_state: "open",
        srtt_us: 1000,
        rttvar_us: 100,
        min_rtt_us: 900,
        cwnd: 10,
        ssthresh: 7,
        total_retrans: retrans,
        lost: 0,
        retrans_out: 0,
        segs_out: segs,
        data_segs_out: segs,
        mss: 1448,
        pmtu: 1500,
        reordering: 3,
        delivery_rate_bps: 0,
        bytes_acked: acked,
        bytes_received: 0,
        bytes_sent: acked,
        bytes_retrans: 0,
        mtu_probing: false,
        ..Socket::sample(cookie)
    }
}

#[test]
fn rates_are_window_deltas() {
    let start = [sock(1, "cubic", 100, 2, 1000)];
    let end = [sock(1, "cubic", 1100, 52, 1_001_000)];
    let rows = rows(&start, &end, &[], &[], &[], &Window::secs(2.0));
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].data_segs_sent, 1000);
    assert_eq!(rows[0].retransmits, 50);
    assert!((rows[0].retrans_ratio - 0.05).abs() < 1e-9);
    assert!((rows[0].retransmits_per_s - 25.0).abs() < 1e-9);
    assert!((rows[0].throughput_bps - 4_000_000.0).abs() < 1e-6);
}

#[test]
fn new_and_closed_connections_count_from_zero() {
    let closed = [ClosedSocket {
        socket: sock(7, "bbr", 10, 1, 5000),
        duration_ms: Some(30),
        closed_from: "last-ack",
    }];
    let end = [sock(8, "cubic", 20, 0, 100)];
    let rows = rows(&[], &end, &closed, &[], &[], &Window::secs(1.0));
    assert_eq!(rows.len(), 2);
    let c = rows.iter().find(|r| r.closed).expect("closed row");
    assert_eq!(
        (c.data_segs_sent, c.retransmits, c.duration_ms),
        (10, 1, Some(30))
    );
    let agg = by_cc(&rows);
    assert_eq!(agg.len(), 2);
    assert_eq!(agg.iter().map(|a| a.sockets).sum::<usize>(), 2);
}

/// A connection that closes between the window's last snapshot and the drain of close
/// events is in both: it counts once, with its figures at close.
#[test]
fn a_connection_in_the_snapshot_and_closed_counts_once() {
    let closing = sock(7, "reno", 10, 1, 5000);
    let closed = [ClosedSocket {
        socket: sock(7, "reno", 12, 2, 6000),
        duration_ms: Some(900),
        closed_from: "fin-wait-1",
    }];
    let end = [closing, sock(8, "cubic", 20, 0, 100)];
    let live = without_closed(&end, &closed);
    assert_eq!(live.iter().map(|s| s.cookie).collect::<Vec<_>>(), [8]);
    let rows = rows(&[], &live, &closed, &[], &[], &Window::secs(1.0));
    let sevens: Vec<_> = rows.iter().filter(|r| r.socket.cookie == 7).collect();
    assert_eq!(sevens.len(), 1);
    assert!(sevens[0].closed);
    assert_eq!(sevens[0].data_segs_sent, 12);
}

#[test]
fn a_stalled_connection_keeps_its_interface() {
    let start = [sock(1, "cubic", 10, 1, 100)];
    let mut stalled = sock(1, "cubic", 10, 9, 100);
    stalled.ifindex = 0; // route cache reset by the retransmission timer
    let rows = rows(&start, &[stalled], &[], &[], &[], &Window::secs(1.0));
    assert_eq!(rows[0].socket.ifindex, 3);

    let mut unseen = sock(2, "cubic", 10, 9, 100);
    unseen.ifindex = 0;
    let retrans = [RetransStats {
        local: unseen.local,
        remote: unseen.remote,
        events: 9,
        segments: 9,
        bytes: 9 * 1448,
        full_segments: 9,
        small_segments: 0,
        ifindex: 5,
        mss: 1448,
    }];
    let rows = super::rows(&[], &[unseen], &[], &[], &retrans, &Window::secs(1.0));
    assert_eq!(rows[0].socket.ifindex, 5);
}

#[test]
fn no_data_means_zero_ratio() {
    let s = [sock(1, "bbr", 0, 0, 0)];
    let rows = rows(&s, &s, &[], &[], &[], &Window::secs(1.0));
    assert_eq!(rows[0].retrans_ratio, 0.0);
}

#[test]
fn dsacks_and_reordering_are_window_deltas() {
    let mut a = sock(1, "cubic", 100, 2, 1000);
    (a.dsack_dups, a.reord_seen) = (5, 1);
    let mut b = sock(1, "cubic", 1100, 52, 1_001_000);
    (b.dsack_dups, b.reord_seen, b.reordering) = (45, 9, 30);
    let rows = rows(&[a], &[b], &[], &[], &[], &Window::secs(2.0));
    assert_eq!((rows[0].dsack_dups, rows[0].reord_seen), (40, 8));
    assert_eq!(rows[0].socket.reordering, 30);
}

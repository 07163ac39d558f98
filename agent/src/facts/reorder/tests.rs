//! The interface's reordering figures from its connections' DSACKs and reordering events.

use super::{fill, local, Local, DEFAULT_REORDERING};
use crate::facts::{FlowFacts, TrafficFacts};

fn flow(retransmits: i64, spurious: i64, reord_seen: i64, reordering: i64) -> FlowFacts {
    FlowFacts {
        data_segs_sent: 10_000,
        retransmits,
        spurious_retransmits: spurious,
        reord_seen,
        reordering,
        ..FlowFacts::default()
    }
}

fn traffic(segments: i64, retransmits: i64, l: &Local) -> TrafficFacts {
    let mut t = TrafficFacts {
        tcp_segments: segments,
        tcp_retransmits: retransmits,
        ..TrafficFacts::default()
    };
    fill(&mut t, l);
    t
}

#[test]
fn spurious_retransmissions_are_told_from_loss() {
    // One connection whose retransmissions the peer reported as needless, one lossy.
    let flows = [flow(300, 290, 12, 40), flow(100, 0, 0, 3)];
    let l = local(&flows, true);
    assert_eq!(
        l,
        Local {
            retransmits: 400,
            spurious: 290,
            reord_seen: 12,
            connections: 1,
            max_reordering: 40,
        }
    );
    let t = traffic(20_000, 400, &l);
    assert_eq!(t.tcp_spurious_retransmits, 290);
    assert_eq!(t.tcp_spurious_percent, 72.5);
    assert!((t.tcp_spurious_ratio - 0.0145).abs() < 1e-9);
    assert_eq!(
        (
            t.tcp_reord_seen,
            t.tcp_reordering_connections,
            t.tcp_reordering_max
        ),
        (12, 1, 40)
    );
}

#[test]
fn a_lossy_or_quiet_interface_shows_no_reordering() {
    // Loss alone: no DSACK, no reordering event, the metric at its default.
    let l = local(&[flow(500, 0, 0, 3)], true);
    let t = traffic(10_000, 500, &l);
    assert_eq!(t.tcp_spurious_retransmits, 0);
    assert_eq!(t.tcp_spurious_percent, 0.0);
    assert_eq!(t.tcp_reordering_connections, 0);
    assert_eq!(t.tcp_reordering_max, DEFAULT_REORDERING);
    // No retransmissions: the share is unknown, not 0 %.
    let t = traffic(10_000, 0, &local(&[], true));
    assert_eq!(t.tcp_spurious_percent, -1.0);
    assert_eq!(t.tcp_reordering_max, DEFAULT_REORDERING);
}

#[test]
fn retransmissions_not_counted_on_the_interface_are_not_spurious_there() {
    // The interface did not carry what the connection sent: its retransmissions (and so
    // their DSACKs) are not among the interface's, but its reordering is still seen.
    let l = local(&[flow(300, 290, 12, 40)], false);
    assert_eq!((l.retransmits, l.spurious, l.reord_seen), (0, 0, 12));
    // Never more spurious retransmissions than retransmissions.
    let t = traffic(1_000, 100, &local(&[flow(300, 290, 0, 3)], true));
    assert_eq!(t.tcp_spurious_retransmits, 100);
    assert_eq!(t.tcp_spurious_percent, 100.0);
}

#[test]
fn a_connection_s_needless_retransmissions_are_not_its_loss() {
    use crate::facts::flows::flow_facts;
    use crate::facts::Host;
    use crate::kernel::sockets::limits::Limits;
    use crate::kernel::sockets::rates::SocketRow;
    use crate::kernel::sockets::Socket;

    let mut socket = Socket::sample(1);
    (socket.srtt_us, socket.mss, socket.reordering) = (50_000, 1448, 30);
    let mut row = SocketRow::sample(socket, Limits::default());
    (row.data_segs_sent, row.retransmits, row.retrans_ratio) = (10_000, 300, 0.03);
    (row.dsack_dups, row.reord_seen) = (200, 9);
    let ifindex = row.socket.ifindex;
    let f = &flow_facts(&[row.clone()], ifindex, &Host::default())[0];
    assert_eq!(
        (f.spurious_retransmits, f.reord_seen, f.reordering),
        (200, 9, 30)
    );
    assert!((f.spurious_ratio - 0.02).abs() < 1e-9);
    // Mathis at the 1 % lost, not the 3 % retransmitted: 1448 B · 8 / 50 ms · 1.22 / 0.1.
    assert!(
        (f.loss_based_limit_bps / 1e6 - 2.837).abs() < 0.01,
        "{}",
        f.loss_based_limit_bps
    );
    // More DSACKs than retransmissions (a duplicating path) are at most the retransmissions.
    row.dsack_dups = 900;
    let f = &flow_facts(&[row], ifindex, &Host::default())[0];
    assert_eq!(f.spurious_retransmits, 300);
    assert_eq!(f.loss_based_limit_bps, -1.0);
}

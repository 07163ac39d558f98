//! What limits a connection (issue 30): the window and buffer findings on crafted facts, each
//! with its healthy twins, and the loss findings counting only congestion-limited connections.

use super::{healthy, ids};
use crate::facts::Facts;
use crate::rules::finding::Finding;
use crate::rules::{evaluate, RuleSet};

/// One of four parallel connections to 10.0.0.2 over 40 ms, each held by a 64 KiB receive
/// window (13.1 Mbit/s) while the four carried 52.4 Mbit/s: 256 KiB needed, a 512 KiB
/// tcp_rmem maximum at half advertised.
fn window_limited(f: &mut Facts) {
    f.host.tcp_adv_win_share = 0.5;
    (
        f.host.tcp_rmem_min,
        f.host.tcp_rmem_default,
        f.host.tcp_rmem_max,
    ) = (4096, 131_072, 6_291_456);
    (
        f.host.tcp_wmem_min,
        f.host.tcp_wmem_default,
        f.host.tcp_wmem_max,
    ) = (4096, 16_384, 4_194_304);
    let flow = &mut f.flows[0];
    flow.srtt_ms = 40.0;
    flow.throughput_bps = 13_107_200.0;
    flow.limit = "receiver_window".into();
    flow.limit_share = 0.9;
    flow.busy_share = 0.05;
    flow.rwnd_limited_share = 0.9;
    flow.idle_share = 0.05;
    flow.window_bytes = 65_536;
    flow.ceiling_bps = 13_107_200.0;
    flow.path_rate_bps = 52_428_800.0;
    flow.needed_window_bytes = 262_144;
    flow.needed_buffer_bytes = 524_288;
}

/// The same, held by its own 64 KiB send buffer (32 KiB of data).
fn buffer_limited(f: &mut Facts) {
    window_limited(f);
    let flow = &mut f.flows[0];
    flow.limit = "send_buffer".into();
    flow.rwnd_limited_share = 0.0;
    flow.sndbuf_limited_share = 0.9;
    flow.window_bytes = 32_768;
    flow.ceiling_bps = 6_553_600.0;
    flow.needed_buffer_bytes = 524_288;
}

fn finding(facts: &Facts, id: &str) -> Option<Finding> {
    let rules = RuleSet::builtin().expect("rules");
    evaluate(&rules, &facts.to_json())
        .into_iter()
        .find(|f| f.id == id)
}

fn quiet(change: impl FnOnce(&mut Facts)) {
    let mut facts = healthy();
    change(&mut facts);
    assert_eq!(ids(&facts), Vec::<String>::new());
}

#[test]
fn a_receive_window_below_what_the_path_carries_names_the_receivers_tcp_rmem() {
    let mut facts = healthy();
    window_limited(&mut facts);
    let f = finding(&facts, "tcp.receive_window_limited").expect("the window finding");
    assert_eq!(ids(&facts), vec!["tcp.receive_window_limited".to_owned()]);
    assert!(f.summary.contains("90.0 % of the time"), "{}", f.summary);
    assert!(
        f.summary.contains("64.0 KiB window at 40.0 ms RTT"),
        "{}",
        f.summary
    );
    assert!(f.summary.contains("at most 13.1 Mbit/s"), "{}", f.summary);
    assert!(f.summary.contains("carried 52.4 Mbit/s"), "{}", f.summary);
    assert!(f.summary.contains("256 KiB window"), "{}", f.summary);
    assert!(
        f.fix.starts_with(
            "sysctl -w net.ipv4.tcp_rmem=\"4096 131072 524288\"   # on the receiver, 10.0.0.2;"
        ),
        "{}",
        f.fix
    );
    assert!(f.fix.contains("SO_RCVBUF 262144"), "{}", f.fix);
    let ev = |k: &str| {
        f.evidence
            .get(k)
            .map(ToString::to_string)
            .unwrap_or_default()
    };
    assert_eq!(ev("ceiling_mbps"), "13.1");
    assert_eq!(ev("srtt_ms"), "40.0");
    assert_eq!(ev("window_kib"), "64.0");
    assert_eq!(ev("limit_share_percent"), "90.0");
    assert_eq!(ev("needed_window_kib"), "256.0");
    assert_eq!(ev("needed_tcp_rmem_max"), "524288");
    assert_eq!(ev("receiver"), "\"10.0.0.2\"");

    // The receiver a socket of this host: the fix is this host's, with its own numbers.
    facts.flows[0].receiver_local = true;
    facts.host.tcp_rmem_default = 87_380;
    let f = finding(&facts, "tcp.receive_window_limited").expect("finding");
    assert!(
        f.fix.starts_with(
            "sysctl -w net.ipv4.tcp_rmem=\"4096 87380 524288\"   # on the receiver, this host;"
        ),
        "{}",
        f.fix
    );
}

#[test]
fn window_twins_stay_quiet() {
    // The application sets the pace (iperf3 -b): no window to blame.
    quiet(|f| {
        window_limited(f);
        f.flows[0].limit = "application".into();
        f.flows[0].idle_share = 0.9;
        f.flows[0].rwnd_limited_share = 0.05;
    });
    // Alone on its path: the path showed no more than the window's ceiling.
    quiet(|f| {
        window_limited(f);
        f.flows[0].path_rate_bps = 13_500_000.0;
    });
    // A window that fits the path (default buffers): its ceiling is above what it carried.
    quiet(|f| {
        window_limited(f);
        f.flows[0].window_bytes = 4_194_304;
        f.flows[0].ceiling_bps = 838_860_800.0;
    });
    // Limited a third of the time only.
    quiet(|f| {
        window_limited(f);
        f.flows[0].limit_share = 0.4;
    });
}

#[test]
fn a_send_buffer_below_what_the_path_carries_names_this_hosts_tcp_wmem() {
    let mut facts = healthy();
    buffer_limited(&mut facts);
    assert_eq!(ids(&facts), vec!["tcp.send_buffer_limited".to_owned()]);
    let f = finding(&facts, "tcp.send_buffer_limited").expect("the buffer finding");
    assert!(f.summary.contains("32.0 KiB of data"), "{}", f.summary);
    assert!(f.summary.contains("at most 6.55 Mbit/s"), "{}", f.summary);
    assert!(
        f.fix.starts_with(
            "sysctl -w net.ipv4.tcp_wmem=\"4096 16384 524288\"   # on this host, the sender;"
        ),
        "{}",
        f.fix
    );
    assert!(f.fix.contains("SO_SNDBUF 262144"), "{}", f.fix);
    quiet(|f| {
        buffer_limited(f);
        f.flows[0].path_rate_bps = 7_000_000.0; // alone on its path
    });
    quiet(|f| {
        buffer_limited(f);
        f.flows[0].limit = "congestion".into(); // the congestion window, not the buffer
    });
}

#[test]
fn loss_findings_count_only_congestion_limited_connections() {
    let lossy_cubic = |f: &mut Facts| {
        f.flows[0].cc = "cubic".into();
        f.flows[0].retransmits = 150;
        f.flows[0].retrans_ratio = 0.03;
    };
    let mut facts = healthy();
    lossy_cubic(&mut facts);
    let f = finding(&facts, "tcp.cubic_on_lossy_path").expect("cubic finding");
    assert!(
        f.summary
            .contains("limited by its congestion window 90.0 % of the time"),
        "{}",
        f.summary
    );
    // The same loss on a connection the application paces: bbr would not make it faster.
    quiet(|f| {
        lossy_cubic(f);
        f.flows[0].limit = "application".into();
    });
    quiet(|f| {
        lossy_cubic(f);
        f.flows[0].limit = "receiver_window".into();
    });

    // A local connection retransmitting 5 % of 5000 segments, the interface's own ratio low.
    let lossy = |f: &mut Facts| {
        f.flows[0].retransmits = 250;
        f.flows[0].retrans_ratio = 0.05;
    };
    let mut facts = healthy();
    lossy(&mut facts);
    let f = finding(&facts, "tcp.high_retransmits").expect("retransmission finding");
    assert!(
        f.summary
            .contains("1 were limited by their congestion window"),
        "{}",
        f.summary
    );
    assert!(
        f.summary.contains(", 0 by their application"),
        "{}",
        f.summary
    );
    quiet(|f| {
        lossy(f);
        f.flows[0].limit = "application".into();
    });
    // The interface's own ratio still counts every segment it saw.
    let mut facts = healthy();
    lossy(&mut facts);
    facts.flows[0].limit = "application".into();
    facts.traffic.tcp_retransmits = 500;
    facts.traffic.tcp_retrans_ratio = 0.05;
    let f = finding(&facts, "tcp.high_retransmits").expect("interface ratio finding");
    assert!(
        f.summary
            .contains("0 were limited by their congestion window (the loss slows them), 1 by"),
        "{}",
        f.summary
    );
}

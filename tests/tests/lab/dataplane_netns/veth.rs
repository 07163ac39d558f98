//! veth counters agree with the kernel's; the TCP flow is reported as sent.

use std::time::Duration;

use anyhow::{ensure, Result};
use netdoctor_lab::netdoctor::Watch;
use netdoctor_lab::{lab_guard, traffic, Iperf3Opts, Iperf3Server, PairTopology, PingOpts};

use crate::dataplane_netns::helpers::{assert_close, ip, iperf3_local_port, one_flow};

#[test]
fn veth_counters_agree_with_ip_link_and_tcp_flow_is_reported() -> Result<()> {
    lab_guard!("ping", "iperf3");
    let pair = PairTopology::new(1500)?;
    let ifname = PairTopology::IFNAME;
    let mtu = u64::from(pair.a.mtu(ifname)?);
    let peer_mtu = u64::from(pair.b.mtu(ifname)?);
    let _server = Iperf3Server::start(&pair.b, 5201)?;

    // `--local-tcp packets`: this test checks the flow record of a local connection, which
    // the default counts on the local path instead (tests/tests/lab/local_tcp.rs).
    let mut watch = Watch::start(
        &pair.a,
        &[
            "flows",
            ifname,
            "--duration",
            "6s",
            "--json",
            "--local-tcp",
            "packets",
        ],
    )?;
    // netdoctor's window [attach, attach + 6 s] encloses [before, after]:
    // the counts may differ only by what crossed the link at the edges.
    let before = pair.a.interface_stats(ifname)?;
    let ping_opts = PingOpts {
        count: 20,
        interval_secs: 0.02,
        ..PingOpts::default()
    };
    let ping = traffic::ping(&pair.a, PairTopology::B_IP, &ping_opts)?;
    let iperf = traffic::iperf3_client(&pair.a, &Iperf3Opts::new(PairTopology::B_IP))?;
    let after = pair.a.interface_stats(ifname)?;
    ensure!(
        watch.process_mut().is_running(),
        "netdoctor's 6 s window ended before the traffic did (machine overloaded?); \
         the comparison with `ip -s link` would be meaningless"
    );
    let report = watch.wait_report(Duration::from_secs(30))?;
    let kernel = after.since(&before);
    println!(
        "ip -s link delta: rx {} pkts / {} B, tx {} pkts / {} B",
        kernel.rx_packets, kernel.rx_bytes, kernel.tx_packets, kernel.tx_bytes
    );
    println!(
        "netdoctor:        in {} pkts / {} B, out {} pkts / {} B ({} segments, {} GSO skbs)",
        report.ingress.packets,
        report.ingress.bytes,
        report.egress.packets,
        report.egress.bytes,
        report.egress.segments,
        report.egress.gso_packets
    );

    assert_eq!(report.interface_str("name")?, ifname);
    assert_eq!(report.interface_str("kind")?, "veth");
    assert_eq!(report.interface_str("link")?, "ether");
    assert_eq!(report.interface_u64("mtu")?, mtu);
    assert_eq!(
        (report.hook("ingress")?, report.hook("egress")?),
        ("tc", "tc")
    );
    assert!(
        (6.0..8.0).contains(&report.duration_s),
        "duration_s {} for --duration 6s",
        report.duration_s
    );

    // tc sees every skb the veth driver counts (GSO super-packets once on
    // both sides) with the same length (L2 header included). Tolerance: 1 %
    // plus 10 frames of the largest size for ARP / IPv6 ND / MLD frames
    // crossing in the edges of netdoctor's window outside [before, after].
    let frame = mtu + 14;
    assert_close(
        "ingress packets",
        report.ingress.packets,
        kernel.rx_packets,
        1,
        10,
    );
    assert_close(
        "egress packets",
        report.egress.packets,
        kernel.tx_packets,
        1,
        10,
    );
    assert_close(
        "ingress bytes",
        report.ingress.bytes,
        kernel.rx_bytes,
        1,
        10 * frame,
    );
    assert_close(
        "egress bytes",
        report.egress.bytes,
        kernel.tx_bytes,
        1,
        10 * frame,
    );
    assert!(
        report.egress.segments > report.egress.packets && report.egress.gso_packets > 0,
        "TCP over veth must leave as GSO super-packets: {:?}",
        report.egress
    );
    assert_eq!(report.egress.df_over_mtu, 0, "{:?}", report.egress);

    // The ping: 20 echo requests out, 20 replies in, as ping counted them.
    let a = ip(PairTopology::A_IP)?;
    let b = ip(PairTopology::B_IP)?;
    let requests = one_flow(&report, "ICMP echo a -> b", |f| {
        f.direction == "egress" && f.protocol == 1 && f.src == a && f.dst == b
    })?;
    assert_eq!(requests.packets, u64::from(ping.transmitted), "{ping:?}");
    assert_eq!(requests.src_port, 8 << 8, "ICMP type 8 code 0 in src_port");
    let replies = one_flow(&report, "ICMP echo reply b -> a", |f| {
        f.direction == "ingress" && f.protocol == 1 && f.src == b && f.dst == a
    })?;
    assert_eq!(replies.packets, u64::from(ping.received), "{ping:?}");
    assert_eq!(replies.dst_port, requests.dst_port, "echo identifier");

    // The iperf3 data connection, identified by the port iperf3 reports.
    let port = iperf3_local_port(&iperf)?;
    let data = one_flow(&report, "iperf3 data a -> b", |f| {
        f.direction == "egress"
            && f.protocol == 6
            && (f.src, f.src_port, f.dst, f.dst_port) == (a, port, b, 5201)
    })?;
    println!(
        "data flow: {}; iperf3 sent {} B, Retr {:?}",
        data.describe(),
        iperf.sent_bytes,
        iperf.retransmits
    );
    assert!(
        data.segments > data.packets,
        "GSO: segments must exceed skbs: {}",
        data.describe()
    );
    assert!(
        data.bytes >= iperf.sent_bytes,
        "the flow carried {} B on the wire but iperf3 sent {} B of payload",
        data.bytes,
        iperf.sent_bytes
    );
    // The kernel advertises MSS = MTU - 40 (IPv4 + TCP headers) in its SYN.
    assert_eq!(data.syn_mss, Some(mtu - 40), "{}", data.describe());
    // Full-sized segments are exactly one MTU long; none may be longer.
    assert!(
        data.max_segment <= mtu,
        "a segment of {} B on a {mtu} B link: {}",
        data.max_segment,
        data.describe()
    );
    assert_eq!(data.max_segment, mtu, "bulk TCP fills the MTU");
    // No loss on a veth pair: the sender resends only what it dropped itself
    // (iperf3's Retr, e.g. a full backlog under CPU contention); allow 0.1 %
    // of the segments on top.
    let retr = iperf.retransmits.unwrap_or(0);
    assert!(
        data.retransmits <= retr + data.segments / 1000,
        "{} retransmits seen, iperf3 reports {retr}: {}",
        data.retransmits,
        data.describe()
    );
    let acks = one_flow(&report, "iperf3 acks b -> a", |f| {
        f.direction == "ingress"
            && f.protocol == 6
            && (f.src, f.src_port, f.dst, f.dst_port) == (b, 5201, a, port)
    })?;
    assert_eq!(
        acks.syn_mss,
        Some(peer_mtu - 40),
        "SYN-ACK MSS: {}",
        acks.describe()
    );
    assert!(
        data.first_seen_ms <= data.last_seen_ms,
        "{}",
        data.describe()
    );
    Ok(())
}

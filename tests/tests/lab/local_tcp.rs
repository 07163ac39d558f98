//! The data plane's local path (`ebpf/include/local_tcp.h`) end to end: TCP segments of the
//! watching host's own connections are counted per interface, not per flow, and each
//! connection is described by socket telemetry instead.
//!
//! ```text
//! a 10.201.0.1 eth0 ══ eth0 10.201.0.2 b   (netdoctor flows on b's eth0; iperf3 a → b)
//! ```
//!
//! b receives the data and sends the ACKs. With forwarding off in b both directions take
//! the local path; with forwarding on (a gateway could DNAT what is addressed to it) the
//! received data keeps its flow record, and `--local-tcp packets` gives every segment its
//! flow record. Each case's counts are checked against what iperf3 and the other case
//! measured, so that a path that counts nothing, or counts twice, fails.
//!
//! Needs root, BPF, iperf3; skips elsewhere, fails under CI=true.
//! Build the binary first: `cargo build -p netdoctor`.

use std::time::Duration;

use anyhow::{ensure, Context, Result};
use netdoctor_lab::netdoctor::{Report, Watch};
use netdoctor_lab::{
    lab_guard, traffic, Direction, Iperf3Opts, Iperf3Report, Iperf3Server, PacketLoss, PairTopology,
};

/// Segment payload on a 1500-byte link with TCP timestamps.
const MSS: u64 = 1448;

struct Run {
    report: Report,
    iperf: Iperf3Report,
    port: u16,
}

/// iperf3 a → b for 3 s while `netdoctor flows` watches b's eth0 with `extra` flags, b
/// forwarding or not; `loss` percent of a's packets dropped on b's ingress.
fn run(forward: bool, extra: &[&str], loss: u8) -> Result<Run> {
    let pair = PairTopology::new(1500)?;
    let ifname = PairTopology::IFNAME;
    pair.b
        .sysctl("net.ipv4.ip_forward", if forward { "1" } else { "0" })?;
    let _server = Iperf3Server::start(&pair.b, 5201)?;
    let _loss = (loss > 0)
        .then(|| PacketLoss::add(&pair.b, ifname, Direction::Ingress, loss))
        .transpose()?;
    let mut args = vec![
        "flows",
        ifname,
        "--duration",
        "7s",
        "--json",
        "--top",
        "1000",
    ];
    args.extend_from_slice(extra);
    let mut watch = Watch::start(&pair.b, &args)?;
    let mut opts = Iperf3Opts::new(PairTopology::B_IP);
    opts.duration_secs = 3;
    opts.congestion = Some("cubic".into());
    let iperf = traffic::iperf3_client(&pair.a, &opts)?;
    ensure!(
        watch.process_mut().is_running(),
        "netdoctor's window ended before the traffic did (machine overloaded?)"
    );
    let report = watch.wait_report(Duration::from_secs(30))?;
    let port = iperf
        .json
        .pointer("/start/connected/0/local_port")
        .and_then(serde_json::Value::as_u64)
        .and_then(|p| u16::try_from(p).ok())
        .context("iperf3 reports no local port")?;
    println!(
        "forward {forward} {extra:?} loss {loss} %: iperf3 {} B, {:?} retransmits; ingress {:?}; egress {:?}",
        iperf.received_bytes, iperf.retransmits, report.ingress, report.egress
    );
    Ok(Run {
        report,
        iperf,
        port,
    })
}

/// The data connection's flow record on b (received: iperf3's source port is a's).
fn data_flow_packets(run: &Run) -> u64 {
    run.report
        .flows
        .iter()
        .filter(|f| f.protocol == 6 && f.direction == "ingress" && f.src_port == run.port)
        .map(|f| f.packets)
        .sum()
}

/// The connection as socket telemetry saw it on b.
fn socket_bytes_received(run: &Run) -> Result<u64> {
    let sockets = run.report.json["sockets"]
        .as_array()
        .context("no sockets array")?;
    let s = sockets
        .iter()
        .find(|s| {
            s["remote"]
                .as_str()
                .is_some_and(|r| r.ends_with(&format!(":{}", run.port)))
        })
        .with_context(|| format!("no socket of port {} in {sockets:?}", run.port))?;
    s["bytes_received"].as_u64().context("bytes_received")
}

#[test]
fn local_connections_are_counted_per_interface_and_described_by_their_sockets() -> Result<()> {
    lab_guard!("iperf3");
    let local = run(false, &[], 0)?;
    let r = &local.report;
    assert_eq!(r.hook("local_tcp")?, "sockets");
    // Received data: every segment on the local path, as many as iperf3's bytes make.
    let expected = local.iperf.received_bytes / MSS;
    let got = r.ingress.local_tcp_segments;
    assert!(
        got >= expected && got <= expected + expected / 20 + 100,
        "received segments on the local path {got}, iperf3's bytes make {expected}"
    );
    assert!(r.ingress.local_tcp_segments <= r.ingress.segments);
    assert_eq!(r.ingress.local_tcp_max_segment, 1500, "{:?}", r.ingress);
    // Sent ACKs: the socket's own segments.
    assert!(
        r.egress.local_tcp_segments * 10 >= r.egress.segments * 9,
        "{:?}",
        r.egress
    );
    // No flow record beyond the handshake's SYN; the socket has the connection.
    let packets = data_flow_packets(&local);
    assert!(
        packets <= 2,
        "the data connection's flow record counted {packets} packets"
    );
    let bytes = socket_bytes_received(&local)?;
    assert!(
        bytes >= local.iperf.received_bytes,
        "socket {bytes} B, iperf3 {} B",
        local.iperf.received_bytes
    );
    // No loss added: what the sender retransmitted after veth's backlog overflowed, and
    // segments reordered between the two CPUs' backlogs, far below 1 %.
    assert!(
        r.ingress.local_tcp_retransmits * 100 < r.ingress.local_tcp_segments,
        "{:?}",
        r.ingress
    );

    // The twins: a forwarding host keeps received data in the flow table; `packets` keeps
    // every segment there. Each sees the data connection's segments as the local path did.
    let forwarding = run(true, &[], 0)?;
    let f = &forwarding.report;
    assert_eq!(f.ingress.local_tcp_segments, 0, "{:?}", f.ingress);
    assert!(
        f.egress.local_tcp_segments > 0,
        "ACKs still have their socket"
    );
    let received = data_flow_packets(&forwarding);
    assert!(
        received * 10 >= f.ingress.packets * 9,
        "{received} of {:?}",
        f.ingress
    );

    let packets = run(false, &["--local-tcp", "packets"], 0)?;
    let p = &packets.report;
    assert_eq!(p.hook("local_tcp")?, "packets");
    assert_eq!(
        p.ingress.local_tcp_segments + p.egress.local_tcp_segments,
        0
    );
    assert!(data_flow_packets(&packets) * 10 >= p.ingress.packets * 9);
    Ok(())
}

/// Loss on b's ingress: the local path's passive count sees the retransmissions iperf3's
/// sender made (some lost again before b's hook are not seen; collisions may miss some).
#[test]
fn local_path_counts_received_retransmissions() -> Result<()> {
    lab_guard!("iperf3", "nft");
    let lossy = run(false, &[], 2)?;
    let sent = lossy
        .iperf
        .retransmits
        .context("iperf3 reports no retransmits")?;
    let seen = lossy.report.ingress.local_tcp_retransmits;
    ensure!(sent >= 20, "2 % loss made only {sent} retransmissions");
    assert!(
        seen * 2 >= sent && seen <= sent + sent / 2 + 10,
        "local path counted {seen} retransmitted segments, iperf3 sent {sent}"
    );
    Ok(())
}

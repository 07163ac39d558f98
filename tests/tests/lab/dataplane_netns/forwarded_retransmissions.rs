//! Retransmissions of TCP a router only forwards.

use anyhow::Result;
use netdoctor_lab::netdoctor::{Flow, Watch};
use netdoctor_lab::{
    lab_guard, stats, traffic, Direction, Iperf3Opts, Iperf3Report, Iperf3Server, LineConfig,
    LineTopology, PacketLoss,
};

use crate::dataplane_netns::helpers::{ip, iperf3_local_port, one_flow};

#[test]
fn forwarded_tcp_retransmissions_follow_loss() -> Result<()> {
    lab_guard!("iperf3", "nft");
    let line = LineTopology::new(&LineConfig::default())?;
    // Segments the router receives out of order count as seen before too
    // (reordered, not resent). This test is about resent data, so the
    // router's receive is kept in order: one CPU processes the client's skbs.
    line.router
        .steer_receive_to_cpu(LineTopology::ROUTER_CLIENT_IF, 0)?;
    let _server = Iperf3Server::start(&line.server, 5201)?;
    let watch = Watch::start(
        &line.router,
        &[
            "flows",
            LineTopology::ROUTER_CLIENT_IF,
            "--duration",
            "120s",
            "--json",
        ],
    )?;
    let mut opts = Iperf3Opts::new(LineTopology::SERVER_IP);
    opts.congestion = Some("cubic".into());
    let server_before = stats::net_counters(&line.server)?;
    let clean = traffic::iperf3_client(&line.client, &opts)?;
    let server_after = stats::net_counters(&line.server)?;
    let loss = PacketLoss::add(&line.server, LineTopology::SERVER_IF, Direction::Ingress, 5)?;
    let lossy = traffic::iperf3_client(&line.client, &opts)?;
    let dropped = loss.dropped_packets()?;
    drop(loss);
    let report = watch.interrupt()?;

    let client = ip(LineTopology::CLIENT_IP)?;
    let server = ip(LineTopology::SERVER_IP)?;
    let flow_of = |r: &Iperf3Report, what: &str| -> Result<Flow> {
        let port = iperf3_local_port(r)?;
        one_flow(&report, what, |f| {
            f.direction == "ingress"
                && f.protocol == 6
                && (f.src, f.src_port, f.dst, f.dst_port) == (client, port, server, 5201)
        })
        .cloned()
    };
    let clean_flow = flow_of(&clean, "forwarded upload without loss")?;
    let lossy_flow = flow_of(&lossy, "forwarded upload with 5 % loss")?;
    let iperf_retr = |r: &Iperf3Report| r.retransmits.unwrap_or(0);
    println!(
        "0 % loss: netdoctor {} retransmitted of {} segments ({:.4} %); iperf3 Retr {}; {:.0} Mbit/s",
        clean_flow.retransmits,
        clean_flow.segments,
        100.0 * clean_flow.retransmit_ratio(),
        iperf_retr(&clean),
        clean.received_bits_per_second / 1e6
    );
    println!(
        "5 % loss: netdoctor {} retransmitted of {} segments ({:.2} %); iperf3 Retr {}; nft dropped {dropped} skbs; {:.0} Mbit/s",
        lossy_flow.retransmits,
        lossy_flow.segments,
        100.0 * lossy_flow.retransmit_ratio(),
        iperf_retr(&lossy),
        lossy.received_bits_per_second / 1e6
    );
    let ofo = |k: &str| {
        server_after
            .get(k)
            .copied()
            .unwrap_or(0)
            .saturating_sub(server_before.get(k).copied().unwrap_or(0))
    };
    println!(
        "0 % loss, server side: TcpExtTCPOFOQueue +{} (segments that arrived out of order), \
         TcpInSegs +{}",
        ofo("TcpExtTCPOFOQueue"),
        ofo("TcpInSegs")
    );
    for (f, r) in [(&clean_flow, &clean), (&lossy_flow, &lossy)] {
        assert_eq!(r.sender_congestion.as_deref(), Some("cubic"));
        assert!(
            f.bytes >= r.sent_bytes.min(r.received_bytes),
            "{}",
            f.describe()
        );
    }
    assert!(dropped > 0, "nft dropped nothing: the loss was not applied");

    // The router sees every segment the client sent, resent ones included
    // (the drops happen behind it), in order (its receive runs on one CPU),
    // so what it counts as seen before is what the client resent, in segments
    // like iperf3's Retr (the sender's tcpi_total_retrans). Measured: equal,
    // 0 and 0 without loss. Allowed: 75 % of iperf3's count - 5 up to
    // 125 % + 5 (iperf3 reads its counter before the connection's last
    // exchanges).
    let agrees = |f: &Flow, r: &Iperf3Report, what: &str| {
        let iperf = iperf_retr(r);
        let low = (iperf * 3 / 4).saturating_sub(5);
        let high = iperf + iperf / 4 + 5;
        assert!(
            (low..=high).contains(&f.retransmits),
            "{what}: netdoctor {} vs iperf3 {iperf} retransmitted segments \
             (allowed {low}..={high}): {}",
            f.retransmits,
            f.describe()
        );
    };
    agrees(&clean_flow, &clean, "no loss");
    agrees(&lossy_flow, &lossy, "5 % loss");
    // 5 % of the skbs reaching the server are dropped, each one or more
    // segments, so at least ~5 % of the segments are resent: demand 1 %.
    assert!(
        lossy_flow.retransmit_ratio() >= 0.01,
        "5 % loss but only {:.3} % of the segments retransmitted: {}",
        100.0 * lossy_flow.retransmit_ratio(),
        lossy_flow.describe()
    );
    Ok(())
}

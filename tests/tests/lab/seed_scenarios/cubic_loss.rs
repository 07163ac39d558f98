//! Seed 3: loss hitting CUBIC where BBR copes.

use std::time::Duration;

use anyhow::{ensure, Result};
use netdoctor_lab::veth::{create_veth, VethEnd};
use netdoctor_lab::{
    lab_guard, traffic, Direction, Iperf3Opts, Iperf3Report, Iperf3Server, LineConfig,
    LineTopology, Netns, PacketLoss,
};
use serde_json::Value;

use crate::common_mesh::{diagnose, join, Diagnosis};
use crate::seed_scenarios::flow_fields::{flow_f64, flow_str};

/// Makes `cc` the namespace's default (`net.ipv4.tcp_congestion_control`). A namespace
/// other than the host's may only pick algorithms in the host's
/// `net.ipv4.tcp_allowed_congestion_control` (EPERM otherwise): returns whether it worked.
fn set_default_cc(ns: &Netns, cc: &str) -> Result<bool> {
    let out = ns.output(&[
        "sysctl",
        "-q",
        "-w",
        &format!("net.ipv4.tcp_congestion_control={cc}"),
    ])?;
    if !out.status.success() {
        println!(
            "note: {cc} cannot be the default in a namespace here ({}; host allows: {}); \
             the server's socket gets it via setsockopt(TCP_CONGESTION) instead",
            String::from_utf8_lossy(&out.stderr).trim(),
            std::fs::read_to_string("/proc/sys/net/ipv4/tcp_allowed_congestion_control")
                .unwrap_or_default()
                .trim()
        );
        return Ok(false);
    }
    Ok(ns.read_sysctl("net.ipv4.tcp_congestion_control")? == cc)
}

/// A download from `server` (whose sending socket uses `cc`) to the client through the
/// lossy router, with `netdoctor diagnose` on the server's interface meanwhile.
fn download(
    client: &Netns,
    server: &Netns,
    server_ip: &str,
    cc: &str,
) -> Result<(Diagnosis, Iperf3Report)> {
    set_default_cc(server, cc)?;
    let _iperf = Iperf3Server::start(server, 5201)?;
    std::thread::scope(|s| {
        let transfer = s.spawn(|| {
            let mut opts = Iperf3Opts::new(server_ip);
            opts.reverse = true; // the server sends, as a web server does
            opts.duration_secs = 8;
            opts.congestion = Some(cc.to_owned()); // applied to the server's socket too
            traffic::iperf3_client(client, &opts)
        });
        std::thread::sleep(Duration::from_millis(700));
        let d = diagnose(server, "eth0", "4s", &[]);
        let report = join(transfer, &format!("download from the {cc} server"));
        Ok((d?, report?))
    })
}

#[test]
fn seed_3_loss_hits_cubic_not_bbr() -> Result<()> {
    lab_guard!("iperf3", "nft", "ping");
    // client — router — server (cubic), and a second server (bbr) behind the same router.
    let line = LineTopology::new(&LineConfig::default())?;
    let bbr_server = Netns::new()?;
    create_veth(
        VethEnd::ns(&line.router, "eth2").addr("10.200.3.1/24"),
        VethEnd::ns(&bbr_server, "eth0").addr("10.200.3.2/24"),
    )?;
    bbr_server.add_route("default", "10.200.3.1")?;
    traffic::wait_for_ping(&line.client, "10.200.3.2", Duration::from_secs(5))?;
    // 7 % of the packets toward the client are lost on the router: both servers send
    // through it.
    let loss = PacketLoss::add(
        &line.router,
        LineTopology::ROUTER_CLIENT_IF,
        Direction::Egress,
        7,
    )?;

    let (cubic, cubic_rate) =
        download(&line.client, &line.server, LineTopology::SERVER_IP, "cubic")?;
    let (bbr, bbr_rate) = download(&line.client, &bbr_server, "10.200.3.2", "bbr")?;
    println!(
        "7 % loss: cubic server {:.1} Mbit/s ({} retransmits), bbr server {:.1} Mbit/s ({} \
         retransmits); the router dropped {} packets",
        cubic_rate.received_bits_per_second / 1e6,
        cubic_rate.retransmits.unwrap_or(0),
        bbr_rate.received_bits_per_second / 1e6,
        bbr_rate.retransmits.unwrap_or(0),
        loss.dropped_packets()?
    );
    ensure!(
        cubic_rate.sender_congestion.as_deref() == Some("cubic")
            && bbr_rate.sender_congestion.as_deref() == Some("bbr"),
        "senders used {:?} and {:?}",
        cubic_rate.sender_congestion,
        bbr_rate.sender_congestion
    );

    // netdoctor shows the algorithm per flow, and the retransmissions on both.
    let (cf, bf) = (cubic.bulk_flow()?, bbr.bulk_flow()?);
    println!(
        "netdoctor: {} cc {} retrans {:.3} at {:.1} Mbit/s; {} cc {} retrans {:.3} at {:.1} Mbit/s",
        flow_str(cf, "name")?,
        flow_str(cf, "cc")?,
        flow_f64(cf, "retrans_ratio")?,
        flow_f64(cf, "throughput_bps")? / 1e6,
        flow_str(bf, "name")?,
        flow_str(bf, "cc")?,
        flow_f64(bf, "retrans_ratio")?,
        flow_f64(bf, "throughput_bps")? / 1e6
    );
    ensure!(
        flow_str(cf, "cc")? == "cubic" && flow_str(bf, "cc")? == "bbr",
        "per-flow cc: cubic report {cf}, bbr report {bf}"
    );
    ensure!(
        flow_str(cf, "name")?.starts_with(&format!("{}:5201 -> ", LineTopology::SERVER_IP)),
        "cubic server's bulk flow {cf}"
    );
    for (what, f) in [("cubic", cf), ("bbr", bf)] {
        ensure!(
            flow_f64(f, "retrans_ratio")? >= 0.01,
            "the {what} flow saw no loss, the scenario is void: {f}"
        );
    }

    // The interface's retransmission figures count what the server sent again as its
    // sockets did (the local path checks only what it receives, and receives ACKs here).
    for (what, d) in [("cubic", &cubic), ("bbr", &bbr)] {
        let sent_again: i64 = d
            .flows()
            .iter()
            .filter_map(|f| f["retransmits"].as_i64())
            .sum();
        let counted = d.i64("/facts/traffic/tcp_retransmits")?;
        ensure!(
            sent_again > 0 && counted >= sent_again,
            "{what} server: its sockets retransmitted {sent_again} segments, its interface \
             counts {counted}"
        );
    }

    let f = cubic.finding("tcp.cubic_on_lossy_path")?;
    ensure!(
        f.get("subject").and_then(Value::as_str) == Some(flow_str(cf, "name")?),
        "finding about {:?}, the cubic flow is {}",
        f.get("subject"),
        flow_str(cf, "name")?
    );
    ensure!(
        f.get("fix")
            .and_then(Value::as_str)
            .is_some_and(|fix| fix.contains("tcp_congestion_control=bbr")),
        "fix: {f}"
    );
    bbr.assert_none_of(&["tcp.cubic_on_lossy_path"])?;
    Ok(())
}

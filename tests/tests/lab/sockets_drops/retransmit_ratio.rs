//! Loss on the path -> retransmit ratio of the cubic data connection (0, 2, 5 % loss), and
//! the tracepoint's segment sizes adding up to the kernel's retransmission count (short by
//! the runs the kernel says it skipped and at most 1 % more), also when the sender's own
//! device drops some of the retransmissions.

use std::net::SocketAddr;

use anyhow::{ensure, Context, Result};
use netdoctor_lab::netdoctor::{u64_field, Watch};
use netdoctor_lab::stats::net_counters;
use netdoctor_lab::{lab_guard, traffic, Direction, Iperf3Server, PacketLoss, PairTopology};

use crate::sockets_drops::helpers::{f64_field, ip, iperf3_opts};
use crate::sockets_drops::rows::{assert_only_local, cc_aggregate, row_for, rows, Row};

/// Whether the retransmitted segments' sizes must add up to the kernel's count exactly on
/// this kernel (its tcp_retransmit_skb tracepoint passes `err`).
fn sizes_exact() -> Result<bool> {
    let btf = ::netdoctor::kernel::btf::vmlinux().context("no kernel BTF")?;
    Ok(::netdoctor::kernel::sockets::retransmit_passes_err(&btf))
}

/// Full-MSS plus shorter retransmitted segments: the kernel's count (`total_retrans`) where
/// `exact` ([`sizes_exact`]), at most that elsewhere; never none when there were some. Short
/// of it by the events the kernel reports skipping (`missed`: the program was already
/// running on that CPU when an interrupt retransmitted) and by at most 1 % (2 at least)
/// more: loaded CI runs fell 6 short of 1,603 and, with no run skipped, 2 short of 481, a
/// cause not found yet (the skb's gso_segs matched TCP_SKB_CB's count on every event
/// compared).
fn assert_sizes_add_up(row: &Row, exact: bool, missed: u64) -> Result<()> {
    let sizes = row.full_size_retransmits + row.small_retransmits;
    ensure!(
        row.retransmits == 0 || sizes > 0,
        "tcp_retransmit_skb aggregates empty: {}",
        row.describe()
    );
    ensure!(sizes <= row.retransmits, "{}", row.describe());
    let short = row.retransmits - sizes;
    if exact {
        ensure!(
            short <= missed + (row.retransmits / 100).max(2),
            "full {} + small {} fall {short} short of retransmits {} (the kernel skipped \
             {missed} runs): {}",
            row.full_size_retransmits,
            row.small_retransmits,
            row.retransmits,
            row.describe()
        );
    }
    if short > 0 {
        println!("  {short} segments short of total_retrans; the kernel skipped {missed} runs");
    }
    Ok(())
}

#[test]
fn retransmit_ratio_follows_loss() -> Result<()> {
    lab_guard!("iperf3", "nft");
    let pair = PairTopology::new(1500)?;
    // One server per run: an iperf3 server still finishing the previous test (slow
    // under loss) answers "the server is busy".
    let _servers = [5301, 5302, 5303]
        .into_iter()
        .map(|port| Iperf3Server::start(&pair.b, port))
        .collect::<Result<Vec<_>>>()?;
    let a_ip = ip(PairTopology::A_IP)?;
    let watch = Watch::start(
        &pair.a,
        &[
            "flows",
            PairTopology::IFNAME,
            "--duration",
            "120s",
            "--json",
        ],
    )?;
    let mut runs = Vec::new();
    for (i, percent) in [0u8, 2, 5].into_iter().enumerate() {
        let cport = 40300 + u16::try_from(i)?;
        // Loss at the receiver's ingress: the sender sees real lost segments.
        let loss = match percent {
            0 => None,
            p => Some(PacketLoss::add(
                &pair.b,
                PairTopology::IFNAME,
                Direction::Ingress,
                p,
            )?),
        };
        let mut opts = iperf3_opts(
            PairTopology::B_IP,
            5301 + u16::try_from(i)?,
            "cubic",
            cport,
            2,
        );
        opts.bitrate = Some("1G".into());
        let report = traffic::iperf3_client(&pair.a, &opts)?;
        let dropped = match &loss {
            Some(l) => l.dropped_packets()?,
            None => 0,
        };
        runs.push((percent, cport, report, dropped));
    }
    let report = watch.interrupt()?;
    let rows = rows(&report)?;
    assert_only_local(&rows, PairTopology::A_IP)?;

    let exact = sizes_exact()?;
    let missed = u64_field(&report.json, "retransmit_events_missed")?;
    let mut ratios = Vec::new();
    for (percent, cport, iperf, dropped) in &runs {
        let row = row_for(&rows, SocketAddr::new(a_ip, *cport))?;
        println!(
            "loss {percent} %: retrans_ratio {:.5} ({} of {} data segments; tracepoint full {} small {}); \
             iperf3 Retr {:?}, {:.0} Mbit/s; nft dropped {dropped} skbs\n  {}",
            row.retrans_ratio,
            row.retransmits,
            row.data_segs_sent,
            row.full_size_retransmits,
            row.small_retransmits,
            iperf.retransmits,
            iperf.received_bits_per_second / 1e6,
            row.describe()
        );
        assert_eq!(row.cc, "cubic", "{}", row.describe());
        assert!(row.data_segs_sent > 1000, "{}", row.describe());
        // The whole connection lived inside the window, so its counters start from 0:
        // the ratio is total_retrans / data_segs_out of the connection.
        assert_eq!(row.data_segs_sent, row.data_segs_out, "{}", row.describe());
        assert!(
            (row.retrans_ratio - row.retransmits as f64 / row.data_segs_sent as f64).abs() < 1e-9,
            "{}",
            row.describe()
        );
        // iperf3 reads tcpi_total_retrans (the same tcp_sock field) at the test's end;
        // the socket may retransmit a little more until it closes: at 5 % loss its last
        // segments and FIN took up to 6 % more (538 against 508 in one loaded CI run).
        let theirs = iperf.retransmits.context("iperf3 reported no Retr")?;
        assert!(
            row.retransmits >= theirs && row.retransmits <= theirs + (theirs / 10).max(5),
            "netdoctor {} retransmits vs iperf3 {theirs}: {}",
            row.retransmits,
            row.describe()
        );
        if *percent > 0 {
            assert!(*dropped > 0, "nft dropped nothing at {percent} %");
            assert!(
                row.retrans_ratio > 0.0,
                "retrans_ratio 0 with {percent} % loss: {}",
                row.describe()
            );
            assert_sizes_add_up(row, exact, missed)?;
        }
        ratios.push(row.retrans_ratio);
    }
    println!("retrans_ratio at 0/2/5 % loss: {ratios:?}");
    // 0 %: a veth link loses nothing; allow one spurious (e.g. tail loss probe)
    // retransmission per 1000 data segments.
    assert!(ratios[0] <= 0.001, "ratio at 0 % loss: {}", ratios[0]);
    assert!(
        ratios[0] < ratios[1] && ratios[1] < ratios[2],
        "retrans_ratio must rise with loss: {ratios:?}"
    );
    let cubic = cc_aggregate(&report, "cubic")?;
    assert_eq!(u64_field(cubic, "sockets")?, 3, "{cubic}");
    assert!(f64_field(cubic, "retrans_ratio")? > 0.0, "{cubic}");
    Ok(())
}

/// A retransmission the sender's own device drops (here its nft egress hook: the device
/// answers NET_XMIT_DROP, the kernel counts TCPRetransFail) was counted in total_retrans
/// and left TCP full-size: it is among the segment sizes too, which still add up.
///
/// A connection starved of CPU (other tests beside it) can fall back to retransmitting one
/// segment per timeout, a few dozen in its 3 s, none of which the 10 % may hit (0.9^20 =
/// 12 %): so up to five connections run, one after the other, until the device has failed
/// one; every one's sizes must add up.
#[test]
fn retransmissions_the_senders_device_drops_still_count() -> Result<()> {
    lab_guard!("iperf3", "nft");
    let pair = PairTopology::new(1500)?;
    let _server = Iperf3Server::start(&pair.b, 5304)?;
    let watch = Watch::start(
        &pair.a,
        &["flows", PairTopology::IFNAME, "--duration", "60s", "--json"],
    )?;
    let data = ["tcp", "dport", "5304"];
    let _lost =
        PacketLoss::add_matching(&pair.b, PairTopology::IFNAME, Direction::Ingress, 20, &data)?;
    let _local =
        PacketLoss::add_matching(&pair.a, PairTopology::IFNAME, Direction::Egress, 10, &data)?;
    let fails_before = retrans_fails(&pair)?;
    let mut ports = Vec::new();
    for cport in 40304..40309 {
        let mut opts = iperf3_opts(PairTopology::B_IP, 5304, "cubic", cport, 3);
        opts.bitrate = Some("200M".into());
        traffic::iperf3_client(&pair.a, &opts)?;
        ports.push(cport);
        if retrans_fails(&pair)? > fails_before {
            break;
        }
    }
    let fails = retrans_fails(&pair)? - fails_before;
    let report = watch.interrupt()?;
    let rows = rows(&report)?;
    let exact = sizes_exact()?;
    let missed = u64_field(&report.json, "retransmit_events_missed")?;
    println!("TCPRetransFail +{fails} over {} connections", ports.len());
    for cport in ports {
        let row = row_for(&rows, SocketAddr::new(ip(PairTopology::A_IP)?, cport))?;
        println!(
            "  tracepoint full {} small {} of {} retransmits\n  {}",
            row.full_size_retransmits,
            row.small_retransmits,
            row.retransmits,
            row.describe()
        );
        assert_sizes_add_up(row, exact, missed)?;
    }
    ensure!(fails > 0, "the sender's device failed no retransmission");
    Ok(())
}

/// The sender's count of retransmissions that failed after the kernel counted them.
fn retrans_fails(pair: &PairTopology) -> Result<u64> {
    net_counters(&pair.a)?
        .get("TcpExtTCPRetransFail")
        .copied()
        .context("no TcpExtTCPRetransFail in /proc/net/netstat")
}

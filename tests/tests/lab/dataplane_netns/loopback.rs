//! Loopback carries Ethernet headers (all-zero MACs).

use anyhow::Result;
use netdoctor_lab::netdoctor::Watch;
use netdoctor_lab::{lab_guard, traffic, Netns, PingOpts};

use crate::dataplane_netns::helpers::{ip, one_flow};

#[test]
fn loopback_traffic_is_parsed_as_ip() -> Result<()> {
    lab_guard!("ping");
    let ns = Netns::new()?;
    let kernel_before = ns.interface_stats("lo")?;
    let watch = Watch::start(&ns, &["flows", "lo", "--duration", "60s", "--json"])?;
    let ping = traffic::ping(
        &ns,
        "127.0.0.1",
        &PingOpts {
            count: 5,
            interval_secs: 0.02,
            ..PingOpts::default()
        },
    )?;
    let report = watch.interrupt()?;
    let kernel = ns.interface_stats("lo")?.since(&kernel_before);
    println!(
        "lo: kernel tx {} pkts / {} B; netdoctor {:?} / {:?}; link {:?}",
        kernel.tx_packets,
        kernel.tx_bytes,
        report.egress,
        report.ingress,
        report.interface_str("link")?
    );
    assert!(ping.all_received(), "{}", ping.output);
    assert_eq!(report.interface_str("kind")?, "loopback");
    // Loopback frames carry a 14-byte Ethernet header (eth_type_trans in
    // loopback_xmit): counted bytes are 98 per 84-byte ICMP packet.
    assert_eq!(
        report.egress.non_ip,
        0,
        "ICMP over lo counted as non-IP: the link type is wrong ({:?})",
        report.interface_str("link")?
    );
    let lo = ip("127.0.0.1")?;
    let echo = one_flow(&report, "ICMP echo on lo", |f| {
        f.direction == "egress"
            && f.protocol == 1
            && f.src == lo
            && f.dst == lo
            && f.src_port == 8 << 8
    })?;
    assert_eq!(echo.packets, u64::from(ping.transmitted));
    Ok(())
}

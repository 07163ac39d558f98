//! ICMP fragmentation needed, attributed to the router.

use anyhow::{Context, Result};
use netdoctor_lab::netdoctor::Watch;
use netdoctor_lab::{lab_guard, stats, traffic, LineConfig, LineTopology, PingOpts};

use crate::dataplane_netns::helpers::{ip, one_flow};

#[test]
fn icmp_frag_needed_is_attributed_to_the_router() -> Result<()> {
    lab_guard!("ping");
    let line = LineTopology::new(&LineConfig {
        server_link_mtu: 1400,
        ..LineConfig::default()
    })?;
    let client_mtu = line.client.mtu(LineTopology::CLIENT_IF)?;
    let narrow_mtu = line.router.mtu(LineTopology::ROUTER_SERVER_IF)?;
    let watch = Watch::start(
        &line.client,
        &[
            "flows",
            LineTopology::CLIENT_IF,
            "--duration",
            "60s",
            "--json",
        ],
    )?;
    let before = stats::net_counters(&line.client)?;
    // A full-MTU ping with DF: 1472 + 8 + 20 = the client's 1500.
    let size = client_mtu - 28;
    let ping = traffic::ping(
        &line.client,
        LineTopology::SERVER_IP,
        &PingOpts {
            count: 3,
            size: Some(size),
            dont_fragment: true,
            ..PingOpts::default()
        },
    )?;
    let after = stats::net_counters(&line.client)?;
    let report = watch.interrupt()?;
    let delta = |k: &str| {
        after
            .get(k)
            .copied()
            .unwrap_or(0)
            .saturating_sub(before.get(k).copied().unwrap_or(0))
    };
    let unreach = delta("IcmpInDestUnreachs");
    println!(
        "ping: {} sent, {} received, {} errors; kernel IcmpInDestUnreachs +{unreach}; netdoctor \
         icmp_frag_needed {}; too_big {:?}",
        ping.transmitted,
        ping.received,
        ping.errors,
        report.ingress.icmp_frag_needed,
        report.too_big
    );
    assert_eq!(ping.received, 0, "{}", ping.output);
    assert!(unreach >= 1, "the router sent no ICMP: {}", ping.output);

    assert!(report.ingress.icmp_frag_needed >= 1, "{:?}", report.ingress);
    assert_eq!(
        report.ingress.icmp_frag_needed, unreach,
        "every destination-unreachable the client received was a frag-needed"
    );
    assert_eq!(report.egress.icmp_frag_needed, 0);
    let router = ip(LineTopology::ROUTER_CLIENT_SIDE_IP)?;
    let client = ip(LineTopology::CLIENT_IP)?;
    let server = ip(LineTopology::SERVER_IP)?;
    let tb = report
        .too_big
        .iter()
        .find(|t| t.from == router)
        .with_context(|| format!("no too_big entry from {router}: {:?}", report.too_big))?;
    assert_eq!(tb.direction, "ingress", "{tb:?}");
    assert_eq!(tb.mtu, u64::from(narrow_mtu), "{tb:?}");
    assert_eq!((tb.src, tb.dst, tb.protocol), (client, server, 1), "{tb:?}");
    assert_eq!(tb.count, unreach, "{tb:?}");
    // The client's own packets fit its 1500-byte link.
    assert_eq!(report.egress.df_over_mtu, 0, "{:?}", report.egress);
    let echo = one_flow(&report, "ICMP echo client -> server", |f| {
        f.direction == "egress" && f.protocol == 1 && f.src == client && f.dst == server
    })?;
    assert_eq!(
        echo.max_segment,
        u64::from(client_mtu),
        "{}",
        echo.describe()
    );
    Ok(())
}

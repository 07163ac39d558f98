//! WireGuard: handshake and data recognised on the underlay, inner flows on the wg
//! interface, encapsulation overhead.

use anyhow::{ensure, Context, Result};
use netdoctor_lab::netdoctor::Watch;
use netdoctor_lab::{
    lab_guard, traffic, Iperf3Opts, Iperf3Server, PairTopology, PingOpts, WgConfig, WgTunnel,
};

use crate::dataplane_netns::helpers::{ip, iperf3_local_port, one_flow};

#[test]
fn wireguard_underlay_and_inner_flows() -> Result<()> {
    lab_guard!("ping", "iperf3", "wireguard-go", "wg");
    let pair = PairTopology::new(1500)?;
    let ifname = PairTopology::IFNAME;
    // Watch the underlay before the tunnel exists, so the handshake happens
    // during the observation.
    let under = Watch::start(&pair.a, &["flows", ifname, "--duration", "120s", "--json"])?;
    let config = WgConfig::default();
    let wg = WgTunnel::new(
        &pair.a,
        PairTopology::A_IP,
        &pair.b,
        PairTopology::B_IP,
        &config,
    )?;
    let _server = Iperf3Server::start(&pair.b, 5201)?;
    let inner = Watch::start(
        &pair.a,
        // The inner connections' flow records (see the veth test on `--local-tcp`).
        &[
            "flows",
            wg.a.ifname(),
            "--duration",
            "120s",
            "--json",
            "--local-tcp",
            "packets",
        ],
    )?;
    let ping_opts = PingOpts {
        count: 10,
        interval_secs: 0.05,
        size: Some(1000),
        ..PingOpts::default()
    };
    let ping = traffic::ping(&pair.a, wg.b.ip(), &ping_opts)?;
    // wireguard-go is a userspace process: with other tests loading both CPUs
    // it occasionally loses a reply, which is not what this test is about.
    ensure!(
        ping.received > 0,
        "no ping reply through the tunnel: {}",
        ping.output
    );
    let mut opts = Iperf3Opts::new(wg.b.ip());
    opts.duration_secs = 1;
    let upload = traffic::iperf3_client(&pair.a, &opts)?;
    opts.reverse = true;
    let download = traffic::iperf3_client(&pair.a, &opts)?;
    // Inner window inside the outer one: stop the inner watch first.
    let inner = inner.interrupt()?;
    let under = under.interrupt()?;

    let a = ip(PairTopology::A_IP)?;
    let b = ip(PairTopology::B_IP)?;
    let port = config.listen_port;
    println!("underlay flows:\n{}", under.describe_flows());
    println!("wg flows:\n{}", inner.describe_flows());

    // Underlay: both directions recognised as WireGuard by message shape.
    let out = one_flow(&under, "wireguard a -> b", |f| {
        f.direction == "egress"
            && f.protocol == 17
            && (f.src, f.src_port, f.dst, f.dst_port) == (a, port, b, port)
    })?;
    let back = one_flow(&under, "wireguard b -> a", |f| {
        f.direction == "ingress"
            && f.protocol == 17
            && (f.src, f.src_port, f.dst, f.dst_port) == (b, port, a, port)
    })?;
    for f in [out, back] {
        assert_eq!(f.encap, "wireguard", "{}", f.describe());
        assert!(f.wireguard.data > 0, "no data messages: {}", f.describe());
    }
    // Side a sent the first packet, so it initiated; b answered.
    assert!(
        out.wireguard.initiation >= 1 && back.wireguard.response >= 1,
        "handshake: initiation a -> b and response b -> a expected:\n{}\n{}",
        out.describe(),
        back.describe()
    );

    // `tunnels` lists the endpoint pair in both directions.
    for (dir, src, dst) in [("egress", a, b), ("ingress", b, a)] {
        let t = under
            .tunnels
            .iter()
            .find(|t| t.direction == dir && t.src == src && t.dst == dst)
            .with_context(|| format!("no {dir} tunnel {src} -> {dst} in {:?}", under.tunnels))?;
        assert_eq!(t.encap, "wireguard", "{t:?}");
        assert_eq!((t.src_port, t.dst_port), (port, port), "{t:?}");
        let flow = if dir == "egress" { out } else { back };
        assert_eq!((t.packets, t.bytes), (flow.segments, flow.bytes), "{t:?}");
    }

    // The wg interface: raw IP, recognised as WireGuard (UAPI socket).
    assert_eq!(inner.interface_str("name")?, wg.a.ifname());
    assert_eq!(inner.interface_str("kind")?, "wireguard");
    assert_eq!(inner.interface_str("link")?, "rawip");
    assert_eq!(inner.interface_u64("mtu")?, u64::from(config.mtu));
    assert_eq!(inner.ingress.non_ip + inner.egress.non_ip, 0);
    let wa = ip(wg.a.ip())?;
    let wb = ip(wg.b.ip())?;
    let echo = one_flow(&inner, "ICMP echo through the tunnel", |f| {
        f.direction == "egress" && f.protocol == 1 && f.src == wa && f.dst == wb
    })?;
    assert_eq!(
        echo.packets,
        u64::from(ping.transmitted),
        "{}",
        echo.describe()
    );
    // -s 1000: 1028-byte IP packets, no L2 header on a raw-IP device.
    assert_eq!(echo.max_segment, 1028, "{}", echo.describe());
    assert_eq!(echo.bytes, 1028 * echo.packets, "{}", echo.describe());
    let up_port = iperf3_local_port(&upload)?;
    let up = one_flow(&inner, "iperf3 upload inside the tunnel", |f| {
        f.direction == "egress"
            && f.protocol == 6
            && (f.src, f.src_port, f.dst, f.dst_port) == (wa, up_port, wb, 5201)
    })?;
    assert!(up.bytes >= upload.sent_bytes, "{}", up.describe());
    // MSS on the tunnel: wg MTU - 40.
    assert_eq!(
        up.syn_mss,
        Some(u64::from(config.mtu) - 40),
        "{}",
        up.describe()
    );
    assert!(up.max_segment <= u64::from(config.mtu), "{}", up.describe());
    let down_port = iperf3_local_port(&download)?;
    let down = one_flow(&inner, "iperf3 download inside the tunnel", |f| {
        f.direction == "ingress"
            && f.protocol == 6
            && (f.src, f.src_port, f.dst, f.dst_port) == (wb, 5201, wa, down_port)
    })?;
    assert!(down.bytes >= download.received_bytes, "{}", down.describe());

    // Outer bytes exceed inner bytes in both directions: encapsulation.
    let tunnel_bytes = |dir: &str| -> u64 {
        under
            .tunnels
            .iter()
            .filter(|t| t.direction == dir)
            .map(|t| t.bytes)
            .sum()
    };
    for dir in ["egress", "ingress"] {
        let outer = tunnel_bytes(dir);
        let c = inner.counters(dir)?;
        assert!(
            outer > c.bytes,
            "{dir}: outer {outer} B on {ifname} <= inner {} B on {}",
            c.bytes,
            wg.a.ifname()
        );
        let overhead = (outer - c.bytes) as f64 / c.segments.max(1) as f64;
        println!(
            "{dir}: outer {outer} B / {} datagrams on {ifname}, inner {} B / {} skbs / {} segments \
             on {}: {overhead:.1} B per inner segment",
            under
                .tunnels
                .iter()
                .filter(|t| t.direction == dir)
                .map(|t| t.packets)
                .sum::<u64>(),
            c.bytes,
            c.packets,
            c.segments,
            wg.a.ifname()
        );
    }
    // Per-packet overhead, from the largest packets: a full-MTU inner packet
    // is not padded (padding stops at the wg MTU), so the largest outer IP
    // packet is exactly 20 (IPv4) + 8 (UDP) + 32 (WireGuard header and tag)
    // = 60 bytes longer than the largest inner one; on the wire add 14 for
    // Ethernet. (Byte totals cannot be divided per packet: wg egress sees GSO
    // super-packets with one set of headers, and wireguard-go drops some
    // decrypted packets under load, which TCP then resends.)
    let wg_mtu = u64::from(config.mtu);
    assert_eq!(
        up.max_segment,
        wg_mtu,
        "bulk TCP fills the wg MTU: {}",
        up.describe()
    );
    assert_eq!(down.max_segment, wg_mtu, "{}", down.describe());
    for (outer, inner_max, dir) in [
        (out, up.max_segment, "egress"),
        (back, down.max_segment, "ingress"),
    ] {
        let overhead = outer.max_segment - inner_max;
        println!(
            "{dir}: largest outer packet {} B, largest inner {inner_max} B: {overhead} B WireGuard \
             overhead per packet at the IP layer, {} B per Ethernet frame",
            outer.max_segment,
            overhead + 14
        );
        assert_eq!(
            overhead, 60,
            "WireGuard over IPv4 adds 60 B per packet ({dir})"
        );
    }
    println!(
        "underlay segment sizes {:?}: egress {:?}, ingress {:?}",
        under.json.get("size_buckets"),
        under.egress.size_buckets,
        under.ingress.size_buckets
    );
    let c = &inner.ingress;
    assert_eq!(
        c.packets, c.segments,
        "wireguard-go writes no GSO packets: {c:?}"
    );
    let data_in = back.wireguard.data;
    println!(
        "ingress: {} outer datagrams ({data_in} counted as data messages) for {} inner packets",
        back.packets, c.packets
    );

    // Every outer datagram is a WireGuard message of a known type, and every
    // inner packet received arrived in a data message (keepalives add more).
    // Data messages whose inner packet fills the wg MTU are not padded to a
    // multiple of 16 (padding is capped at the MTU), so they must count too.
    for f in [out, back] {
        let w = f.wireguard;
        assert_eq!(
            w.initiation + w.response + w.cookie + w.data,
            f.packets,
            "unclassified WireGuard datagrams: {}",
            f.describe()
        );
    }
    assert!(
        data_in >= c.packets,
        "{data_in} data messages counted for {} inner packets received",
        c.packets
    );
    Ok(())
}

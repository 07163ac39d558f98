//! Self-tests of the lab harness against the real kernel (need root; skip
//! elsewhere, fail under CI=true).

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use anyhow::{ensure, Context, Result};
use netdoctor_lab::{
    lab_guard, loss, stats, traffic, veth, Direction, Iperf3Opts, Iperf3Server, LineConfig,
    LineTopology, Netns, PacketLoss, PairTopology, PingOpts, WgConfig, WgTunnel,
};

fn netns_listed(name: &str) -> Result<bool> {
    let out = netdoctor_lab::cmd::host_run(&["ip", "netns", "list"])?;
    Ok(out
        .lines()
        .any(|l| l.split_whitespace().next() == Some(name)))
}

#[test]
fn veth_ping_and_mtu_between_namespaces() -> Result<()> {
    lab_guard!(netns: "ping");
    let pair = PairTopology::new(1400)?;
    assert_eq!(pair.a.mtu(PairTopology::IFNAME)?, 1400);
    let before = pair.a.interface_stats(PairTopology::IFNAME)?;
    let report = traffic::ping(&pair.a, PairTopology::B_IP, &PingOpts::default())?;
    assert!(report.all_received(), "ping failed: {}", report.output);
    assert!(report.rtt_avg_ms.is_some());
    let delta = pair.a.interface_stats(PairTopology::IFNAME)?.since(&before);
    assert!(delta.tx_packets >= 3 && delta.rx_packets >= 3, "{delta:?}");

    // DF: 1372 + 28 = 1400 fits, 1373 does not.
    let fits = PingOpts {
        count: 1,
        size: Some(1372),
        dont_fragment: true,
        ..PingOpts::default()
    };
    assert!(traffic::ping(&pair.a, PairTopology::B_IP, &fits)?.all_received());
    let too_big = PingOpts {
        size: Some(1373),
        ..fits
    };
    let r = traffic::ping(&pair.a, PairTopology::B_IP, &too_big)?;
    assert_eq!(r.received, 0, "{}", r.output);
    assert!(r.errors > 0, "{}", r.output);

    let counters = stats::net_counters(&pair.b)?;
    assert!(
        counters.get("IcmpInEchos").copied().unwrap_or(0) >= 4,
        "{counters:?}"
    );
    Ok(())
}

#[test]
fn run_errors_carry_stderr_and_setns_thread_works() -> Result<()> {
    lab_guard!(netns);
    let ns = Netns::new()?;
    let err = ns
        .run(&["ip", "link", "show", "dev", "nosuchdev0"])
        .expect_err("showing a missing device must fail");
    let msg = format!("{err:#}");
    assert!(msg.contains("nosuchdev0") && msg.contains("exist"), "{msg}");
    assert!(msg.contains(ns.name()), "{msg}");

    ns.sysctl("net.ipv4.ip_forward", "1")?;
    assert_eq!(ns.read_sysctl("net.ipv4.ip_forward")?, "1");

    let expected = std::fs::metadata(ns.path())?.ino();
    let inside = ns.run_in(|| std::fs::metadata("/proc/thread-self/ns/net").map(|m| m.ino()))??;
    assert_eq!(inside, expected);
    Ok(())
}

#[test]
fn host_veth_end_is_removed_on_drop() -> Result<()> {
    lab_guard!(netns);
    let ns = Netns::new()?;
    let host_name = {
        let link = veth::create_veth(
            veth::VethEnd::host(),
            veth::VethEnd::ns(&ns, "eth0").addr("10.201.9.2/24"),
        )?;
        let name = link.host_ifname().context("no host end")?.to_owned();
        assert!(Path::new("/sys/class/net").join(&name).exists());
        assert_eq!(stats::host_interface_stats(&name)?.rx_errors, 0);
        name
    };
    assert!(!Path::new("/sys/class/net").join(&host_name).exists());
    Ok(())
}

#[test]
fn wireguard_go_tunnel_handshake_ping_iperf3() -> Result<()> {
    lab_guard!(netns: "wireguard-go", "wg", "iperf3", "ping");
    let pair = PairTopology::new(1500)?;
    let wg = WgTunnel::new(
        &pair.a,
        PairTopology::A_IP,
        &pair.b,
        PairTopology::B_IP,
        &WgConfig::default(),
    )?;
    assert!(wg.a.ifname().starts_with("ndwg") && wg.a.ifname().len() <= 15);
    assert_ne!(wg.a.ifname(), wg.b.ifname());
    assert!(wg.a.socket_path().exists() && wg.b.socket_path().exists());
    assert!(wg.a.latest_handshake()?.is_some(), "{}", wg.a.show()?);
    assert_eq!(pair.a.mtu(wg.a.ifname())?, 1420);
    // The TUN lives in the namespace, not on the host.
    assert!(!Path::new("/sys/class/net").join(wg.a.ifname()).exists());

    let ping = traffic::ping(&pair.b, wg.a.ip(), &PingOpts::default())?;
    assert!(ping.all_received(), "{}", ping.output);

    let _server = Iperf3Server::start(&pair.b, 5201)?;
    let report = traffic::iperf3_client(&pair.a, &Iperf3Opts::new(wg.b.ip()))?;
    println!(
        "wireguard-go iperf3: {:.0} Mbit/s, {} bytes, retransmits {:?}",
        report.received_bits_per_second / 1e6,
        report.received_bytes,
        report.retransmits
    );
    assert!(report.received_bytes > 1_000_000, "{report:?}");
    assert!(report.received_bits_per_second > 1e6, "{report:?}");
    let wg_stats = pair.a.interface_stats(wg.a.ifname())?;
    assert!(wg_stats.tx_bytes >= report.received_bytes, "{wg_stats:?}");
    Ok(())
}

#[test]
fn line_forwarding_with_nft_loss_shows_retransmits() -> Result<()> {
    lab_guard!(netns: "iperf3", "nft", "ping");
    let line = LineTopology::new(&LineConfig {
        client_link_mtu: 1500,
        server_link_mtu: 1400,
        forwarding: true,
    })?;
    assert_eq!(line.server.mtu(LineTopology::SERVER_IF)?, 1400);
    traffic::wait_for_ping(
        &line.client,
        LineTopology::SERVER_IP,
        std::time::Duration::from_secs(3),
    )?;

    let _server = Iperf3Server::start(&line.server, 5201)?;
    let mut opts = Iperf3Opts::new(LineTopology::SERVER_IP);
    opts.congestion = Some("cubic".to_owned());

    let loss = PacketLoss::add(
        &line.router,
        LineTopology::ROUTER_SERVER_IF,
        Direction::Egress,
        10,
    )?;
    let lossy = traffic::iperf3_client(&line.client, &opts)?;
    println!(
        "10% loss, cubic: {:.1} Mbit/s, retransmits {:?}, nft dropped {}",
        lossy.received_bits_per_second / 1e6,
        lossy.retransmits,
        loss.dropped_packets()?
    );
    assert_eq!(lossy.sender_congestion.as_deref(), Some("cubic"));
    assert!(lossy.received_bytes > 0, "{lossy:?}");
    let retrans = lossy.retransmits.context("no retransmits reported")?;
    assert!(retrans > 0, "10% loss but no retransmits: {lossy:?}");
    assert!(loss.dropped_packets()? > 0);
    let table = line
        .router
        .run(&["nft", "list", "table", "netdev", loss::TABLE])?;
    assert!(table.contains("numgen random mod 100 < 10"), "{table}");

    drop(loss);
    let table = line
        .router
        .run(&["nft", "list", "table", "netdev", loss::TABLE])?;
    assert!(!table.contains("numgen"), "loss chain not removed: {table}");
    Ok(())
}

#[test]
fn forwarding_disabled_blocks_routed_traffic() -> Result<()> {
    lab_guard!(netns: "ping");
    let line = LineTopology::new(&LineConfig {
        forwarding: false,
        ..LineConfig::default()
    })?;
    let near = traffic::ping(
        &line.client,
        LineTopology::ROUTER_CLIENT_SIDE_IP,
        &PingOpts::default(),
    )?;
    assert!(near.all_received(), "{}", near.output);
    let far = traffic::ping(&line.client, LineTopology::SERVER_IP, &PingOpts::default())?;
    assert_eq!(far.received, 0, "{}", far.output);
    let counters = stats::net_counters(&line.router)?;
    assert!(
        counters.get("IpInAddrErrors").copied().unwrap_or(0) > 0,
        "{counters:?}"
    );
    Ok(())
}

#[test]
fn teardown_leaves_nothing_behind_even_on_panic() -> Result<()> {
    lab_guard!(netns: "wireguard-go", "wg", "nft", "sleep");
    let mut names = Vec::new();
    let mut sockets = Vec::new();
    let mut pids = Vec::new();
    {
        let pair = PairTopology::new(1500)?;
        let wg = WgTunnel::new(
            &pair.a,
            PairTopology::A_IP,
            &pair.b,
            PairTopology::B_IP,
            &WgConfig::default(),
        )?;
        let _loss = PacketLoss::add(&pair.b, PairTopology::IFNAME, Direction::Ingress, 5)?;
        let sleeper = pair.a.spawn(&["sleep", "600"])?;
        // Not tracked by anyone and ignoring SIGTERM: the namespace's Drop
        // must SIGKILL it.
        let orphan = pair
            .b
            .command("sh", ["-c", "trap '' TERM; exec sleep 600"])
            .spawn()?;
        pids.extend([sleeper.pid(), orphan.id(), wg.a.pid(), wg.b.pid()]);
        names.extend([pair.a.name().to_owned(), pair.b.name().to_owned()]);
        sockets.extend([wg.a.socket_path(), wg.b.socket_path()]);
        for n in &names {
            assert!(netns_listed(n)?, "{n} not listed");
        }
        // Drop order here: sleeper, loss, wg, pair (reverse declaration).
        std::mem::forget(orphan);
    }

    let panicked = std::panic::catch_unwind(|| {
        let ns = Netns::new().expect("creating namespace");
        let name = ns.name().to_owned();
        let _bg = ns.spawn(&["sleep", "600"]).expect("spawning sleep");
        panic!("{name}");
    });
    let payload = panicked.expect_err("closure must panic");
    let name = payload
        .downcast_ref::<String>()
        .cloned()
        .context("panic payload is not the namespace name")?;
    names.push(name);

    for n in &names {
        assert!(!netns_listed(n)?, "namespace {n} left behind");
        assert!(!Path::new("/run/netns").join(n).exists());
    }
    for s in &sockets {
        assert!(!s.exists(), "wireguard socket {} left behind", s.display());
    }
    for pid in pids {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let zombie_or_gone = status.is_empty() || status.contains("State:\tZ");
        ensure!(zombie_or_gone, "process {pid} still running");
    }
    Ok(())
}

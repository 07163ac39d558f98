//! The five seed situations of the project mission, end to end: each builds the broken
//! network in throw-away namespaces, runs `netdoctor diagnose IFACE --json` on the
//! interface an operator would ask about, and checks the finding id(s) — and that the
//! healthy twin of the same network does not get them.
//!
//! 1. A WireGuard MTU that ignores the encapsulation overhead → `mtu.tunnel_exceeds_underlay`.
//! 2. A PMTU blackhole (router drops its own ICMP frag-needed) → `pmtu.blackhole`.
//! 3. Packet loss hitting CUBIC where BBR copes → `tcp.cubic_on_lossy_path`, cubic flow only.
//! 4. A gateway with forwarding off → `forwarding.disabled`; strict rp_filter with
//!    asymmetric routing → `rpfilter.drops`.
//! 5. A bond hashing every flow onto one link under a WireGuard tunnel →
//!    `bond.single_link_hash`: in the kernel lane (tests/vm/tunnels.sh, `bond_xor_l2`),
//!    since this host's kernel has no bonding.
//!
//! Needs root, BPF and the lab tools; skips elsewhere, fails under CI=true.
//! Build the binary first: `cargo build -p netdoctor`.

#[path = "../common_mesh/mod.rs"]
mod common_mesh;

use std::time::Duration;

use anyhow::{ensure, Context, Result};
use common_mesh::{diagnose, join, mtu_fix, Diagnosis, MTU_FINDINGS};
use netdoctor_lab::veth::{create_veth, VethEnd};
use netdoctor_lab::{
    ci, traffic, BgProcess, Direction, Iperf3Opts, Iperf3Report, Iperf3Server, LineConfig,
    LineTopology, Netns, PacketLoss, PairTopology, PingOpts, WgConfig, WgTunnel,
};
use serde_json::Value;

/// A WireGuard tunnel over a pair; the tunnel drops before the namespaces.
#[derive(Debug)]
struct WgOverPair {
    wg: WgTunnel,
    pair: PairTopology,
}

impl WgOverPair {
    fn new(mtu: u32) -> Result<WgOverPair> {
        let pair = PairTopology::new(1500)?;
        let config = WgConfig {
            mtu,
            ..WgConfig::default()
        };
        let wg = WgTunnel::new(
            &pair.a,
            PairTopology::A_IP,
            &pair.b,
            PairTopology::B_IP,
            &config,
        )?;
        Ok(WgOverPair { wg, pair })
    }
}

fn flow_str<'a>(f: &'a Value, key: &str) -> Result<&'a str> {
    f.get(key)
        .and_then(Value::as_str)
        .with_context(|| format!("flow without string {key}: {f}"))
}

fn flow_f64(f: &Value, key: &str) -> Result<f64> {
    f.get(key)
        .and_then(Value::as_f64)
        .with_context(|| format!("flow without number {key}: {f}"))
}

// ---------------------------------------------------------------------------------------
// 1. Tunnel MTU that ignores the overhead
// ---------------------------------------------------------------------------------------

fn wg_mtu_scenario(mtu: u32) -> Result<Diagnosis> {
    let t = WgOverPair::new(mtu)?;
    diagnose(&t.pair.a, t.wg.a.ifname(), "3s", &[])
}

#[test]
fn seed_1_tunnel_mtu_ignores_overhead() -> Result<()> {
    if !ci::lab_ready(&["wireguard-go", "wg", "ping"]) {
        return Ok(());
    }
    // WireGuard over IPv4 adds 60 bytes: 1440 is the largest MTU a 1500 underlay carries.
    let (broken, healthy) = std::thread::scope(|s| -> Result<(Diagnosis, Diagnosis)> {
        let broken = s.spawn(|| wg_mtu_scenario(1500));
        let healthy = s.spawn(|| wg_mtu_scenario(1440));
        Ok((join(broken, "wg MTU 1500")?, join(healthy, "wg MTU 1440")?))
    })?;

    let f = broken.finding("mtu.tunnel_exceeds_underlay")?;
    ensure!(
        f.get("severity").and_then(Value::as_str) == Some("critical"),
        "severity: {f}"
    );
    ensure!(
        broken.str("/facts/tunnel/kind")? == "wireguard"
            && broken.i64("/facts/tunnel/overhead_expected")? == 60
            && broken.str("/facts/tunnel/underlay_iface")? == PairTopology::IFNAME
            && broken.i64("/facts/tunnel/max_mtu")? == 1440,
        "tunnel facts: {}",
        broken.describe()
    );
    let iface = broken.str("/interface")?;
    let fix = f.get("fix").and_then(Value::as_str).unwrap_or_default();
    ensure!(
        fix.contains(&mtu_fix(iface, 1440)),
        "fix {fix:?} does not set {iface} to 1440"
    );
    let endpoint = format!("{}:{}", PairTopology::B_IP, WgConfig::default().listen_port);
    ensure!(
        broken
            .at("/facts/tunnel/endpoints")?
            .as_array()
            .is_some_and(|e| e.iter().any(|x| x.as_str() == Some(&endpoint))),
        "endpoint {endpoint} missing: {}",
        broken.describe()
    );

    healthy.assert_none_of(MTU_FINDINGS)?;
    ensure!(
        healthy.i64("/facts/tunnel/max_mtu")? == 1440 && healthy.i64("/facts/iface/mtu")? == 1440,
        "healthy twin: {}",
        healthy.describe()
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------
// 2. PMTU blackhole
// ---------------------------------------------------------------------------------------

/// client — router — server; the router's hop to the server has MTU 1400 (the server's
/// own interface keeps 1500) and, when `filter_icmp`, the router drops the ICMP
/// frag-needed it generates. A bulk upload runs from the client during the diagnosis of
/// the client's interface.
fn blackhole_scenario(filter_icmp: bool) -> Result<Diagnosis> {
    let line = LineTopology::new(&LineConfig::default())?;
    line.router.set_mtu(LineTopology::ROUTER_SERVER_IF, 1400)?;
    if filter_icmp {
        line.router.run(&[
            "iptables",
            "-A",
            "OUTPUT",
            "-p",
            "icmp",
            "--icmp-type",
            "fragmentation-needed",
            "-j",
            "DROP",
        ])?;
    }
    let _server = Iperf3Server::start(&line.server, 5201)?;
    let _upload: BgProcess = line.client.spawn(&[
        "iperf3",
        "-c",
        LineTopology::SERVER_IP,
        "-t",
        "20",
        "--connect-timeout",
        "3000",
    ])?;
    std::thread::sleep(Duration::from_secs(1));
    diagnose(&line.client, LineTopology::CLIENT_IF, "4s", &[])
}

#[test]
fn seed_2_pmtu_blackhole() -> Result<()> {
    if !ci::lab_ready(&["iperf3", "iptables", "ping"]) {
        return Ok(());
    }
    let (broken, healthy) = std::thread::scope(|s| -> Result<(Diagnosis, Diagnosis)> {
        let broken = s.spawn(|| blackhole_scenario(true));
        let healthy = s.spawn(|| blackhole_scenario(false));
        Ok((
            join(broken, "ICMP filtered")?,
            join(healthy, "ICMP allowed")?,
        ))
    })?;

    let f = broken.finding("pmtu.blackhole")?;
    ensure!(
        f.get("severity").and_then(Value::as_str) == Some("critical"),
        "severity: {f}"
    );
    let bulk = broken.bulk_flow()?;
    println!(
        "blackhole: bulk upload {} bit/s during the window; healthy twin {} bit/s",
        flow_f64(bulk, "throughput_bps")?,
        flow_f64(healthy.bulk_flow()?, "throughput_bps")?
    );
    ensure!(
        broken.bool("/facts/probe/blackhole")?
            && broken.i64("/facts/probe/path_mtu")? == 1400
            && broken.str("/facts/probe/target")? == LineTopology::SERVER_IP
            && broken.i64("/facts/traffic/too_big_received")? == 0,
        "probe facts: {}",
        broken.describe()
    );
    ensure!(
        bulk.get("full_size_retransmits").and_then(Value::as_i64) > Some(0)
            && flow_f64(bulk, "throughput_bps")? < 100_000.0,
        "the upload did not stall on full-size segments: {bulk}"
    );
    let fix = f.get("fix").and_then(Value::as_str).unwrap_or_default();
    ensure!(
        fix.contains(&mtu_fix(LineTopology::CLIENT_IF, 1400)),
        "fix {fix:?} does not name the probed 1400"
    );

    // PMTUD working: the router's ICMP shrinks the connection to 1400 and data flows.
    healthy.assert_none_of(&["pmtu.blackhole"])?;
    let bulk = healthy.bulk_flow()?;
    ensure!(
        flow_f64(bulk, "throughput_bps")? > 1e6
            && bulk.get("pmtu").and_then(Value::as_i64) == Some(1400),
        "healthy twin's upload: {}",
        healthy.describe()
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------
// 3. Loss hitting CUBIC where BBR copes
// ---------------------------------------------------------------------------------------

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
    if !ci::lab_ready(&["iperf3", "nft", "ping"]) {
        return Ok(());
    }
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

// ---------------------------------------------------------------------------------------
// 4. Gateway: forwarding off; strict rp_filter with asymmetric routing
// ---------------------------------------------------------------------------------------

/// Pings the server from the client through the router for ~`secs` seconds.
fn background_ping(from: &Netns, to: &str, secs: u32) -> Result<BgProcess> {
    let count = (secs * 10).to_string();
    from.spawn(&["ping", "-n", "-i", "0.1", "-c", &count, "-W", "1", to])
}

fn forwarding_scenario(forwarding: bool) -> Result<(Diagnosis, traffic::PingReport)> {
    let line = LineTopology::new(&LineConfig {
        forwarding,
        ..LineConfig::default()
    })?;
    let _ping = background_ping(&line.client, LineTopology::SERVER_IP, 20)?;
    let d = diagnose(
        &line.router,
        LineTopology::ROUTER_CLIENT_IF,
        "3s",
        &["--no-probe"],
    )?;
    let check = traffic::ping(&line.client, LineTopology::SERVER_IP, &PingOpts::default())?;
    Ok((d, check))
}

#[test]
fn seed_4_gateway_forwarding_disabled() -> Result<()> {
    if !ci::lab_ready(&["ping"]) {
        return Ok(());
    }
    let ((broken, broken_ping), (healthy, healthy_ping)) = std::thread::scope(|s| {
        let broken = s.spawn(|| forwarding_scenario(false));
        let healthy = s.spawn(|| forwarding_scenario(true));
        Ok::<_, anyhow::Error>((
            join(broken, "forwarding off")?,
            join(healthy, "forwarding on")?,
        ))
    })?;
    ensure!(
        broken_ping.received == 0 && healthy_ping.all_received(),
        "scenario: pings through the gateway with forwarding off {}/{}, on {}/{}",
        broken_ping.received,
        broken_ping.transmitted,
        healthy_ping.received,
        healthy_ping.transmitted
    );
    let f = broken.finding("forwarding.disabled")?;
    ensure!(
        f.get("severity").and_then(Value::as_str) == Some("critical")
            && f.get("fix")
                .and_then(Value::as_str)
                .is_some_and(|fix| fix.contains("net.ipv4.ip_forward=1")),
        "finding: {f}"
    );
    ensure!(
        broken.i64("/facts/drops/forwarding")? >= 10 && !broken.bool("/facts/host/ip_forward")?,
        "drops/host facts: {}",
        broken.describe()
    );
    healthy.assert_none_of(&["forwarding.disabled"])?;
    ensure!(
        healthy.i64("/facts/drops/forwarding")? == 0,
        "healthy twin: {}",
        healthy.describe()
    );
    Ok(())
}

/// The line plus a second router — server link (router eth2 10.200.9.1 — server eth1
/// 10.200.9.2). The client pings 10.200.9.2: the request goes router → eth2, but the
/// server answers from 10.200.9.2 over its default route (eth0 → router eth1). With strict
/// rp_filter the router drops those answers on eth1 (the way back to 10.200.9.2 is eth2).
/// The server announces its eth0 address in ARP (`arp_announce=2`): otherwise its ARP
/// requests would carry 10.200.9.2 too, the router's rp_filter would ignore them, and no
/// answer would ever leave the server.
fn rp_filter_scenario(mode: &str) -> Result<(Diagnosis, traffic::PingReport)> {
    let line = LineTopology::new(&LineConfig::default())?;
    create_veth(
        VethEnd::ns(&line.router, "eth2").addr("10.200.9.1/24"),
        VethEnd::ns(&line.server, "eth1").addr("10.200.9.2/24"),
    )?;
    line.server.sysctl("net.ipv4.conf.all.arp_announce", "2")?;
    for key in ["all", "eth1"] {
        line.server
            .sysctl(&format!("net.ipv4.conf.{key}.rp_filter"), "0")?;
        line.router
            .sysctl(&format!("net.ipv4.conf.{key}.rp_filter"), mode)?;
    }
    let _ping = background_ping(&line.client, "10.200.9.2", 20)?;
    let d = diagnose(
        &line.router,
        LineTopology::ROUTER_SERVER_IF,
        "3s",
        &["--no-probe"],
    )?;
    let check = traffic::ping(&line.client, "10.200.9.2", &PingOpts::default())?;
    Ok((d, check))
}

#[test]
fn seed_4_gateway_rp_filter_strict_with_asymmetric_routing() -> Result<()> {
    if !ci::lab_ready(&["ping"]) {
        return Ok(());
    }
    let ((strict, strict_ping), (loose, loose_ping)) = std::thread::scope(|s| {
        let strict = s.spawn(|| rp_filter_scenario("1"));
        let loose = s.spawn(|| rp_filter_scenario("2"));
        Ok::<_, anyhow::Error>((
            join(strict, "rp_filter strict")?,
            join(loose, "rp_filter loose")?,
        ))
    })?;
    ensure!(
        strict_ping.received == 0 && loose_ping.all_received(),
        "scenario: asymmetric pings with rp_filter strict {}/{}, loose {}/{}",
        strict_ping.received,
        strict_ping.transmitted,
        loose_ping.received,
        loose_ping.transmitted
    );
    let f = strict.finding("rpfilter.drops")?;
    ensure!(
        f.get("fix")
            .and_then(Value::as_str)
            .is_some_and(|fix| fix.contains("rp_filter=2")),
        "finding: {f}"
    );
    ensure!(
        strict.i64("/facts/drops/rpfilter")? >= 10 && strict.i64("/facts/host/rp_filter")? == 1,
        "drops/host facts: {}",
        strict.describe()
    );
    loose.assert_none_of(&["rpfilter.drops"])?;
    Ok(())
}

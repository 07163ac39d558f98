//! `netdoctor diagnose` on layer-2 TAP meshes run by userspace tunnel daemons: tinc
//! (Debian's tinc 1.0, legacy protocol, `Mode = switch`) and fastd (`mode tap`), each
//! between two namespaces over a veth underlay of MTU 1500.
//!
//! netdoctor has no configuration to read for these tunnels: it must find the daemon that
//! holds the TAP device (`/proc/PID/fdinfo`), take its UDP port, learn the endpoint from
//! the traffic on that port and the underlay from the busiest candidate interface. The
//! tests check that identification, the MTU verdict at an oversized and at a fitting MTU,
//! and compare netdoctor's overhead figures with the sizes seen on the wire (nft counters
//! per outer IP length on the receiving end of the underlay).
//!
//! Needs root, BPF, `tincd`, `fastd`, `iperf3`, `nft`; skips elsewhere, fails under CI=true.
//! Build the binary first: `cargo build -p netdoctor`.

// Shared with other test targets, so it stays beside them in tests/tests/common_mesh/.
#[path = "../common_mesh/mod.rs"]
mod common_mesh;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use common_mesh::{diagnose, join, mtu_fix, wait_for_link, Diagnosis, MTU_FINDINGS};
use netdoctor_lab::{
    ci, cmd, traffic, BgProcess, Iperf3Opts, Iperf3Report, Iperf3Server, Netns, PairTopology,
};
use serde_json::Value;

/// Tunnel (overlay) addresses of the two sides.
const TUNNEL_A: &str = "10.250.0.1";
const TUNNEL_B: &str = "10.250.0.2";
/// The veth underlay's MTU.
const UNDERLAY_MTU: i64 = 1500;
const TINC_PORT: u16 = 655;
const FASTD_PORT: u16 = 10000;
/// Observation window of each diagnosis.
const WINDOW: &str = "4s";
/// Length of the iperf3 run that keeps the tunnel busy during a diagnosis.
const LOAD_SECS: u32 = 9;

/// Tools of the tinc tests, the fastd tests, and of the test using both.
const TINC_TOOLS: &[&str] = &["tincd", "iperf3", "nft", "ping"];
const FASTD_TOOLS: &[&str] = &["fastd", "iperf3", "nft", "ping"];
const BOTH_TOOLS: &[&str] = &["tincd", "fastd", "ping"];

/// The daemon serving the mesh.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Daemon {
    /// tincd, `Mode = switch`.
    Tinc,
    /// fastd, `mode tap`, with this method.
    Fastd(&'static str),
}

impl Daemon {
    fn port(self) -> u16 {
        match self {
            Daemon::Tinc => TINC_PORT,
            Daemon::Fastd(_) => FASTD_PORT,
        }
    }

    /// `facts.tunnel.kind`.
    fn kind(self) -> &'static str {
        match self {
            Daemon::Tinc => "tinc",
            Daemon::Fastd(_) => "fastd",
        }
    }

    /// `facts.tunnel.daemon` (the command name in /proc/PID/comm).
    fn command(self) -> &'static str {
        match self {
            Daemon::Tinc => "tincd",
            Daemon::Fastd(_) => "fastd",
        }
    }
}

static IFNAME_COUNTER: AtomicU32 = AtomicU32::new(0);

/// A TAP interface name unique on the machine (netdoctor looks TAP owners up in /proc,
/// which lists the daemons of every namespace).
fn unique_ifname() -> String {
    format!(
        "ndtap{:x}x{}",
        std::process::id() & 0xffff,
        IFNAME_COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// Two namespaces over a veth (`a` 10.201.0.1 — `b` 10.201.0.2, MTU 1500) and a TAP
/// mesh between them (`a` 10.250.0.1 — `b` 10.250.0.2) run by tincd or fastd in the
/// foreground inside each namespace. Daemons stop first, then the namespaces go.
#[derive(Debug)]
struct TapMesh {
    daemons: Vec<BgProcess>,
    pair: PairTopology,
    dir: tempfile::TempDir,
    ifname: String,
    daemon: Daemon,
}

fn write(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

fn tinc_node(dir: &Path, name: &str, other: &str, underlay_ip: &str, ifname: &str) -> Result<()> {
    std::fs::create_dir_all(dir.join("hosts"))
        .with_context(|| format!("creating {}", dir.display()))?;
    write(
        &dir.join("tinc.conf"),
        &format!(
            "Name = {name}\nMode = switch\nInterface = {ifname}\nConnectTo = {other}\nAddressFamily = ipv4\n"
        ),
    )?;
    write(
        &dir.join("hosts").join(name),
        &format!("Address = {underlay_ip}\nPort = {TINC_PORT}\n"),
    )?;
    // Appends the public key to hosts/NAME; stdin is /dev/null, so no questions.
    cmd::host_run(&["tincd", "-c", &dir.to_string_lossy(), "-K2048"])
        .with_context(|| format!("generating tinc keys for {name}"))?;
    Ok(())
}

fn fastd_keys() -> Result<(String, String)> {
    let out = cmd::host_run(&["fastd", "--generate-key"])?;
    let get = |label: &str| {
        out.lines()
            .find_map(|l| l.strip_prefix(label))
            .map(|k| k.trim().to_owned())
            .with_context(|| format!("no {label:?} in `fastd --generate-key` output: {out}"))
    };
    Ok((get("Secret:")?, get("Public:")?))
}

#[allow(clippy::too_many_arguments)]
fn fastd_config(
    ifname: &str,
    method: &str,
    mtu: u32,
    bind_ip: &str,
    secret: &str,
    peer: &str,
    peer_key: &str,
    peer_ip: &str,
) -> String {
    format!(
        "interface \"{ifname}\";\nmode tap;\nmethod \"{method}\";\nbind {bind_ip}:{FASTD_PORT};\n\
         secret \"{secret}\";\nmtu {mtu};\npeer \"{peer}\" {{\n  key \"{peer_key}\";\n  \
         remote {peer_ip}:{FASTD_PORT};\n}}\n"
    )
}

impl TapMesh {
    /// Builds the mesh with TAP MTU `mtu` on both sides and waits until a ping crosses it.
    fn new(daemon: Daemon, mtu: u32, ifname: &str) -> Result<TapMesh> {
        let pair = PairTopology::new(UNDERLAY_MTU as u32)?;
        let dir = tempfile::Builder::new()
            .prefix("ndlab-tapmesh-")
            .tempdir()
            .context("creating the daemons' config dir")?;
        let mut mesh = TapMesh {
            daemons: Vec::new(),
            pair,
            dir,
            ifname: ifname.to_owned(),
            daemon,
        };
        let root = mesh.dir.path().to_owned();
        let sides = [
            ("a", "b", PairTopology::A_IP, PairTopology::B_IP, TUNNEL_A),
            ("b", "a", PairTopology::B_IP, PairTopology::A_IP, TUNNEL_B),
        ];
        let mut commands = Vec::new();
        match daemon {
            Daemon::Tinc => {
                for (name, other, ip, _, _) in sides {
                    tinc_node(&root.join(name), name, other, ip, ifname)?;
                }
                // Each side needs the other's host file (address + public key).
                for (name, other, _, _, _) in sides {
                    let from = root.join(name).join("hosts").join(name);
                    let to = root.join(other).join("hosts").join(name);
                    std::fs::copy(&from, &to).with_context(|| {
                        format!("copying {} to {}", from.display(), to.display())
                    })?;
                }
                for (name, ..) in sides {
                    let dir = root.join(name);
                    let pidfile = dir.join("tinc.pid");
                    commands.push(vec![
                        "tincd".to_owned(),
                        "-c".to_owned(),
                        dir.to_string_lossy().into_owned(),
                        "-D".to_owned(),
                        "-d1".to_owned(),
                        format!("--pidfile={}", pidfile.display()),
                    ]);
                }
            }
            Daemon::Fastd(method) => {
                let keys = [fastd_keys()?, fastd_keys()?];
                for (i, (name, other, ip, peer_ip, _)) in sides.into_iter().enumerate() {
                    let conf = root.join(format!("{name}.conf"));
                    write(
                        &conf,
                        &fastd_config(
                            ifname,
                            method,
                            mtu,
                            ip,
                            &keys[i].0,
                            other,
                            &keys[1 - i].1,
                            peer_ip,
                        ),
                    )?;
                    commands.push(vec![
                        "fastd".to_owned(),
                        "-c".to_owned(),
                        conf.to_string_lossy().into_owned(),
                        "--log-level".to_owned(),
                        "verbose".to_owned(),
                    ]);
                }
            }
        }
        for ((name, _, _, _, tunnel_ip), argv) in sides.into_iter().zip(commands) {
            let ns = if name == "a" {
                &mesh.pair.a
            } else {
                &mesh.pair.b
            };
            let (program, args) = argv.split_first().context("empty daemon command")?;
            let command = ns.command(program, args);
            let mut process = ns.spawn_command(&format!("{program} {name}"), command)?;
            wait_for_link(ns, ifname, &mut process, Duration::from_secs(10))?;
            mesh.daemons.push(process);
            ns.set_mtu(ifname, mtu)?;
            ns.add_addr(ifname, &format!("{tunnel_ip}/24"))?;
            ns.set_up(ifname)?;
        }
        traffic::wait_for_ping(&mesh.pair.a, TUNNEL_B, Duration::from_secs(20)).with_context(
            || {
                format!(
                    "no ping across the {daemon:?} mesh; daemon logs: {}",
                    mesh.logs()
                )
            },
        )?;
        Ok(mesh)
    }

    /// Everything the daemons logged, for error messages.
    fn logs(&self) -> String {
        self.daemons
            .iter()
            .map(|d| {
                format!(
                    "\n--- {}:\n{}{}",
                    d.label(),
                    d.stdout().unwrap_or_default().trim(),
                    d.stderr().unwrap_or_default().trim()
                )
            })
            .collect()
    }

    /// The endpoint `a` should learn: `b`'s underlay address and the daemon's port.
    fn b_endpoint(&self) -> String {
        format!("{}:{}", PairTopology::B_IP, self.daemon.port())
    }

    /// Runs `netdoctor diagnose IFACE` on side `a` while iperf3 sends from `a` to `b`
    /// through the tunnel, with the outer packet sizes counted on `b`'s underlay.
    fn diagnose_under_load(&self) -> Result<(Diagnosis, Iperf3Report, WireCount)> {
        let wire = WireSizes::install(&self.pair.b, PairTopology::A_IP, self.daemon.port())?;
        let _server = Iperf3Server::start(&self.pair.b, 5201)?;
        let (d, report) = std::thread::scope(|s| -> Result<(Diagnosis, Iperf3Report)> {
            let client = s.spawn(|| {
                let mut opts = Iperf3Opts::new(TUNNEL_B);
                opts.duration_secs = LOAD_SECS;
                traffic::iperf3_client(&self.pair.a, &opts)
            });
            std::thread::sleep(Duration::from_millis(500));
            let d = diagnose(&self.pair.a, &self.ifname, WINDOW, &[]);
            let report = join(client, "iperf3 through the tunnel");
            Ok((d?, report?))
        })?;
        let sizes = wire.read()?;
        println!(
            "{:?} mesh {} at MTU {}: iperf3 {:.0} Mbit/s, {} retransmits; on the wire {}",
            self.daemon,
            self.ifname,
            d.i64("/facts/iface/mtu")?,
            report.received_bits_per_second / 1e6,
            report.retransmits.unwrap_or(0),
            sizes.describe()
        );
        Ok((d, report, sizes))
    }
}

/// Outer packet sizes of the tunnel's UDP datagrams from one sender, counted by nft on the
/// receiver's underlay ingress (netdev family, before anything else touches them).
#[derive(Debug)]
struct WireSizes<'a> {
    ns: &'a Netns,
}

/// What [`WireSizes`] counted.
#[derive(Debug, Clone, Default)]
struct WireCount {
    /// Unfragmented datagrams per outer IP length (only lengths >= [`WIRE_MIN_LEN`]).
    by_len: BTreeMap<i64, u64>,
    /// IP fragments (first and later) from the sender.
    fragments: u64,
}

const WIRE_TABLE: &str = "ndwire";
const WIRE_CHAIN: &str = "in_eth0";
const WIRE_MIN_LEN: i64 = 1301;

impl<'a> WireSizes<'a> {
    fn install(ns: &'a Netns, from: &str, port: u16) -> Result<WireSizes<'a>> {
        let mut script = format!(
            "table netdev {WIRE_TABLE} {{\n chain {WIRE_CHAIN} {{\n  type filter hook ingress \
             device \"{}\" priority -10; policy accept;\n  ip saddr {from} ip frag-off & 0x3fff != 0 counter\n",
            PairTopology::IFNAME
        );
        for len in WIRE_MIN_LEN..=UNDERLAY_MTU {
            script.push_str(&format!(
                "  ip saddr {from} ip frag-off & 0x3fff == 0 udp dport {port} ip length {len} counter\n"
            ));
        }
        script.push_str(" }\n}\n");
        let file = tempfile::Builder::new()
            .prefix("ndlab-wire-")
            .suffix(".nft")
            .tempfile()
            .context("creating nft script")?;
        write(file.path(), &script)?;
        ns.run(&["nft", "-f", &file.path().to_string_lossy()])
            .context("installing the wire-size counters")?;
        Ok(WireSizes { ns })
    }

    fn read(&self) -> Result<WireCount> {
        let out = self.ns.run(&[
            "nft", "-j", "list", "chain", "netdev", WIRE_TABLE, WIRE_CHAIN,
        ])?;
        let v: Value = serde_json::from_str(&out).context("parsing `nft -j list chain`")?;
        let mut count = WireCount::default();
        let rules = v
            .get("nftables")
            .and_then(Value::as_array)
            .context("nft JSON without `nftables`")?
            .iter()
            .filter_map(|o| o.get("rule")?.get("expr")?.as_array());
        for expr in rules {
            let packets = expr
                .iter()
                .find_map(|e| e.get("counter")?.get("packets")?.as_u64())
                .context("wire rule without counter")?;
            let len = expr.iter().find_map(|e| {
                let m = e.get("match")?;
                (m.pointer("/left/payload/field")?.as_str()? == "length")
                    .then(|| m.get("right")?.as_i64())
                    .flatten()
            });
            match len {
                Some(len) => {
                    count.by_len.insert(len, packets);
                }
                None => count.fragments += packets,
            }
        }
        ensure!(
            count.by_len.len() == (UNDERLAY_MTU - WIRE_MIN_LEN + 1) as usize,
            "expected one counter per length, got {}",
            count.by_len.len()
        );
        Ok(count)
    }
}

impl WireCount {
    /// The outer IP length of most datagrams: the full-size packets of a bulk transfer
    /// (tinc's PMTU probes come in other sizes, a few at a time).
    fn dominant_outer(&self) -> Option<i64> {
        self.by_len
            .iter()
            .filter(|(_, &n)| n > 0)
            .max_by_key(|(_, &n)| n)
            .map(|(&len, _)| len)
    }

    fn describe(&self) -> String {
        let top: Vec<String> = self
            .by_len
            .iter()
            .rev()
            .filter(|(_, &n)| n > 0)
            .take(4)
            .map(|(len, n)| format!("{n}x{len}"))
            .collect();
        format!(
            "largest unfragmented outer datagrams {} (IP bytes), {} fragments",
            if top.is_empty() {
                "none".to_owned()
            } else {
                top.join(", ")
            },
            self.fragments
        )
    }
}

/// netdoctor recognised the daemon, its port, learnt the endpoint from the traffic and
/// picked the right underlay.
fn assert_identified(d: &Diagnosis, mesh: &TapMesh) -> Result<()> {
    let daemon = mesh.daemon;
    let ctx = || d.describe();
    ensure!(
        d.str("/kind")? == "tap",
        "kind {} is not tap: {}",
        d.str("/kind")?,
        ctx()
    );
    ensure!(
        d.bool("/facts/tunnel/present")?,
        "tunnel not recognised: {}",
        ctx()
    );
    ensure!(
        d.str("/facts/tunnel/kind")? == daemon.kind(),
        "tunnel kind {:?}, expected {:?}: {}",
        d.str("/facts/tunnel/kind")?,
        daemon.kind(),
        ctx()
    );
    ensure!(
        d.str("/facts/tunnel/daemon")? == daemon.command(),
        "daemon {:?}, expected {:?}: {}",
        d.str("/facts/tunnel/daemon")?,
        daemon.command(),
        ctx()
    );
    ensure!(
        d.i64("/facts/tunnel/port")? == i64::from(daemon.port()),
        "port {}, expected {}: {}",
        d.i64("/facts/tunnel/port")?,
        daemon.port(),
        ctx()
    );
    let endpoints: Vec<&str> = d
        .at("/facts/tunnel/endpoints")?
        .as_array()
        .context("endpoints is not an array")?
        .iter()
        .filter_map(Value::as_str)
        .collect();
    ensure!(
        endpoints == [mesh.b_endpoint().as_str()],
        "endpoints learnt from the traffic {endpoints:?}, expected [{}]: {}",
        mesh.b_endpoint(),
        ctx()
    );
    ensure!(
        d.str("/facts/tunnel/underlay_iface")? == PairTopology::IFNAME,
        "underlay {:?}, expected {}: {}",
        d.str("/facts/tunnel/underlay_iface")?,
        PairTopology::IFNAME,
        ctx()
    );
    ensure!(
        d.i64("/facts/tunnel/underlay_mtu")? == UNDERLAY_MTU,
        "underlay MTU {}, expected {UNDERLAY_MTU}: {}",
        d.i64("/facts/tunnel/underlay_mtu")?,
        ctx()
    );
    let peers = d.at("/facts/peers")?.as_array().context("peers")?;
    ensure!(
        peers
            .iter()
            .any(|p| p.get("endpoint").and_then(Value::as_str) == Some(&mesh.b_endpoint())),
        "no peer with endpoint {}: {}",
        mesh.b_endpoint(),
        ctx()
    );
    Ok(())
}

/// The oversized-MTU verdict: mtu.tunnel_exceeds_underlay, critical, whose fix sets the
/// largest fitting MTU computed from the underlay and the expected overhead. Returns that
/// MTU.
fn assert_exceeds(d: &Diagnosis, mesh: &TapMesh) -> Result<i64> {
    let f = d.finding("mtu.tunnel_exceeds_underlay")?;
    ensure!(
        f.get("severity").and_then(Value::as_str) == Some("critical"),
        "severity of {f}"
    );
    let overhead = d.i64("/facts/tunnel/overhead_expected")?;
    let underlay = d.i64("/facts/tunnel/effective_underlay_mtu")?;
    let max_mtu = d.i64("/facts/tunnel/max_mtu")?;
    ensure!(
        underlay == UNDERLAY_MTU && max_mtu == underlay - overhead && max_mtu < UNDERLAY_MTU,
        "max_mtu {max_mtu} is not the underlay {underlay} minus the overhead {overhead}: {}",
        d.describe()
    );
    let fix = f.get("fix").and_then(Value::as_str).unwrap_or_default();
    ensure!(
        fix.contains(&mtu_fix(&mesh.ifname, max_mtu)),
        "fix {fix:?} does not set {} to {max_mtu}",
        mesh.ifname
    );
    Ok(max_mtu)
}

/// Full-size inner packets crossed the underlay as single datagrams: the MTU fits.
fn assert_fits_on_the_wire(d: &Diagnosis, wire: &WireCount, mtu: i64) -> Result<i64> {
    ensure!(
        wire.fragments == 0,
        "{} fragments on the underlay at MTU {mtu}: {}",
        wire.fragments,
        wire.describe()
    );
    let inner = d.i64("/facts/traffic/max_segment_out")?;
    ensure!(
        inner == mtu,
        "largest inner packet {inner}, expected full-size {mtu} packets: {}",
        d.describe()
    );
    let outer = wire
        .dominant_outer()
        .with_context(|| format!("no tunnel datagram on the wire: {}", wire.describe()))?;
    ensure!(
        wire.by_len.get(&outer).copied().unwrap_or(0) >= 100,
        "too few full-size datagrams to measure: {}",
        wire.describe()
    );
    Ok(outer - mtu)
}

// ---------------------------------------------------------------------------------------
// tinc
// ---------------------------------------------------------------------------------------

#[test]
fn tinc_tap_mesh_is_identified_and_oversized_mtu_flagged() -> Result<()> {
    if !ci::lab_ready(TINC_TOOLS) {
        return Ok(());
    }
    let mesh = TapMesh::new(Daemon::Tinc, 1500, &unique_ifname())?;
    let (d, report, wire) = mesh.diagnose_under_load()?;
    ensure!(
        report.received_bytes > 0,
        "nothing crossed the tinc mesh: {}",
        mesh.logs()
    );
    assert_identified(&d, &mesh)?;
    let max_mtu = assert_exceeds(&d, &mesh)?;
    // tinc answers oversized DF packets with its own ICMP frag-needed (its PMTU), so the
    // bulk connection's path MTU shrank to what tinc fits: netdoctor's advice must fit too.
    let bulk = d.bulk_flow()?;
    let fitted = bulk
        .get("pmtu")
        .and_then(Value::as_i64)
        .context("flow pmtu")?;
    println!(
        "tinc at MTU 1500: netdoctor expects {} bytes of overhead, advises MTU {max_mtu}; \
         the bulk connection's path MTU settled at {fitted} (tinc's own ICMP); {}",
        d.i64("/facts/tunnel/overhead_expected")?,
        wire.describe()
    );
    ensure!(
        fitted < UNDERLAY_MTU && max_mtu <= fitted,
        "advised MTU {max_mtu} vs the path MTU {fitted} tinc reported: {}",
        d.describe()
    );
    Ok(())
}

#[test]
fn tinc_tap_mesh_at_fitting_mtu_has_no_mtu_finding() -> Result<()> {
    if !ci::lab_ready(TINC_TOOLS) {
        return Ok(());
    }
    let mtu = 1400;
    let mesh = TapMesh::new(Daemon::Tinc, mtu, &unique_ifname())?;
    let (d, _, wire) = mesh.diagnose_under_load()?;
    assert_identified(&d, &mesh)?;
    d.assert_none_of(MTU_FINDINGS)?;
    let on_wire = assert_fits_on_the_wire(&d, &wire, i64::from(mtu))?;
    let measured = d.i64("/facts/tunnel/overhead_measured")?;
    println!(
        "tinc at MTU {mtu}: {on_wire} bytes of overhead on the wire, netdoctor measured \
         {measured}, expects {}",
        d.i64("/facts/tunnel/overhead_expected")?
    );
    Ok(())
}

/// tinc sends PMTU probes, UDP datagrams on its port up to the path's limit, whatever the
/// TAP MTU: they are not encapsulated packets and must not count as the measured overhead
/// (outer minus inner full-size packet). The data plane cannot tell them from data on the
/// same flow, so netdoctor does not measure tinc's overhead (-1, "unknown"); what it must
/// never do is report the probes' inflated figure.
#[test]
fn tinc_measured_overhead_is_not_inflated_by_pmtu_probes() -> Result<()> {
    if !ci::lab_ready(TINC_TOOLS) {
        return Ok(());
    }
    let mtu = 1400;
    let mesh = TapMesh::new(Daemon::Tinc, mtu, &unique_ifname())?;
    let (d, _, wire) = mesh.diagnose_under_load()?;
    let on_wire = assert_fits_on_the_wire(&d, &wire, i64::from(mtu))?;
    let measured = d.i64("/facts/tunnel/overhead_measured")?;
    println!(
        "tinc at MTU {mtu}: full-size packets carry {on_wire} bytes of overhead on the wire \
         ({}); netdoctor measured {measured}",
        wire.describe()
    );
    ensure!(
        measured == on_wire || measured == -1,
        "netdoctor's measured overhead {measured} is neither the wire's {on_wire} for \
         full-size {mtu}-byte packets nor -1 (not measured); tinc's PMTU probes on the wire: \
         {}: {}",
        wire.describe(),
        d.describe()
    );
    Ok(())
}

/// Asks tinc how large an inner packet it carries: tinc answers a DF packet above its
/// path MTU with an ICMP frag-needed naming it. Its PMTU discovery refines the figure for
/// a few seconds (1443, 1440, 1437 here): wait until it has not changed for 5 s.
fn tinc_reported_mtu(ns: &Netns, ifname: &str) -> Result<i64> {
    let deadline = Instant::now() + Duration::from_secs(40);
    let mut last: Option<(i64, Instant)> = None;
    let size = (UNDERLAY_MTU - 28).to_string();
    loop {
        ns.ip(&["route", "flush", "cache"])?;
        let out = ns.output(&[
            "ping", "-n", "-c", "1", "-W", "1", "-M", "do", "-s", &size, TUNNEL_B,
        ])?;
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        // "Frag needed and DF set (mtu = 1437)" or "local error: message too long, mtu=1437"
        let mtu = text.split("mtu").nth(1).and_then(|rest| {
            rest.trim_start_matches([' ', '='])
                .split(|c: char| !c.is_ascii_digit())
                .next()?
                .parse::<i64>()
                .ok()
        });
        match (mtu, last) {
            (Some(m), Some((prev, since))) if m == prev => {
                if m < UNDERLAY_MTU && since.elapsed() >= Duration::from_secs(5) {
                    return Ok(m);
                }
            }
            (Some(m), _) => last = Some((m, Instant::now())),
            (None, _) => last = None,
        }
        if Instant::now() >= deadline {
            bail!("tinc reported no stable MTU on {ifname} within 40 s; last ping: {text}");
        }
        std::thread::sleep(Duration::from_millis(700));
    }
}

/// The installed tinc's largest fitting MTU, measured: the size tinc's PMTU discovery
/// settles on, checked on the wire (full-size packets cross as single datagrams). At that
/// MTU the tunnel fits, so netdoctor must not call it oversized, and its expected overhead
/// must agree with the wire's (within one 16-byte cipher block of padding).
#[test]
fn tinc_at_the_largest_mtu_that_fits_is_not_flagged() -> Result<()> {
    if !ci::lab_ready(TINC_TOOLS) {
        return Ok(());
    }
    let version = cmd::host_run(&["tincd", "--version"])?;
    let version = version.lines().next().unwrap_or_default().trim().to_owned();
    let mesh = TapMesh::new(Daemon::Tinc, 1500, &unique_ifname())?;
    let fits = tinc_reported_mtu(&mesh.pair.a, &mesh.ifname)?;
    for ns in [&mesh.pair.a, &mesh.pair.b] {
        ns.set_mtu(&mesh.ifname, fits as u32)?;
        ns.ip(&["route", "flush", "cache"])?;
    }
    let (d, _, wire) = mesh.diagnose_under_load()?;
    assert_identified(&d, &mesh)?;
    let on_wire = assert_fits_on_the_wire(&d, &wire, fits)?;
    let expected = d.i64("/facts/tunnel/overhead_expected")?;
    let max_mtu = d.i64("/facts/tunnel/max_mtu")?;
    println!(
        "{version}: largest fitting TAP MTU on a {UNDERLAY_MTU} underlay {fits} \
         ({on_wire} bytes of overhead on the wire at that size, {} bytes of budget); \
         netdoctor expects {expected} bytes of overhead and advises {max_mtu}",
        UNDERLAY_MTU - fits
    );
    let mut problems = Vec::new();
    if !d.all("mtu.tunnel_exceeds_underlay").is_empty() {
        problems.push(format!(
            "mtu.tunnel_exceeds_underlay raised at MTU {fits}, which fits the underlay \
             ({on_wire}-byte overhead on the wire, no fragments)"
        ));
    }
    if !(0..=15).contains(&(expected - on_wire)) {
        problems.push(format!(
            "overhead_expected {expected} for {version} vs {on_wire} on the wire (at most 15 \
             bytes of CBC padding more are possible)"
        ));
    }
    if !(fits - 15..=fits).contains(&max_mtu) {
        problems.push(format!(
            "max_mtu {max_mtu}, the largest MTU that fits is {fits}"
        ));
    }
    ensure!(
        problems.is_empty(),
        "{}: {}",
        problems.join("; "),
        d.describe()
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------
// fastd
// ---------------------------------------------------------------------------------------

const FASTD_METHOD: &str = "salsa2012+umac";
/// fastd's documented overhead in TAP mode over IPv4: 28 + 24 + 14 (manual, mtu.rst).
const FASTD_TAP_OVERHEAD: i64 = 66;

#[test]
fn fastd_tap_mesh_is_identified_and_oversized_mtu_flagged() -> Result<()> {
    if !ci::lab_ready(FASTD_TOOLS) {
        return Ok(());
    }
    let mesh = TapMesh::new(Daemon::Fastd(FASTD_METHOD), 1500, &unique_ifname())?;
    let (d, report, wire) = mesh.diagnose_under_load()?;
    ensure!(
        report.received_bytes > 0,
        "nothing crossed the fastd mesh: {}",
        mesh.logs()
    );
    assert_identified(&d, &mesh)?;
    let max_mtu = assert_exceeds(&d, &mesh)?;
    ensure!(
        max_mtu == UNDERLAY_MTU - FASTD_TAP_OVERHEAD,
        "max_mtu {max_mtu}, fastd TAP fits {}: {}",
        UNDERLAY_MTU - FASTD_TAP_OVERHEAD,
        d.describe()
    );
    // fastd leaves DF off: its oversized datagrams are fragmented on the underlay, and
    // netdoctor's fragment count must say so as the wire does.
    let fragments = d.i64("/facts/tunnel/underlay_fragments")?;
    ensure!(
        wire.fragments > 0 && fragments > 0,
        "fragments: wire {}, netdoctor {fragments}: {}",
        wire.fragments,
        d.describe()
    );
    d.finding("mtu.underlay_fragmentation")?;
    Ok(())
}

#[test]
fn fastd_tap_mesh_at_fitting_mtu_has_no_mtu_finding() -> Result<()> {
    if !ci::lab_ready(FASTD_TOOLS) {
        return Ok(());
    }
    let mtu = (UNDERLAY_MTU - FASTD_TAP_OVERHEAD) as u32;
    let mesh = TapMesh::new(Daemon::Fastd(FASTD_METHOD), mtu, &unique_ifname())?;
    let (d, _, wire) = mesh.diagnose_under_load()?;
    assert_identified(&d, &mesh)?;
    d.assert_none_of(MTU_FINDINGS)?;
    let on_wire = assert_fits_on_the_wire(&d, &wire, i64::from(mtu))?;
    let measured = d.i64("/facts/tunnel/overhead_measured")?;
    let expected = d.i64("/facts/tunnel/overhead_expected")?;
    println!(
        "fastd {FASTD_METHOD} TAP at MTU {mtu}: {on_wire} bytes of overhead on the wire, \
         netdoctor measured {measured}, expects {expected}"
    );
    ensure!(
        on_wire == FASTD_TAP_OVERHEAD && measured == on_wire && expected == on_wire,
        "overhead: wire {on_wire}, netdoctor measured {measured}, expected {expected}: {}",
        d.describe()
    );
    Ok(())
}

/// fastd's `null` method adds 1 byte, not 24 (fastd manual, mtu.rst; notes): a TAP mesh
/// at 1500 - 28 - 1 - 14 = 1457 fits, and netdoctor must not call it oversized.
#[test]
fn fastd_null_at_the_largest_mtu_that_fits_is_not_flagged() -> Result<()> {
    if !ci::lab_ready(FASTD_TOOLS) {
        return Ok(());
    }
    let mtu = UNDERLAY_MTU - 28 - 1 - 14;
    let mesh = TapMesh::new(Daemon::Fastd("null"), mtu as u32, &unique_ifname())?;
    let (d, _, wire) = mesh.diagnose_under_load()?;
    assert_identified(&d, &mesh)?;
    let on_wire = assert_fits_on_the_wire(&d, &wire, mtu)?;
    ensure!(
        on_wire + mtu == UNDERLAY_MTU,
        "fastd null at MTU {mtu}: {on_wire} bytes of overhead on the wire ({})",
        wire.describe()
    );
    let expected = d.i64("/facts/tunnel/overhead_expected")?;
    println!(
        "fastd null TAP at MTU {mtu}: {on_wire} bytes of overhead on the wire; netdoctor \
         expects {expected}, advises {}",
        d.i64("/facts/tunnel/max_mtu")?
    );
    d.assert_none_of(&["mtu.tunnel_exceeds_underlay"])
        .with_context(|| format!("fastd null fits at MTU {mtu} ({on_wire} bytes of overhead on the wire), netdoctor expects {expected}"))?;
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Identification across namespaces
// ---------------------------------------------------------------------------------------

/// Two meshes in different namespaces whose TAP devices have the same name (every
/// container may have its `tap0`): diagnosing the tinc one must report tincd, not the
/// fastd started earlier in other namespaces.
#[test]
fn tap_owner_is_looked_up_in_the_interface_namespace() -> Result<()> {
    if !ci::lab_ready(BOTH_TOOLS) {
        return Ok(());
    }
    let ifname = unique_ifname();
    let other = TapMesh::new(Daemon::Fastd(FASTD_METHOD), 1400, &ifname)?;
    let mesh = TapMesh::new(Daemon::Tinc, 1400, &ifname)?;
    let d = diagnose(&mesh.pair.a, &ifname, "1s", &["--no-probe"])?;
    let (daemon, port) = (d.str("/facts/tunnel/daemon")?, d.i64("/facts/tunnel/port")?);
    ensure!(
        daemon == "tincd" && port == i64::from(TINC_PORT) && d.str("/facts/tunnel/kind")? == "tinc",
        "{ifname} in {} is served by tincd (port {TINC_PORT}), but netdoctor reports daemon \
         {daemon:?} port {port} (fastd serves another {ifname} in {}): {}",
        mesh.pair.a.name(),
        other.pair.a.name(),
        d.describe()
    );
    drop(other);
    Ok(())
}

// ---------------------------------------------------------------------------
// The agent learns a mesh daemon's port while running.
// ---------------------------------------------------------------------------

/// fastd is recognised on the wire by its UDP port only. `diagnose` tells the data plane
/// the port before loading it; the long-running agent, loaded before any mesh existed,
/// must add it when it finds the daemon, and from then on label the underlay's flows.
#[test]
fn agent_learns_a_fastd_port_while_running() -> Result<()> {
    if !ci::lab_ready(FASTD_TOOLS) {
        return Ok(());
    }
    let mesh = TapMesh::new(Daemon::Fastd(FASTD_METHOD), 1400, &unique_ifname())?;
    let agent = netdoctor_lab::agent::Agent::start(&mesh.pair.a, &["--no-probe"])?;
    let _server = Iperf3Server::start(&mesh.pair.b, 5201)?;
    let mut opts = Iperf3Opts::new(TUNNEL_B);
    opts.duration_secs = 6;
    std::thread::scope(|s| -> Result<()> {
        let client = s.spawn(|| traffic::iperf3_client(&mesh.pair.a, &opts));
        agent.poll(
            &format!("/api/v1/interfaces/{}", mesh.ifname),
            Duration::from_secs(15),
            "the TAP interface identified as fastd",
            |r| (r.json["facts"]["tunnel"]["kind"] == "fastd").then_some(()),
        )?;
        let flow = agent.poll(
            &format!(
                "/api/v1/flows?interface={}&limit=1000",
                PairTopology::IFNAME
            ),
            Duration::from_secs(15),
            "an underlay flow labelled fastd",
            |r| {
                r.json["items"].as_array()?.iter().find_map(|f| {
                    (f["encap"] == "fastd" && f["packets"].as_u64() > Some(0)).then(|| f.clone())
                })
            },
        )?;
        ensure!(
            flow["src_port"] == FASTD_PORT || flow["dst_port"] == FASTD_PORT,
            "a fastd flow on another port: {flow}"
        );
        join(client, "iperf3 through the mesh")?;
        Ok(())
    })
}

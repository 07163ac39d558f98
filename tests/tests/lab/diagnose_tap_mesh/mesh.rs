//! The TAP mesh: which daemon serves it, two namespaces with the daemons running between
//! them, and a diagnosis of one side under load.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use anyhow::{Context, Result};
use netdoctor_lab::{traffic, BgProcess, Iperf3Opts, Iperf3Report, Iperf3Server, PairTopology};

use crate::common_mesh::{diagnose, join, wait_for_link, Diagnosis};
use crate::diagnose_tap_mesh::config::{
    fastd_config, fastd_keys, tinc_node, vpncloud_config, write, FASTD_PORT, LOAD_SECS, TINC_PORT,
    TUNNEL_A, TUNNEL_B, UNDERLAY_MTU, VPNCLOUD_PORT, WINDOW,
};
use crate::diagnose_tap_mesh::wire::{WireCount, WireSizes};

/// The daemon serving the mesh.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Daemon {
    /// tincd, `Mode = switch`.
    Tinc,
    /// fastd, `mode tap`, with this method.
    Fastd(&'static str),
    /// VpnCloud 2.3.0, `type: tap`, allowing these algorithms (empty: its defaults).
    VpnCloud(&'static [&'static str]),
}

impl Daemon {
    pub(crate) fn port(self) -> u16 {
        match self {
            Daemon::Tinc => TINC_PORT,
            Daemon::Fastd(_) => FASTD_PORT,
            Daemon::VpnCloud(_) => VPNCLOUD_PORT,
        }
    }

    /// `facts.tunnel.kind`.
    pub(crate) fn kind(self) -> &'static str {
        match self {
            Daemon::Tinc => "tinc",
            Daemon::Fastd(_) => "fastd",
            Daemon::VpnCloud(_) => "vpncloud",
        }
    }

    /// `facts.tunnel.daemon` (the command name in /proc/PID/comm).
    pub(crate) fn command(self) -> &'static str {
        match self {
            Daemon::Tinc => "tincd",
            Daemon::Fastd(_) => "fastd",
            Daemon::VpnCloud(_) => "vpncloud",
        }
    }
}

static IFNAME_COUNTER: AtomicU32 = AtomicU32::new(0);

/// A TAP interface name unique on the machine (netdoctor looks TAP owners up in /proc,
/// which lists the daemons of every namespace).
pub(crate) fn unique_ifname() -> String {
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
pub(crate) struct TapMesh {
    daemons: Vec<BgProcess>,
    pub(crate) pair: PairTopology,
    dir: tempfile::TempDir,
    pub(crate) ifname: String,
    pub(crate) daemon: Daemon,
}

impl TapMesh {
    /// Builds the mesh with TAP MTU `mtu` on both sides and waits until a ping crosses it.
    pub(crate) fn new(daemon: Daemon, mtu: u32, ifname: &str) -> Result<TapMesh> {
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
            Daemon::VpnCloud(algorithms) => {
                let binary = netdoctor_lab::vpncloud::binary()?;
                // VpnCloud learns its own address by connecting a UDP socket to 8.8.8.8 and
                // exits without a route there (src/net.rs get_ip). A link route, not a
                // default route nor a gateway: with one of those it would also set the TAP
                // MTU itself (the default device's minus its overhead), racing the mesh's.
                for ns in [&mesh.pair.a, &mesh.pair.b] {
                    ns.ip(&["route", "add", "8.8.8.8/32", "dev", PairTopology::IFNAME])?;
                }
                for (name, _, _, peer_ip, _) in sides {
                    let conf = root.join(format!("{name}.net"));
                    write(&conf, &vpncloud_config(ifname, peer_ip, algorithms))?;
                    commands.push(vec![
                        binary.to_string_lossy().into_owned(),
                        "--config".to_owned(),
                        conf.to_string_lossy().into_owned(),
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
        // A daemon that sets its own MTU (VpnCloud: the default route's device's, minus
        // its overhead) must not have overridden the mesh's.
        for ns in [&mesh.pair.a, &mesh.pair.b] {
            let now = ns.mtu(ifname)?;
            anyhow::ensure!(
                now == mtu,
                "{ifname} in {} has MTU {now}, not {mtu}",
                ns.name()
            );
        }
        Ok(mesh)
    }

    /// Process id of side `a`'s daemon.
    pub(crate) fn a_pid(&self) -> Option<u32> {
        self.daemons.first().map(BgProcess::pid)
    }

    /// Everything the daemons logged, for error messages.
    pub(crate) fn logs(&self) -> String {
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
    pub(crate) fn b_endpoint(&self) -> String {
        format!("{}:{}", PairTopology::B_IP, self.daemon.port())
    }

    /// Runs `netdoctor diagnose IFACE` on side `a` while iperf3 sends from `a` to `b`
    /// through the tunnel, with the outer packet sizes counted on `b`'s underlay.
    pub(crate) fn diagnose_under_load(&self) -> Result<(Diagnosis, Iperf3Report, WireCount)> {
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

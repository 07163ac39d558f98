//! Userspace WireGuard (`wireguard-go` + `wg`) inside namespaces.
//!
//! Each interface gets a name `ndwg<pid><n>` that is unique machine-wide,
//! because wireguard-go's UAPI socket `/run/wireguard/NAME.sock` is shared by
//! all namespaces. wireguard-go runs in the foreground
//! (`WG_PROCESS_FOREGROUND=1`) inside its namespace, so its TUN device is
//! created there; it is stopped and its socket removed on `Drop`.
//!
//! ```no_run
//! use netdoctor_lab::{PairTopology, WgConfig, WgTunnel};
//! # fn main() -> anyhow::Result<()> {
//! let pair = PairTopology::new(1500)?;
//! let wg = WgTunnel::new(&pair.a, PairTopology::A_IP, &pair.b, PairTopology::B_IP, &WgConfig::default())?;
//! // traffic from pair.a to wg.b.ip() now goes through the tunnel
//! # Ok(())
//! # }
//! ```

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::cmd::{self, BgProcess};
use crate::ids;
use crate::netns::{Netns, WG_SOCKET_DIR};
use crate::traffic;

/// Prefix of generated WireGuard interface names.
pub(crate) const IFNAME_PREFIX: &str = "ndwg";

/// Parameters of a [`WgTunnel`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WgConfig {
    /// MTU of both wg interfaces (default 1420).
    pub mtu: u32,
    /// Tunnel address of side `a`, CIDR (default `10.250.0.1/24`).
    pub a_addr: String,
    /// Tunnel address of side `b`, CIDR (default `10.250.0.2/24`).
    pub b_addr: String,
    /// UDP listen port on both sides (default 51820; namespaces differ).
    pub listen_port: u16,
    /// `persistent-keepalive` seconds on both peers (default none).
    pub persistent_keepalive: Option<u16>,
    /// How long [`WgTunnel::new`] waits for a ping across the tunnel
    /// (default 10 s).
    pub handshake_timeout: Duration,
}

impl Default for WgConfig {
    fn default() -> Self {
        WgConfig {
            mtu: 1420,
            a_addr: "10.250.0.1/24".to_owned(),
            b_addr: "10.250.0.2/24".to_owned(),
            listen_port: 51820,
            persistent_keepalive: None,
            handshake_timeout: Duration::from_secs(10),
        }
    }
}

/// One wireguard-go interface running inside a namespace.
#[derive(Debug)]
pub struct WgInterface {
    ifname: String,
    netns: String,
    addr: String,
    listen_port: u16,
    private_key: String,
    public_key: String,
    process: BgProcess,
}

impl WgInterface {
    /// Starts wireguard-go for a new unique interface in `ns`, waits for its
    /// UAPI socket and TUN device, generates a key pair, then sets
    /// `listen-port`, the private key, address `addr` (CIDR), `mtu` and up.
    /// Peers are added with [`WgInterface::add_peer`].
    pub fn new(ns: &Netns, addr: &str, listen_port: u16, mtu: u32) -> Result<WgInterface> {
        let ifname = ids::ifname(IFNAME_PREFIX);
        let mut command = ns.command("wireguard-go", [&ifname]);
        command.env("WG_PROCESS_FOREGROUND", "1");
        let process = ns.spawn_command(&format!("wireguard-go {ifname}"), command)?;
        let private_key = cmd::host_run(&["wg", "genkey"])?.trim().to_owned();
        let mut wg = WgInterface {
            ifname,
            netns: ns.name().to_owned(),
            addr: addr.to_owned(),
            listen_port,
            private_key,
            public_key: String::new(),
            process,
        };
        wg.wait_ready(ns, Duration::from_secs(5))?;

        let mut key_file = tempfile::NamedTempFile::with_prefix("ndlab-wgkey-")
            .context("creating private key file")?;
        writeln!(key_file, "{}", wg.private_key).context("writing private key file")?;
        let key_path = key_file.path().to_string_lossy().into_owned();
        let port = listen_port.to_string();
        ns.run(&[
            "wg",
            "set",
            &wg.ifname,
            "listen-port",
            &port,
            "private-key",
            &key_path,
        ])
        .with_context(|| format!("configuring {}", wg.ifname))?;
        wg.public_key = ns
            .run(&["wg", "show", &wg.ifname, "public-key"])?
            .trim()
            .to_owned();
        ns.add_addr(&wg.ifname, addr)?;
        ns.set_mtu(&wg.ifname, mtu)?;
        ns.set_up(&wg.ifname)?;
        Ok(wg)
    }

    fn wait_ready(&mut self, ns: &Netns, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        let socket = self.socket_path();
        loop {
            if socket.exists()
                && ns
                    .output(&["ip", "link", "show", "dev", &self.ifname])
                    .map(|o| o.status.success())
                    .unwrap_or(false)
            {
                return Ok(());
            }
            if let Some(status) = self.process.try_status()? {
                bail!(
                    "wireguard-go {} exited ({status}): {}{}",
                    self.ifname,
                    self.process.stdout().unwrap_or_default().trim(),
                    self.process.stderr().unwrap_or_default().trim()
                );
            }
            if Instant::now() >= deadline {
                bail!(
                    "wireguard-go {} not ready after {timeout:?} (socket {} exists: {})",
                    self.ifname,
                    socket.display(),
                    socket.exists()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Adds (or updates) a peer: `wg set IF peer KEY [endpoint EP]
    /// allowed-ips IPS [persistent-keepalive N]`. `endpoint` is `ip:port`
    /// (or `[v6]:port`); `allowed_ips` is a comma-separated CIDR list.
    pub fn add_peer(
        &self,
        public_key: &str,
        endpoint: Option<&str>,
        allowed_ips: &str,
        persistent_keepalive: Option<u16>,
    ) -> Result<()> {
        let keepalive = persistent_keepalive.map(|k| k.to_string());
        let mut args = vec!["set", self.ifname.as_str(), "peer", public_key];
        if let Some(ep) = endpoint {
            args.extend(["endpoint", ep]);
        }
        args.extend(["allowed-ips", allowed_ips]);
        if let Some(k) = &keepalive {
            args.extend(["persistent-keepalive", k.as_str()]);
        }
        self.wg(&args)
            .with_context(|| format!("adding peer to {}", self.ifname))
            .map(drop)
    }

    /// Runs `wg ARGS...` (through the UAPI socket, from the host namespace)
    /// and returns stdout.
    pub fn wg(&self, args: &[&str]) -> Result<String> {
        let mut argv = vec!["wg"];
        argv.extend_from_slice(args);
        cmd::host_run(&argv)
    }

    /// `wg show IF` output.
    pub fn show(&self) -> Result<String> {
        self.wg(&["show", &self.ifname])
    }

    /// Latest handshake with any peer as Unix seconds; `None` if never.
    pub fn latest_handshake(&self) -> Result<Option<u64>> {
        let out = self.wg(&["show", &self.ifname, "latest-handshakes"])?;
        let latest = out
            .lines()
            .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
            .max()
            .unwrap_or(0);
        Ok((latest > 0).then_some(latest))
    }

    /// Interface name (`ndwg...`), valid inside [`WgInterface::netns_name`].
    pub fn ifname(&self) -> &str {
        &self.ifname
    }

    /// Name of the namespace the interface lives in.
    pub fn netns_name(&self) -> &str {
        &self.netns
    }

    /// Tunnel address in CIDR notation.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// Tunnel address without prefix length.
    pub fn ip(&self) -> &str {
        self.addr.split('/').next().unwrap_or(&self.addr)
    }

    /// UDP listen port.
    pub fn listen_port(&self) -> u16 {
        self.listen_port
    }

    /// Base64 public key.
    pub fn public_key(&self) -> &str {
        &self.public_key
    }

    /// Base64 private key.
    pub fn private_key(&self) -> &str {
        &self.private_key
    }

    /// UAPI socket path, `/run/wireguard/IF.sock`.
    pub fn socket_path(&self) -> PathBuf {
        Path::new(WG_SOCKET_DIR).join(format!("{}.sock", self.ifname))
    }

    /// Process id of the wireguard-go daemon.
    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// The wireguard-go process (e.g. to kill it and simulate a crash).
    pub fn process_mut(&mut self) -> &mut BgProcess {
        &mut self.process
    }
}

impl Drop for WgInterface {
    fn drop(&mut self) {
        if let Err(e) = self.process.stop() {
            eprintln!(
                "netdoctor-lab: stopping wireguard-go {}: {e:#}",
                self.ifname
            );
        }
        let socket = self.socket_path();
        if socket.exists() {
            if let Err(e) = std::fs::remove_file(&socket) {
                eprintln!("netdoctor-lab: removing {}: {e}", socket.display());
            }
        }
    }
}

/// Two [`WgInterface`]s peered with each other over an existing underlay.
#[derive(Debug)]
pub struct WgTunnel {
    /// Side `a`.
    pub a: WgInterface,
    /// Side `b`.
    pub b: WgInterface,
}

impl WgTunnel {
    /// Creates wg interfaces in `a` and `b`, peers them (endpoint = the
    /// other side's underlay address and listen port, allowed-ips = the
    /// other side's tunnel address /32 or /128) and waits until a ping from
    /// `a` to `b`'s tunnel address succeeds, i.e. the handshake completed.
    /// The underlay (e.g. [`crate::PairTopology`]) must already route
    /// `a_underlay_ip` <-> `b_underlay_ip`.
    pub fn new(
        a: &Netns,
        a_underlay_ip: &str,
        b: &Netns,
        b_underlay_ip: &str,
        config: &WgConfig,
    ) -> Result<WgTunnel> {
        let tunnel = WgTunnel {
            a: WgInterface::new(a, &config.a_addr, config.listen_port, config.mtu)?,
            b: WgInterface::new(b, &config.b_addr, config.listen_port, config.mtu)?,
        };
        let a_ep = endpoint(a_underlay_ip, config.listen_port);
        let b_ep = endpoint(b_underlay_ip, config.listen_port);
        tunnel.a.add_peer(
            tunnel.b.public_key(),
            Some(&b_ep),
            &host_prefix(tunnel.b.ip()),
            config.persistent_keepalive,
        )?;
        tunnel.b.add_peer(
            tunnel.a.public_key(),
            Some(&a_ep),
            &host_prefix(tunnel.a.ip()),
            config.persistent_keepalive,
        )?;
        traffic::wait_for_ping(a, tunnel.b.ip(), config.handshake_timeout).with_context(|| {
            format!(
                "no ping across wireguard {} -> {}; wg show: {}",
                tunnel.a.ifname(),
                tunnel.b.ifname(),
                tunnel.a.show().unwrap_or_default()
            )
        })?;
        Ok(tunnel)
    }

    /// Makes `a` forget `b` and learn it again (endpoint `b_underlay_ip`): a's next packet
    /// to b starts a fresh handshake (a initiates, b responds), as a rekey would, whose round
    /// trip a data plane on either underlay then times.
    pub fn renew_session(&self, b_underlay_ip: &str) -> Result<()> {
        let (a, b) = (&self.a, &self.b);
        a.wg(&["set", a.ifname(), "peer", b.public_key(), "remove"])?;
        a.add_peer(
            b.public_key(),
            Some(&endpoint(b_underlay_ip, b.listen_port())),
            &host_prefix(b.ip()),
            None,
        )
    }
}

/// A [`PairTopology`] with `underlay_mtu` on its veth, joined by a [`WgTunnel`] of
/// `wg_mtu` (other settings default). Keep the pair alive longer than the tunnel: declare
/// it first, or destructure the tuple in order.
pub fn wg_over_pair(underlay_mtu: u32, wg_mtu: u32) -> Result<(crate::PairTopology, WgTunnel)> {
    let pair = crate::PairTopology::new(underlay_mtu)?;
    let wg = WgTunnel::new(
        &pair.a,
        crate::PairTopology::A_IP,
        &pair.b,
        crate::PairTopology::B_IP,
        &WgConfig {
            mtu: wg_mtu,
            ..WgConfig::default()
        },
    )?;
    Ok((pair, wg))
}

fn endpoint(ip: &str, port: u16) -> String {
    if ip.contains(':') {
        format!("[{ip}]:{port}")
    } else {
        format!("{ip}:{port}")
    }
}

fn host_prefix(ip: &str) -> String {
    if ip.contains(':') {
        format!("{ip}/128")
    } else {
        format!("{ip}/32")
    }
}

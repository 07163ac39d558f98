//! A two-node Tailscale mesh in namespaces, controlled and relayed locally.
//!
//! ```text
//!  a: tailscaled ── eth0 10.200.1.1 ─┐               ┌─ 10.200.2.2 eth0 ── tailscaled: b
//!                                    router (forwards; can drop UDP between a and b)
//!  hub: tslab (control HTTP :8080, DERP HTTPS :443, STUN :3478) ── 10.200.3.2 eth0 ─┘
//! ```
//!
//! The binaries are built from `tests/tailscale` (tailscale.com pinned in its go.mod) by
//! `tests/tailscale/build`, once per machine (cached). Each node runs `tailscaled
//! --tun=<unique name> --statedir=… --socket=… --port=41641 --no-logs-no-support` and joins
//! with `tailscale up --login-server=http://10.200.3.2:8080 --accept-dns=false
//! --netfilter-mode=off`. With UDP between the nodes dropped from the start, every packet
//! between them is relayed by DERP; otherwise they find the direct path.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use base64::Engine;
use serde_json::Value;

use crate::cmd::{self, BgProcess};
use crate::netns::Netns;
use crate::veth::{create_veth, VethEnd};
use crate::{ci, ids, traffic};

/// Where the hub listens.
pub const HUB_IP: &str = "10.200.3.2";
/// The control server's URL (`tailscale up --login-server`).
pub const CONTROL_URL: &str = "http://10.200.3.2:8080";
/// The DERP server, as tailscaled's DERP map names it.
pub const DERP_SERVER: &str = "10.200.3.2:443";
/// The lab's DERP region code (tests/tailscale/main.go).
pub const DERP_REGION: &str = "lab";
/// tailscaled's UDP port on both nodes.
pub const PORT: u16 = 41641;
/// The nodes' underlay addresses.
pub const A_IP: &str = "10.200.1.1";
/// See [`A_IP`].
pub const B_IP: &str = "10.200.2.2";
/// Prefix of the TUN devices' names (cleaned up with the namespaces).
const IFNAME_PREFIX: &str = "ndts";
/// Joining, the first packet and the direct path each take a second or two; a loaded CI
/// machine needs more.
const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// How long both ends must keep a path before a test relies on it: tailscaled rebinds when
/// its own interface gets its addresses, which can come just after the first direct packet,
/// and then relays through DERP for a few seconds until disco finds the direct path again.
const PATH_STABLE: Duration = Duration::from_secs(3);

/// The lab's programs.
#[derive(Debug, Clone)]
pub struct Binaries {
    /// tailscaled.
    pub tailscaled: PathBuf,
    /// The tailscale CLI.
    pub tailscale: PathBuf,
    /// The hub (tests/tailscale/main.go).
    pub tslab: PathBuf,
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// The programs, built by `tests/tailscale/build` on first use in this process (a cached
/// build costs a hash; the first one on a machine about 4 minutes).
pub fn binaries() -> Result<Binaries> {
    static BUILT: OnceLock<std::result::Result<Binaries, String>> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let script = repo_root().join("tests/tailscale/build");
            let mut command = Command::new("bash");
            command.arg(&script);
            let dir = cmd::run_checked(&mut command, Duration::from_secs(1800))
                .map_err(|e| format!("{e:#}"))?;
            let dir = PathBuf::from(dir.trim());
            Ok(Binaries {
                tailscaled: dir.join("tailscaled"),
                tailscale: dir.join("tailscale"),
                tslab: dir.join("tslab"),
            })
        })
        .clone()
        .map_err(|e| anyhow::anyhow!("building the Tailscale lab: {e}"))
}

/// What the Tailscale lab needs besides root and BPF: Go to build tailscaled (skips
/// without it, fails under CI=true).
pub fn require_go_or_skip() -> bool {
    if ci::on_path("go") || Path::new("/usr/local/go/bin/go").exists() {
        true
    } else {
        ci::skip("the Tailscale lab builds tailscaled with Go (>= 1.26), which is not installed")
    }
}

/// One node: its namespace, tailscaled and what identifies it.
#[derive(Debug)]
pub struct Node {
    /// Its TUN device.
    pub ifname: String,
    /// tailscaled's LocalAPI socket.
    pub socket: PathBuf,
    /// Its underlay address.
    pub underlay_ip: &'static str,
    /// Its host name in the tailnet.
    pub host: &'static str,
    daemon: BgProcess,
    cli: PathBuf,
}

/// The mesh. Field order is drop order: daemons, then the hub, then the namespaces.
#[derive(Debug)]
pub struct TailscaleMesh {
    /// Node a (where netdoctor runs in the tests).
    pub a: Node,
    /// Node b.
    pub b: Node,
    hub_process: BgProcess,
    /// a's namespace.
    pub ns_a: Netns,
    /// b's namespace.
    pub ns_b: Netns,
    /// The router between a, b and the hub.
    pub router: Netns,
    /// The hub's namespace.
    pub hub: Netns,
    dir: tempfile::TempDir,
}

/// Drops UDP forwarded between the nodes' subnets (TCP to the hub still passes).
fn block_udp(router: &Netns) -> Result<()> {
    let script = "table inet ndts {\n chain block {\n  type filter hook forward priority 0; policy accept;\n  \
                  ip saddr 10.200.1.0/24 ip daddr 10.200.2.0/24 meta l4proto udp drop\n  \
                  ip saddr 10.200.2.0/24 ip daddr 10.200.1.0/24 meta l4proto udp drop\n }\n}\n";
    let mut command = router.command("nft", ["-f", "-"]);
    command.stdin(std::process::Stdio::piped());
    let mut child = command
        .stdout(std::process::Stdio::null())
        .spawn()
        .context("nft")?;
    std::io::Write::write_all(
        child.stdin.as_mut().context("nft's stdin")?,
        script.as_bytes(),
    )?;
    drop(child.stdin.take());
    ensure!(child.wait()?.success(), "nft refused the UDP block");
    Ok(())
}

fn topology() -> Result<(Netns, Netns, Netns, Netns)> {
    let (a, b, router, hub) = (Netns::new()?, Netns::new()?, Netns::new()?, Netns::new()?);
    for (ns, ns_ip, router_if, router_ip) in [
        (&a, A_IP, "eth0", "10.200.1.2"),
        (&b, B_IP, "eth1", "10.200.2.1"),
        (&hub, HUB_IP, "eth2", "10.200.3.1"),
    ] {
        create_veth(
            VethEnd::ns(ns, "eth0")
                .addr(&format!("{ns_ip}/24"))
                .mtu(1500),
            VethEnd::ns(&router, router_if)
                .addr(&format!("{router_ip}/24"))
                .mtu(1500),
        )?;
        ns.add_route("default", router_ip)?;
    }
    router.sysctl("net.ipv4.ip_forward", "1")?;
    Ok((a, b, router, hub))
}

impl Node {
    /// Runs `tailscale --socket=… ARGS` in the node's namespace; stdout.
    pub fn cli(&self, ns: &Netns, args: &[&str]) -> Result<String> {
        let socket = format!("--socket={}", self.socket.display());
        let mut argv = vec![self.cli.to_string_lossy().into_owned(), socket];
        argv.extend(args.iter().map(|a| (*a).to_owned()));
        let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
        ns.run_timeout(&argv, Duration::from_secs(90))
    }

    /// `tailscale status --json`.
    pub fn status(&self, ns: &Netns) -> Result<Value> {
        let text = self.cli(ns, &["status", "--json"])?;
        serde_json::from_str(&text).context("parsing `tailscale status --json`")
    }

    /// What tailscaled logged, for error messages.
    pub fn log(&self) -> String {
        crate::agent::tail(&self.daemon.stderr().unwrap_or_default(), 3000).to_owned()
    }
}

fn start_node(
    ns: &Netns,
    bin: &Binaries,
    dir: &Path,
    host: &'static str,
    underlay_ip: &'static str,
) -> Result<Node> {
    let state = dir.join(host);
    std::fs::create_dir_all(&state)?;
    let socket = state.join("tailscaled.sock");
    let ifname = ids::ifname(IFNAME_PREFIX);
    let argv = [
        bin.tailscaled.to_string_lossy().into_owned(),
        format!("--tun={ifname}"),
        format!("--statedir={}", state.display()),
        format!("--socket={}", socket.display()),
        format!("--port={PORT}"),
        "--no-logs-no-support".to_owned(),
    ];
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let mut daemon = ns.spawn(&argv)?;
    let deadline = Instant::now() + READY_TIMEOUT;
    while !socket.exists() {
        if let Some(status) = daemon.try_status()? {
            bail!("tailscaled {host} exited ({status}): {}", daemon.stderr()?);
        }
        ensure!(Instant::now() < deadline, "tailscaled {host}: no socket");
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(Node {
        ifname,
        socket,
        underlay_ip,
        host,
        daemon,
        cli: bin.tailscale.clone(),
    })
}

/// `Peer` of a status document whose host name is `host`.
pub fn peer<'a>(status: &'a Value, host: &str) -> Option<&'a Value> {
    status["Peer"]
        .as_object()?
        .values()
        .find(|p| p["HostName"] == host)
}

impl TailscaleMesh {
    /// Builds the mesh and waits until a reaches b through it: relayed by DERP when
    /// `udp_blocked` (UDP between the nodes is dropped before tailscaled starts), else
    /// over the direct UDP path.
    pub fn new(udp_blocked: bool) -> Result<TailscaleMesh> {
        let started = Instant::now();
        let bin = binaries()?;
        let (ns_a, ns_b, router, hub) = topology()?;
        if udp_blocked {
            block_udp(&router)?;
        }
        let dir = tempfile::Builder::new().prefix("ndlab-ts-").tempdir()?;
        let mut hub_process = hub.spawn(&[&bin.tslab.to_string_lossy(), "--addr", HUB_IP])?;
        hub_process.wait_for_output("\"control\"", Duration::from_secs(30))?;
        let a = start_node(&ns_a, &bin, dir.path(), "node-a", A_IP)?;
        let b = start_node(&ns_b, &bin, dir.path(), "node-b", B_IP)?;
        let mesh = TailscaleMesh {
            a,
            b,
            hub_process,
            ns_a,
            ns_b,
            router,
            hub,
            dir,
        };
        mesh.join().with_context(|| mesh.logs())?;
        println!(
            "tailscale lab ({}) ready in {:.1} s: {} on a, {} on b",
            if udp_blocked {
                "UDP blocked: DERP"
            } else {
                "direct"
            },
            started.elapsed().as_secs_f64(),
            mesh.a.ifname,
            mesh.b.ifname
        );
        Ok(mesh)
    }

    fn join(&self) -> Result<()> {
        for (node, ns) in [(&self.a, &self.ns_a), (&self.b, &self.ns_b)] {
            let host = format!("--hostname={}", node.host);
            node.cli(
                ns,
                &[
                    "up",
                    &format!("--login-server={CONTROL_URL}"),
                    "--accept-dns=false",
                    "--netfilter-mode=off",
                    &host,
                    "--timeout=60s",
                ],
            )?;
        }
        let b_ip = self.tailscale_ip_of_b()?;
        traffic::wait_for_ping(&self.ns_a, &b_ip, READY_TIMEOUT)?;
        Ok(())
    }

    /// b's Tailscale IPv4 address as a sees it.
    pub fn tailscale_ip_of_b(&self) -> Result<String> {
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            let status = self.a.status(&self.ns_a)?;
            if let Some(ip) = peer(&status, self.b.host).and_then(|p| {
                p["TailscaleIPs"]
                    .as_array()?
                    .first()?
                    .as_str()
                    .map(str::to_owned)
            }) {
                return Ok(ip);
            }
            ensure!(Instant::now() < deadline, "a never saw b: {status}");
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Waits until a's path to b and b's to a are both `direct` (their CurAddr) or both
    /// relayed by DERP, and have stayed so for [`PATH_STABLE`], pinging b meanwhile; returns
    /// b's entry of a's status.
    pub fn wait_for_path(&self, direct: bool) -> Result<Value> {
        let b_ip = self.tailscale_ip_of_b()?;
        let deadline = Instant::now() + READY_TIMEOUT;
        let on_path = |p: &Value| {
            let cur = p["CurAddr"].as_str().unwrap_or_default();
            let relay = p["Relay"].as_str().unwrap_or_default();
            (direct && !cur.is_empty()) || (!direct && cur.is_empty() && relay == DERP_REGION)
        };
        let mut since: Option<Instant> = None;
        loop {
            let a_to_b = peer(&self.a.status(&self.ns_a)?, self.b.host)
                .cloned()
                .unwrap_or(Value::Null);
            let b_to_a = peer(&self.b.status(&self.ns_b)?, self.a.host)
                .cloned()
                .unwrap_or(Value::Null);
            if on_path(&a_to_b) && on_path(&b_to_a) {
                let first = *since.get_or_insert_with(Instant::now);
                if first.elapsed() >= PATH_STABLE {
                    return Ok(a_to_b);
                }
            } else {
                since = None;
            }
            ensure!(
                Instant::now() < deadline,
                "the path between a and b is not {} for {PATH_STABLE:?}: a's view {a_to_b}, \
                 b's view {b_to_a}\n{}",
                if direct { "direct" } else { "DERP" },
                self.logs()
            );
            // Disco finds the direct path once traffic flows.
            let _ = self
                .a
                .cli(&self.ns_a, &["ping", "-c", "1", "--timeout=1s", &b_ip]);
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// The base64 WireGuard key of b, as netdoctor names peers.
    pub fn key_of_b(&self) -> Result<String> {
        let status = self.b.status(&self.ns_b)?;
        let hex = status["Self"]["PublicKey"]
            .as_str()
            .and_then(|k| k.strip_prefix("nodekey:"))
            .context("b's node key")?;
        let bytes: Vec<u8> = (0..hex.len() / 2)
            .map(|i| u8::from_str_radix(hex.get(2 * i..2 * i + 2).unwrap_or("x"), 16))
            .collect::<std::result::Result<_, _>>()
            .context("b's node key is not hex")?;
        Ok(base64::engine::general_purpose::STANDARD.encode(bytes))
    }

    /// The daemons' and the hub's logs, for error messages.
    pub fn logs(&self) -> String {
        format!(
            "\n--- tailscaled a:\n{}\n--- tailscaled b:\n{}\n--- hub:\n{}",
            self.a.log(),
            self.b.log(),
            crate::agent::tail(&self.hub_process.stderr().unwrap_or_default(), 2000)
        )
    }

    /// The state directory (tailscaled's state and sockets).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

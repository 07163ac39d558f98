//! The labs (one per measured path: a veth pair, a router between two veths, or
//! wireguard-go over a veth pair; an iperf3 server; the watched interface) and the
//! netdoctor processes the sections start in them.

use std::collections::HashSet;
use std::time::Duration;

use anyhow::{ensure, Context, Result};
use netdoctor_lab::wireguard::{wg_over_pair, WgTunnel};
use netdoctor_lab::{
    attached, cmd, traffic, BgProcess, Iperf3Opts, Iperf3Server, LineConfig, LineTopology, Netns,
    PairTopology,
};
use nix::sys::signal::Signal;
use serde_json::Value;

use crate::args::{Side, LOCAL_TCP};
use crate::programs::all_programs;
use crate::IPERF_PORT;

/// The path the measured packets take past the watched interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum NetPath {
    /// `a/eth0` — `b/eth0`: the watched end is an end host of the connection.
    Local,
    /// client — router — server: the router's client-facing `eth0` is watched, so no packet
    /// is local (netdoctor's full per-flow path, as on a gateway).
    Forwarded,
    /// wireguard-go between `a` and `b`: iperf3 runs inside the tunnel and `b/eth0`, the
    /// underlay, is watched: WireGuard's UDP, where the WireGuard tracking runs.
    Wireguard,
}

impl NetPath {
    pub(crate) const ALL: [NetPath; 3] = [NetPath::Local, NetPath::Forwarded, NetPath::Wireguard];

    pub(crate) fn name(self) -> &'static str {
        match self {
            NetPath::Local => "local",
            NetPath::Forwarded => "forwarded",
            NetPath::Wireguard => "wireguard",
        }
    }

    pub(crate) fn describe(self) -> &'static str {
        match self {
            NetPath::Local => "local: iperf3 a→b, netdoctor on the watched end of the pair",
            NetPath::Forwarded => {
                "forwarded: iperf3 client→server through a router, netdoctor on the router's client-facing veth"
            }
            NetPath::Wireguard => {
                "wireguard: iperf3 a→b inside wireguard-go, netdoctor on b's underlay veth (WireGuard's UDP)"
            }
        }
    }

    /// A comma-separated list of path names (empty entries and repeats are skipped).
    pub(crate) fn parse_list(list: &str) -> Result<Paths, String> {
        let mut out = Vec::new();
        for item in list.split(',').filter(|s| !s.is_empty()) {
            let path = NetPath::ALL
                .into_iter()
                .find(|p| p.name() == item)
                .ok_or_else(|| format!("unknown path {item:?} (local, forwarded, wireguard)"))?;
            if !out.contains(&path) {
                out.push(path);
            }
        }
        Ok(Paths(out))
    }
}

/// The paths `--paths` selects, in the order given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Paths(pub(crate) Vec<NetPath>);

impl Paths {
    pub(crate) fn contains(&self, path: NetPath) -> bool {
        self.0.contains(&path)
    }

    /// The selected paths other than the local one (each gets its own lab).
    pub(crate) fn remote(&self) -> Vec<NetPath> {
        self.0
            .iter()
            .copied()
            .filter(|p| *p != NetPath::Local)
            .collect()
    }
}

/// The namespaces of one path. Fields drop in order: the tunnel before its underlay.
enum Net {
    Pair(PairTopology),
    Line(LineTopology),
    Wg {
        tunnel: Box<WgTunnel>,
        pair: PairTopology,
    },
}

/// The lab of one path: topology, iperf3 server, watched interface (always `eth0`).
pub(crate) struct Lab {
    _server: Iperf3Server,
    net: Net,
    pub(crate) path: NetPath,
    pub(crate) side: Side,
    pub(crate) ifindex: u32,
}

impl std::fmt::Debug for Lab {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lab")
            .field("path", &self.path)
            .field("side", &self.side)
            .field("ifindex", &self.ifindex)
            .finish()
    }
}

impl Lab {
    /// The local path; `side` chooses the watched end.
    pub(crate) fn new(side: Side) -> Result<Lab> {
        let topo = PairTopology::new(1500)?;
        // An end host: it does not forward, so the segments it receives for its own
        // connections take netdoctor's local path too (a forwarding host keeps their flow
        // records: it could DNAT them onward). New namespaces inherit the host's setting.
        let watched = match side {
            Side::Receiver => &topo.b,
            Side::Sender => &topo.a,
        };
        watched.sysctl("net.ipv4.ip_forward", "0")?;
        Lab::finish(NetPath::Local, side, Net::Pair(topo))
    }

    /// The lab of `path` (the local path watches the receiver).
    pub(crate) fn for_path(path: NetPath) -> Result<Lab> {
        match path {
            NetPath::Local => Lab::new(Side::Receiver),
            NetPath::Forwarded => {
                let line = LineTopology::new(&LineConfig::default())?;
                Lab::finish(path, Side::Receiver, Net::Line(line))
            }
            NetPath::Wireguard => {
                let (pair, tunnel) = wg_over_pair(1500, 1420)?;
                let tunnel = Box::new(tunnel);
                Lab::finish(path, Side::Receiver, Net::Wg { tunnel, pair })
            }
        }
    }

    fn finish(path: NetPath, side: Side, net: Net) -> Result<Lab> {
        let server_ns = match &net {
            Net::Pair(t) | Net::Wg { pair: t, .. } => &t.b,
            Net::Line(t) => &t.server,
        };
        let server = Iperf3Server::start(server_ns, IPERF_PORT)?;
        let mut lab = Lab {
            _server: server,
            net,
            path,
            side,
            ifindex: 0,
        };
        lab.ifindex = attached::ifindex(lab.watched(), PairTopology::IFNAME)?;
        Ok(lab)
    }

    /// The namespace of the watched `eth0`.
    pub(crate) fn watched(&self) -> &Netns {
        match (&self.net, self.side) {
            (Net::Pair(t), Side::Receiver) => &t.b,
            (Net::Pair(t), Side::Sender) => &t.a,
            (Net::Line(t), _) => &t.router,
            (Net::Wg { pair, .. }, _) => &pair.b,
        }
    }

    /// The iperf3 server's namespace.
    pub(crate) fn receiver(&self) -> &Netns {
        match &self.net {
            Net::Pair(t) | Net::Wg { pair: t, .. } => &t.b,
            Net::Line(t) => &t.server,
        }
    }

    /// The iperf3 client's namespace and the address it sends to.
    fn client(&self) -> (&Netns, &str) {
        match &self.net {
            Net::Pair(t) => (&t.a, PairTopology::B_IP),
            Net::Line(t) => (&t.client, LineTopology::SERVER_IP),
            Net::Wg { tunnel, pair } => (&pair.a, tunnel.b.ip()),
        }
    }

    pub(crate) fn iperf(&self, secs: u32, parallel: u32) -> Result<traffic::Iperf3Report> {
        let (ns, to) = self.client();
        let mut opts = Iperf3Opts::new(to);
        opts.port = IPERF_PORT;
        opts.duration_secs = secs;
        opts.parallel = parallel;
        traffic::iperf3_client(ns, &opts)
    }
}

/// `netdoctor flows` on the watched interface with a JSON report of every flow, for longer
/// than any run (each is stopped with SIGINT).
pub(crate) fn flows_argv(netdoctor: &str) -> Vec<&str> {
    vec![
        netdoctor,
        "flows",
        PairTopology::IFNAME,
        "--duration",
        "10m",
        "--json",
        "--top",
        "0",
    ]
}

/// Fails, saying why, when `netdoctor flows` has no `--local-tcp` (which `tc-packets`
/// needs): before any run rather than after the first rounds.
pub(crate) fn require_local_tcp(netdoctor: &str) -> Result<()> {
    let help = cmd::host_run(&[netdoctor, "flows", "--help"])
        .with_context(|| format!("`{netdoctor} flows --help`"))?;
    ensure!(
        help.contains(LOCAL_TCP),
        "{netdoctor} has no `flows {LOCAL_TCP}`, which tc-packets needs: rebuild netdoctor or \
         leave tc-packets out of --configs"
    );
    Ok(())
}

/// Stops netdoctor (SIGINT: it reports what it saw) and parses its JSON report.
pub(crate) fn finish_netdoctor(mut nd: BgProcess) -> Result<Value> {
    nd.signal(Signal::SIGINT)?;
    let status = nd.wait_timeout(Duration::from_secs(20))?;
    let stdout = nd.stdout()?;
    ensure!(
        status.success(),
        "netdoctor exited with {status}; stderr: {}",
        nd.stderr().unwrap_or_default().trim()
    );
    serde_json::from_str(&stdout)
        .with_context(|| format!("netdoctor's output is not JSON: {stdout}"))
}

/// Starts `argv` in the watched namespace and waits for `needle` on its stderr; also returns
/// the ids of the programs loaded before it started, to tell its own from them.
pub(crate) fn spawn_netdoctor(
    lab: &Lab,
    argv: &[&str],
    needle: &str,
) -> Result<(BgProcess, HashSet<u32>)> {
    let known: HashSet<u32> = all_programs().into_keys().collect();
    let mut nd = lab.watched().spawn(argv)?;
    nd.wait_for_output(needle, Duration::from_secs(30))
        .with_context(|| format!("`{}` did not start", argv.join(" ")))?;
    Ok((nd, known))
}

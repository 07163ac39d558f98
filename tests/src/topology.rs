//! Ready-made topologies.
//!
//! * [`PairTopology`]: `a` — `b` over one veth link.
//! * [`LineTopology`]: `client` — `router` — `server`, router forwarding,
//!   with one MTU per link (IPv6 on it: [`crate::topology6`]).
//!
//! Addresses are fixed (each node is its own namespace, so they never
//! clash) and exposed as associated constants.

use anyhow::{Context, Result};

use crate::netns::Netns;
use crate::veth::{create_veth, VethEnd};

/// Two namespaces joined by a veth link: `a/eth0` 10.201.0.1/24 —
/// `b/eth0` 10.201.0.2/24.
///
/// Drops (and deletes) both namespaces; keep other lab objects that live in
/// them (e.g. a [`crate::WgTunnel`]) declared *after* it so they drop first.
#[derive(Debug)]
pub struct PairTopology {
    /// First node.
    pub a: Netns,
    /// Second node.
    pub b: Netns,
}

impl PairTopology {
    /// Address of `a` on the link.
    pub const A_IP: &'static str = "10.201.0.1";
    /// Address of `b` on the link.
    pub const B_IP: &'static str = "10.201.0.2";
    /// Prefix length of the link.
    pub const PREFIX_LEN: u8 = 24;
    /// Interface name of the link on both nodes.
    pub const IFNAME: &'static str = "eth0";

    /// Builds the pair with `mtu` on both ends.
    pub fn new(mtu: u32) -> Result<PairTopology> {
        let topo = PairTopology {
            a: Netns::new()?,
            b: Netns::new()?,
        };
        create_veth(
            VethEnd::ns(&topo.a, Self::IFNAME)
                .addr(&format!("{}/{}", Self::A_IP, Self::PREFIX_LEN))
                .mtu(mtu),
            VethEnd::ns(&topo.b, Self::IFNAME)
                .addr(&format!("{}/{}", Self::B_IP, Self::PREFIX_LEN))
                .mtu(mtu),
        )
        .context("building pair topology")?;
        Ok(topo)
    }
}

/// Parameters of a [`LineTopology`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineConfig {
    /// MTU of both ends of the client — router link.
    pub client_link_mtu: u32,
    /// MTU of both ends of the router — server link.
    pub server_link_mtu: u32,
    /// Whether the router forwards IPv4 (`net.ipv4.ip_forward`); `false`
    /// reproduces "forwarding disabled on a gateway".
    pub forwarding: bool,
}

impl Default for LineConfig {
    /// 1500 / 1500, forwarding on.
    fn default() -> Self {
        LineConfig {
            client_link_mtu: 1500,
            server_link_mtu: 1500,
            forwarding: true,
        }
    }
}

/// `client` — `router` — `server`:
///
/// ```text
/// client eth0 10.200.1.1/24 ── eth0 10.200.1.2/24 router eth1 10.200.2.1/24 ── eth0 10.200.2.2/24 server
/// ```
///
/// client and server have default routes via the router. Namespaces drop in
/// the order client, router, server.
#[derive(Debug)]
pub struct LineTopology {
    /// Client node.
    pub client: Netns,
    /// Router node (forwards when [`LineConfig::forwarding`]).
    pub router: Netns,
    /// Server node.
    pub server: Netns,
}

impl LineTopology {
    /// Client address.
    pub const CLIENT_IP: &'static str = "10.200.1.1";
    /// Router address on the client link (client's gateway).
    pub const ROUTER_CLIENT_SIDE_IP: &'static str = "10.200.1.2";
    /// Router address on the server link (server's gateway).
    pub const ROUTER_SERVER_SIDE_IP: &'static str = "10.200.2.1";
    /// Server address.
    pub const SERVER_IP: &'static str = "10.200.2.2";
    /// Client interface (to the router).
    pub const CLIENT_IF: &'static str = "eth0";
    /// Router interface towards the client.
    pub const ROUTER_CLIENT_IF: &'static str = "eth0";
    /// Router interface towards the server.
    pub const ROUTER_SERVER_IF: &'static str = "eth1";
    /// Server interface (to the router).
    pub const SERVER_IF: &'static str = "eth0";

    /// Builds the line with per-link MTUs and the router's forwarding switch.
    pub fn new(config: &LineConfig) -> Result<LineTopology> {
        let topo = LineTopology {
            client: Netns::new()?,
            router: Netns::new()?,
            server: Netns::new()?,
        };
        let cm = config.client_link_mtu;
        let sm = config.server_link_mtu;
        create_veth(
            VethEnd::ns(&topo.client, Self::CLIENT_IF)
                .addr(&format!("{}/24", Self::CLIENT_IP))
                .mtu(cm),
            VethEnd::ns(&topo.router, Self::ROUTER_CLIENT_IF)
                .addr(&format!("{}/24", Self::ROUTER_CLIENT_SIDE_IP))
                .mtu(cm),
        )
        .context("building client — router link")?;
        create_veth(
            VethEnd::ns(&topo.router, Self::ROUTER_SERVER_IF)
                .addr(&format!("{}/24", Self::ROUTER_SERVER_SIDE_IP))
                .mtu(sm),
            VethEnd::ns(&topo.server, Self::SERVER_IF)
                .addr(&format!("{}/24", Self::SERVER_IP))
                .mtu(sm),
        )
        .context("building router — server link")?;
        topo.router.sysctl(
            "net.ipv4.ip_forward",
            if config.forwarding { "1" } else { "0" },
        )?;
        topo.client
            .add_route("default", Self::ROUTER_CLIENT_SIDE_IP)?;
        topo.server
            .add_route("default", Self::ROUTER_SERVER_SIDE_IP)?;
        Ok(topo)
    }

    /// The router's nft table (inet family) of [`Self::drop_router_frag_needed`], whose
    /// chain `out` holds the rule.
    pub const FRAG_NEEDED_TABLE: &'static str = "ndbh";

    /// Makes a PMTU blackhole of the router: it drops the ICMP frag-needed messages it
    /// generates itself (an nft output rule with a counter, [`Self::frag_needed_dropped`]).
    pub fn drop_router_frag_needed(&self) -> Result<()> {
        self.drop_router_output(
            Self::FRAG_NEEDED_TABLE,
            &[
                "icmp",
                "type",
                "destination-unreachable",
                "icmp",
                "code",
                "frag-needed",
            ],
        )
    }

    /// Drops what the router itself sends and `matches` (nft match words): a chain `out` on
    /// the output hook of the router's inet table `table`, its one rule counting.
    pub(crate) fn drop_router_output(&self, table: &str, matches: &[&str]) -> Result<()> {
        self.router.run(&["nft", "add", "table", "inet", table])?;
        self.router.run(&[
            "nft",
            "add",
            "chain",
            "inet",
            table,
            "out",
            "{ type filter hook output priority 0; }",
        ])?;
        let mut rule = vec!["nft", "add", "rule", "inet", table, "out"];
        rule.extend_from_slice(matches);
        rule.extend(["counter", "drop"]);
        self.router.run(&rule)?;
        Ok(())
    }

    /// Frag-needed messages the router's rule ([`Self::drop_router_frag_needed`]) dropped
    /// so far.
    pub fn frag_needed_dropped(&self) -> Result<u64> {
        self.router_out_counter(Self::FRAG_NEEDED_TABLE)
    }

    /// The packet counter of the rule in the router's nft chain `inet TABLE out`.
    pub(crate) fn router_out_counter(&self, table: &str) -> Result<u64> {
        let out = self
            .router
            .run(&["nft", "-j", "list", "chain", "inet", table, "out"])?;
        let json: serde_json::Value =
            serde_json::from_str(&out).context("parsing `nft -j list chain`")?;
        json["nftables"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|item| item["rule"]["expr"].as_array())
            .flatten()
            .find_map(|expr| expr["counter"]["packets"].as_u64())
            .with_context(|| format!("no counter in {out}"))
    }
}

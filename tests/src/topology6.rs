//! IPv6 on a [`LineTopology`]: ULA addresses beside the IPv4 ones, the router forwarding
//! IPv6, and the IPv6 blackhole (the router dropping the ICMPv6 packet-too-big it
//! generates).
//!
//! ```text
//! client eth0 fd00:200:1::1/64 ── eth0 fd00:200:1::2/64 router eth1 fd00:200:2::1/64 ── eth0 fd00:200:2::2/64 server
//! ```
//!
//! Addresses are added with `nodad`, so they are usable at once.

use anyhow::{Context, Result};

use crate::topology::LineTopology;

impl LineTopology {
    /// Client IPv6 address.
    pub const CLIENT_IP6: &'static str = "fd00:200:1::1";
    /// Router IPv6 address on the client link (client's IPv6 gateway).
    pub const ROUTER_CLIENT_SIDE_IP6: &'static str = "fd00:200:1::2";
    /// Router IPv6 address on the server link (server's IPv6 gateway).
    pub const ROUTER_SERVER_SIDE_IP6: &'static str = "fd00:200:2::1";
    /// Server IPv6 address.
    pub const SERVER_IP6: &'static str = "fd00:200:2::2";

    /// The router's nft table (inet family) of [`Self::drop_router_packet_too_big`], whose
    /// chain `out` holds the rule.
    pub const PACKET_TOO_BIG_TABLE: &'static str = "ndbh6";

    /// Gives every node its IPv6 address, the client and server IPv6 default routes via
    /// the router, and turns IPv6 forwarding on in the router; waits until the server
    /// answers an IPv6 ping from the client.
    pub fn add_ipv6(&self) -> Result<()> {
        self.client
            .add_addr(Self::CLIENT_IF, &format!("{}/64", Self::CLIENT_IP6))?;
        self.router.add_addr(
            Self::ROUTER_CLIENT_IF,
            &format!("{}/64", Self::ROUTER_CLIENT_SIDE_IP6),
        )?;
        self.router.add_addr(
            Self::ROUTER_SERVER_IF,
            &format!("{}/64", Self::ROUTER_SERVER_SIDE_IP6),
        )?;
        self.server
            .add_addr(Self::SERVER_IF, &format!("{}/64", Self::SERVER_IP6))?;
        self.router.sysctl("net.ipv6.conf.all.forwarding", "1")?;
        self.client.ip(&[
            "-6",
            "route",
            "replace",
            "default",
            "via",
            Self::ROUTER_CLIENT_SIDE_IP6,
        ])?;
        self.server.ip(&[
            "-6",
            "route",
            "replace",
            "default",
            "via",
            Self::ROUTER_SERVER_SIDE_IP6,
        ])?;
        crate::traffic::wait_for_ping(
            &self.client,
            Self::SERVER_IP6,
            std::time::Duration::from_secs(5),
        )
        .context("IPv6 across the line")
    }

    /// Makes an IPv6 PMTU blackhole of the router: it drops the ICMPv6 packet-too-big
    /// messages it generates itself (an nft output rule with a counter,
    /// [`Self::packet_too_big_dropped`]). IPv6 routers never fragment, so every packet
    /// larger than the next hop's MTU then vanishes without a word.
    pub fn drop_router_packet_too_big(&self) -> Result<()> {
        self.drop_router_output(
            Self::PACKET_TOO_BIG_TABLE,
            &["icmpv6", "type", "packet-too-big"],
        )
    }

    /// Packet-too-big messages the router's rule ([`Self::drop_router_packet_too_big`])
    /// dropped so far.
    pub fn packet_too_big_dropped(&self) -> Result<u64> {
        self.router_out_counter(Self::PACKET_TOO_BIG_TABLE)
    }
}

//! Turning configuration, the observation window and probe results into [`Facts`].

mod full_size;
mod gateway;
mod load;
mod peers;
mod readings;
mod traffic;
mod tunnel;
mod wg_path;

pub use readings::Readings;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use super::ecmp;
use super::handshake::now_unix;
use super::underlay::Underlay;
use crate::config::firewall::Ruleset;
use crate::config::host::Host;
use crate::config::iface::Interface;
use crate::config::link::LinkDetails;
use crate::config::route_table::TableRoute;
use crate::config::tunnel::ConfiguredTunnel;
use crate::facts::Facts;
use crate::kernel::packet;
use crate::kernel::packet::counters::IfaceCounters;
use crate::kernel::packet::flows::Flow;
use crate::kernel::sockets::rates::SocketRow;
/// Everything gathered during one diagnosis.
pub struct Observation<'a> {
    pub me: &'a Interface,
    pub details: &'a LinkDetails,
    pub all: &'a [Interface],
    pub tun: &'a ConfiguredTunnel,
    pub underlay: &'a Underlay,
    /// What the data plane counted during the window.
    pub window: &'a packet::Snapshot,
    /// Every local TCP connection over the window (None: socket telemetry unavailable).
    pub sockets: Option<&'a [SocketRow]>,
    pub start: &'a Readings,
    pub end: &'a Readings,
    pub elapsed: Duration,
    /// The firewall's NAT and MSS clamping rules.
    pub firewall: &'a Ruleset,
    /// The routing table (default and multipath routes).
    pub routes: &'a [TableRoute],
}

/// "address:port", or the address alone for a tunnel without UDP (port 0).
pub(super) fn endpoint_name(ep: &SocketAddr) -> String {
    if ep.port() == 0 {
        ep.ip().to_string()
    } else {
        ep.to_string()
    }
}

/// What the window saw that several sections read.
struct Seen<'w> {
    /// The interface's own flows.
    mine: Vec<&'w Flow>,
    /// The tunnel's outer flows on the watched underlays.
    outer: Vec<&'w Flow>,
    /// The interface's counters.
    counters: IfaceCounters,
    /// The underlay: the route's interface, else the one that carried most outer bytes.
    underlay_iface: Option<Interface>,
    /// The tunnel's endpoints (see [`tunnel::endpoints`]).
    endpoints: Vec<SocketAddr>,
}

pub(super) fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

impl Observation<'_> {
    /// Builds the facts document (probe facts are added later).
    /// When the window began, in Unix seconds (rounded down, as handshake times are).
    pub fn window_start_unix(&self) -> i64 {
        now_unix() - self.elapsed.as_secs_f64().ceil() as i64
    }

    /// The facts of the window. WireGuard handshakes in flight when it ended get until
    /// `settle_until` to complete ([`super::handshake::settle`]), so one that completes is
    /// not stale.
    pub async fn facts(&self, settle_until: Instant) -> crate::config::Result<Facts> {
        let mut facts = self.read().await?;
        let start = self.window_start_unix();
        super::handshake::settle(self.tun, &mut facts.peers, start, settle_until).await;
        Ok(facts)
    }

    /// The facts of the window so far, while it is still open (for the probes' targets):
    /// nothing waits for handshakes.
    pub async fn provisional(&self) -> crate::config::Result<Facts> {
        self.read().await
    }

    /// What the sections share: the interface's flows and counters, the tunnel's outer
    /// flows on the underlays, the underlay that carried them and the endpoints.
    fn seen(&self) -> Seen<'_> {
        let all_flows = &self.window.flows;
        let mine: Vec<&Flow> = all_flows
            .iter()
            .filter(|f| f.ifindex == self.me.index)
            .collect();
        // The underlay is the watched interface that carried the tunnel's traffic.
        // tailscaled's port also carries its disco pings and STUN: only WireGuard counts.
        let by_port = self.tun.port != 0 && self.tun.tailscale.is_none();
        let tunnel_flow = |f: &&Flow| {
            self.tun.encap.is_some_and(|e| f.encap == e)
                || (by_port
                    && f.protocol == 17
                    && (f.src_port == self.tun.port || f.dst_port == self.tun.port))
        };
        let outer: Vec<&Flow> = all_flows
            .iter()
            .filter(|f| {
                f.ifindex != self.me.index
                    && self.underlay.watch.iter().any(|u| u.index == f.ifindex)
            })
            .filter(tunnel_flow)
            .collect();
        let underlay_iface = self.underlay.iface.clone().or_else(|| {
            let busiest = outer.iter().max_by_key(|f| f.bytes)?.ifindex;
            self.all.iter().find(|i| i.index == busiest).cloned()
        });
        Seen {
            endpoints: tunnel::endpoints(&self.tun.endpoints, &outer),
            counters: self.window.counters(self.me.index),
            mine,
            outer,
            underlay_iface,
        }
    }

    /// The document, one section at a time (the probe's facts are added later).
    async fn read(&self) -> crate::config::Result<Facts> {
        let seen = self.seen();
        let tunnel = self.tunnel_facts(&seen).await;
        let ecmp = ecmp::facts(
            &ecmp::routes(self.routes, self.me, seen.underlay_iface.as_ref()),
            self.all,
            &self.window.flows,
            self.sockets.unwrap_or_default(),
        );
        let mut host = Host::read(&self.me.name, self.me.mtu, self.firewall);
        host.cpu_busy_percent = self.host_busy_percent();
        let nat = self.nat(&host).await;
        let peers = self.peers(&seen.endpoints, &seen.outer);
        let mut flows = self
            .sockets
            .map(|rows| super::flows::flow_facts(rows, self.me.index, &host))
            .unwrap_or_default();
        if let Some(rows) = self.sockets {
            super::flows::underlay_loss(&mut flows, rows, self.me.index, &peers);
        }
        Ok(Facts {
            iface: self.iface_facts(&seen),
            tunnel,
            peers,
            host,
            traffic: self.traffic(&seen, &flows),
            flows,
            drops: self.drops(),
            probe: crate::facts::ProbeFacts {
                path_mtu: -1,
                ..Default::default()
            },
            ecmp,
            nat,
            // Filled in by the caller, which knows the bridge (`facts::bridge`).
            bridge: Default::default(),
        })
    }
}

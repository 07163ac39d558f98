//! Turning configuration, the observation window and probe results into [`Facts`].

mod full_size;
mod gateway;
mod load;
mod peers;
mod readings;
mod wg_path;

pub use readings::Readings;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use super::ecmp;
use super::handshake::now_unix;
use super::reorder;
use super::underlay::{is_tunnel_kind, Underlay};
use crate::config::firewall::Ruleset;
use crate::config::host::Host;
use crate::config::iface::{IfaceKind, Interface};
use crate::config::link::{self, LinkDetails};
use crate::config::route_table::TableRoute;
use crate::config::tunnel::{family_name, ConfiguredTunnel};
use crate::facts::{DropFacts, Facts, IfaceFacts, TrafficFacts, TunnelFacts};
use crate::kernel::drops;
use crate::kernel::packet;
use crate::kernel::packet::flows::Flow;
use crate::kernel::sockets::rates::SocketRow;
use crate::kernel::views::{Direction, Encap};
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

    async fn read(&self) -> crate::config::Result<Facts> {
        let all_flows = &self.window.flows;
        let mine: Vec<&Flow> = all_flows
            .iter()
            .filter(|f| f.ifindex == self.me.index)
            .collect();
        let counters = self.window.counters(self.me.index);

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

        let mut endpoints: Vec<SocketAddr> = self.tun.endpoints.clone();
        if endpoints.is_empty() {
            for f in outer.iter().filter(|f| f.direction == Direction::Egress) {
                let ep = SocketAddr::new(f.dst, f.dst_port);
                if !endpoints.contains(&ep) {
                    endpoints.push(ep);
                }
            }
        }
        let route_mtu = match (self.underlay.route_mtu, &underlay_iface) {
            (Some(m), _) => i64::from(m),
            (None, Some(i)) => i64::from(i.mtu),
            (None, None) => -1,
        };
        // An underlay that is itself a tunnel carries no more than its own chain fits.
        let chain = super::chain::below(underlay_iface.as_ref(), self.all).await;
        let effective_mtu = match chain.carries() {
            Some(c) if route_mtu > 0 => route_mtu.min(i64::from(c)),
            _ => route_mtu,
        };
        let family = if endpoints.iter().any(|e| family_name(e.ip()) == "ipv6") {
            "ipv6"
        } else {
            "ipv4"
        };
        let fam = crate::facts::overhead::AddrFamily::from_name(family);
        let at_mtu = u32::try_from(effective_mtu)
            .ok()
            .filter(|m| *m > 0)
            .unwrap_or(1500);
        let overhead = self
            .tun
            .kind
            .map(|k| i64::from(crate::facts::overhead::overhead(k, fam, at_mtu)));
        let max_seg = |flows: &mut dyn Iterator<Item = &&Flow>, dir: Direction| {
            flows
                .filter(|f| f.direction == dir)
                .map(|f| i64::from(f.max_segment))
                .max()
                .unwrap_or(0)
        };
        // This interface's largest segment: its flows', and its local connections' (the
        // local path counts those per interface, not per flow).
        let my_max_seg = |dir: Direction| {
            let local = match dir {
                Direction::Egress => counters.egress.local_tcp_max_segment,
                Direction::Ingress => counters.ingress.local_tcp_max_segment,
            };
            max_seg(&mut mine.iter(), dir).max(to_i64(local))
        };
        let underlay_counters = underlay_iface
            .as_ref()
            .map(|u| self.window.counters(u.index))
            .unwrap_or_default();
        // Overhead at full size, in a direction where full-size inner packets flowed and
        // the underlay did not fragment them: smaller packets carry WireGuard's padding to
        // 16 bytes, and a fragment's size says nothing about the overhead. tinc sends its
        // own path-MTU probes of any size on the data flow, so its largest outer packet
        // says nothing either.
        let full_size = i64::from(self.me.mtu) - 16;
        let probes_on_data_flow = self.tun.encap == Some(Encap::Tinc);
        let measured = [Direction::Egress, Direction::Ingress]
            .into_iter()
            .filter_map(|dir| {
                let c = match dir {
                    Direction::Egress => &underlay_counters.egress,
                    Direction::Ingress => &underlay_counters.ingress,
                };
                let o = max_seg(&mut outer.iter(), dir);
                let i = my_max_seg(dir);
                let unfragmented = c.fragments() == 0;
                (!probes_on_data_flow && unfragmented && i >= full_size && o > i).then_some(o - i)
            })
            .max()
            .unwrap_or(-1);
        let bond = match &underlay_iface {
            Some(u) if u.kind == IfaceKind::Bond => {
                link::details(u.index).await.ok().and_then(|d| d.bond)
            }
            _ => None,
        };
        let bond_traffic = bond
            .as_ref()
            .map(|b| {
                let secs = self.elapsed.as_secs_f64();
                crate::config::bond::measure(
                    &b.members,
                    self.all,
                    &self.start.links,
                    &self.end.links,
                    secs,
                )
            })
            .unwrap_or_default();
        let tunnel = TunnelFacts {
            present: self.tun.kind.is_some(),
            kind: self.tun.kind_name(),
            local: self.tun.local.map(|l| l.to_string()).unwrap_or_default(),
            options: self.tun.options.clone(),
            family: family.into(),
            overhead_expected: overhead.unwrap_or(-1),
            overhead_measured: measured,
            underlay_iface: underlay_iface
                .as_ref()
                .map(|u| u.name.clone())
                .unwrap_or_default(),
            underlay_mtu: route_mtu,
            underlay_chain: chain.describe(),
            path_mtu: -1,
            effective_underlay_mtu: effective_mtu,
            max_mtu: match self.tun.kind {
                Some(k) if effective_mtu > 0 => {
                    i64::from(crate::facts::overhead::max_tunnel_mtu(k, fam, at_mtu))
                }
                _ => -1,
            },
            usual_mtu: self
                .tun
                .kind
                .and_then(crate::facts::overhead::usual_mtu)
                .map_or(-1, i64::from),
            port: i64::from(self.tun.port),
            endpoints: endpoints.iter().map(endpoint_name).collect(),
            daemon: self
                .tun
                .daemon
                .as_ref()
                .map(|d| d.command.clone())
                .unwrap_or_default(),
            methods: self.tun.methods.clone(),
            underlay_fragments: to_i64(underlay_counters.fragments()),
            underlay_bond_policy: bond
                .as_ref()
                .map(|b| b.xmit_hash_policy.clone())
                .unwrap_or_default(),
            underlay_bond_mode: bond.as_ref().map(|b| b.mode.clone()).unwrap_or_default(),
            underlay_bond_tx_bytes: bond_traffic.tx_bytes,
            underlay_bond_busiest: bond_traffic.busiest,
            underlay_bond_busiest_percent: bond_traffic.busiest_percent,
            underlay_bond_rate_mbps: bond_traffic.rate_mbps,
            underlay_bond_members: bond_traffic.members,
            load: self.load(),
        };
        let ecmp = ecmp::facts(
            &ecmp::routes(self.routes, self.me, underlay_iface.as_ref()),
            self.all,
            all_flows,
            self.sockets.unwrap_or_default(),
        );
        let mut host = Host::read(&self.me.name, self.me.mtu, self.firewall);
        host.cpu_busy_percent = self.host_busy_percent();
        let nat = self.nat(&host).await;

        let peers = self.peers(&endpoints, &outer);

        let mss_limit = i64::from(self.me.mtu) - 40;
        let syn: Vec<&&Flow> = mine
            .iter()
            .filter(|f| f.direction == Direction::Egress && f.syn_mss.is_some())
            .collect();
        let limit_for = |f: &Flow| {
            if f.src.is_ipv4() {
                mss_limit
            } else {
                i64::from(self.me.mtu) - 60
            }
        };
        let mut flows = self
            .sockets
            .map(|rows| super::flows::flow_facts(rows, self.me.index, &host))
            .unwrap_or_default();
        if let Some(rows) = self.sockets {
            super::flows::underlay_loss(&mut flows, rows, self.me.index, &peers);
        }
        let tcp: Vec<&&Flow> = mine.iter().filter(|f| f.protocol == 6).collect();
        // Flow records, and the local connections' segments counted per interface. What
        // those connections sent again their sockets counted (`flows`, one per socket
        // through the interface: the local path checks only what it receives); they count
        // where the local path took what they sent.
        let tcp_segments: u64 = tcp.iter().map(|f| f.segments).sum::<u64>()
            + counters.ingress.local_tcp_segments
            + counters.egress.local_tcp_segments;
        let local = reorder::local(&flows, counters.egress.local_tcp_segments > 0);
        let tcp_retransmits: u64 = tcp.iter().map(|f| u64::from(f.retransmits)).sum::<u64>()
            + counters.ingress.local_tcp_retransmits
            + counters.egress.local_tcp_retransmits
            + local.retransmits;
        let full = full_size::full_size(&counters, self.me.mtu);
        let mut traffic = TrafficFacts {
            duration_s: self.elapsed.as_secs_f64(),
            rx_segments: to_i64(counters.ingress.segments),
            tx_segments: to_i64(counters.egress.segments),
            df_over_mtu: to_i64(counters.ingress.df_over_mtu + counters.egress.df_over_mtu),
            fragments: to_i64(counters.fragments()),
            too_big_received: to_i64(
                counters.ingress.icmp_frag_needed + counters.ingress.icmp6_packet_too_big,
            ),
            max_segment_out: my_max_seg(Direction::Egress),
            full_size_segments: full.segments,
            full_size_share: full.share,
            syn_mss_max: syn
                .iter()
                .filter_map(|f| f.syn_mss)
                .map(i64::from)
                .max()
                .unwrap_or(0),
            mss_limit,
            syn_mss_over_limit: syn
                .iter()
                .filter(|f| f.syn_mss.map(i64::from).unwrap_or(0) > limit_for(f))
                .count() as i64,
            tcp_segments: to_i64(tcp_segments),
            tcp_retransmits: to_i64(tcp_retransmits),
            tcp_retrans_ratio: if tcp_segments > 0 {
                tcp_retransmits as f64 / tcp_segments as f64
            } else {
                0.0
            },
            flow_evictions: to_i64(self.window.flow_table.evictions),
            flow_table_capacity: to_i64(self.window.flow_table.capacity),
            ..TrafficFacts::default()
        };
        reorder::fill(&mut traffic, &local);

        let mut by_reason: BTreeMap<String, i64> = BTreeMap::new();
        for d in drops::delta(&self.start.drops, &self.end.drops)
            .iter()
            .filter(|d| d.ifindex == self.me.index)
        {
            *by_reason.entry(d.reason.clone()).or_default() += to_i64(d.packets);
        }
        let reason = |r: &str| by_reason.get(r).copied().unwrap_or(0);
        let drops = DropFacts {
            total: by_reason.values().sum(),
            forwarding: reason("IP_INADDRERRORS"),
            rpfilter: reason("IP_RPFILTER"),
            too_big: reason("PKT_TOO_BIG"),
            by_reason: by_reason.clone(),
        };

        let lan_mtu = self
            .all
            .iter()
            .filter(|i| {
                i.index != self.me.index
                    && i.up
                    && i.kind != IfaceKind::Loopback
                    && !is_tunnel_kind(&i.kind)
            })
            .filter(|i| underlay_iface.as_ref().is_none_or(|u| u.index != i.index))
            .map(|i| i64::from(i.mtu))
            .max()
            .unwrap_or(0);
        let my_bond = self.details.bond.clone().unwrap_or_default();
        Ok(Facts {
            iface: IfaceFacts {
                name: self.me.name.clone(),
                index: self.me.index,
                kind: self.me.kind.to_string(),
                mtu: i64::from(self.me.mtu),
                up: self.me.up,
                addresses: self.details.addresses.clone(),
                is_tunnel: is_tunnel_kind(&self.me.kind),
                lan_mtu,
                bond_mode: my_bond.mode,
                bond_members: my_bond.members,
            },
            tunnel,
            peers,
            host,
            traffic,
            flows,
            drops,
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

//! What `netdoctor flows` reports ([`FlowsReport`], also its `--json` document), collected
//! from the data plane and the sockets at the end of the observation.

use std::time::Duration;

use serde::Serialize;

use crate::config::iface::Interface;
use crate::config::sysctl::CongestionControl;
use crate::config::wireguard::tailscale::PeerPath;
use crate::config::wireguard::Peer;
use crate::config::{link, tunnel};
use crate::kernel::packet::counters::{bucket_label, IfaceCounters, SIZE_BUCKET_BOUNDS};
use crate::kernel::packet::flow_table::FlowTableUse;
use crate::kernel::packet::flows::{top_by_bytes, Flow};
use crate::kernel::packet::too_big::TooBig;
use crate::kernel::packet::tunnel_traffic::{self, TunnelTraffic};
use crate::kernel::packet::wg_path::{self, EndpointPath};
use crate::kernel::packet::{Dataplane, Hooks};
use crate::kernel::sockets::rates::{self, Baseline, CcAggregate, SocketRow};
use crate::kernel::sockets::{Signals, SocketProbes};

/// What `netdoctor flows` reports (also its `--json` document).
#[derive(Debug, Serialize)]
pub struct FlowsReport {
    /// The interface watched.
    pub interface: Interface,
    /// Hooks used.
    pub hooks: Hooks,
    /// Observation time in seconds.
    pub duration_s: f64,
    /// Labels of `counters.*.size_buckets`.
    pub size_buckets: Vec<String>,
    /// Interface counters.
    pub counters: IfaceCounters,
    /// Flows on this interface in the table (before `--top`).
    pub flows_total: usize,
    /// The flow table (shared by every interface): capacity, entries, and flows it evicted
    /// since netdoctor loaded it (their figures restarted from zero).
    pub flow_table: FlowTableUse,
    /// The busiest flows, by bytes.
    pub flows: Vec<Flow>,
    /// Tunnel traffic recognised on this interface (as an underlay).
    pub tunnels: Vec<TunnelTraffic>,
    /// ICMP frag-needed / ICMPv6 packet-too-big messages seen on this interface.
    pub too_big: Vec<TooBig>,
    /// Local TCP connections whose traffic leaves through this interface, busiest first.
    pub sockets: Vec<SocketRow>,
    /// Those connections summed per congestion control algorithm.
    pub congestion_control: Vec<CcAggregate>,
    /// The namespace's congestion control settings.
    pub congestion_control_sysctl: CongestionControl,
    /// Which socket signals this kernel provides.
    pub socket_signals: Signals,
    /// Close events the kernel could not queue (ring buffer full): short connections
    /// that may be missing from `sockets`.
    pub close_events_lost: u64,
    /// Retransmission events the kernel did not pass to netdoctor (its program was already
    /// running on that CPU): the sockets' full-size and smaller retransmits may add up to
    /// less than their `retransmits` by these.
    pub retransmit_events_missed: u64,
    /// The WireGuard tunnel the interface carries and its peers, read when the observation
    /// ended (null for other interfaces).
    pub tunnel: Option<TunnelPeers>,
    /// WireGuard received per remote endpoint during the observation, on this interface or,
    /// for a WireGuard interface, on its underlays (watched too): loss from the messages'
    /// counters, round trips from handshakes this host sent.
    pub wireguard_paths: Vec<EndpointPath>,
}

/// A WireGuard interface's peers (kernel, wireguard-go, tailscaled).
#[derive(Debug, Serialize)]
pub struct TunnelPeers {
    /// "wireguard".
    pub kind: String,
    /// The daemon serving it ("tailscaled", "" for kernel WireGuard).
    pub daemon: String,
    /// Its UDP port.
    pub port: u16,
    /// Its peers: keys, current endpoints, counters, last handshakes.
    pub peers: Vec<Peer>,
    /// Each peer's path, as tailscaled reports it (empty for other daemons).
    pub paths: Vec<PeerPath>,
}

impl TunnelPeers {
    /// The peers of `iface`'s WireGuard tunnel, if it carries one whose peers can be read.
    pub(super) async fn read(iface: &Interface) -> Option<Self> {
        let details = link::details(iface.index).await.ok()?;
        let tun = tunnel::identify(iface, &details).await;
        let device = tun.wireguard?;
        Some(TunnelPeers {
            kind: "wireguard".into(),
            daemon: tun.daemon.map(|d| d.command).unwrap_or_default(),
            port: device.listen_port,
            peers: device.peers,
            paths: tun.tailscale.map(|t| t.paths.peers).unwrap_or_default(),
        })
    }
}

impl FlowsReport {
    pub(super) fn collect(
        dp: &Dataplane<'_>,
        sockets: Option<(&SocketProbes<'_>, &Baseline)>,
        iface: Interface,
        hooks: Hooks,
        elapsed: Duration,
        top: usize,
    ) -> crate::kernel::Result<Self> {
        let socket_signals = sockets.map(|(p, _)| p.signals()).unwrap_or_default();
        let close_events_lost = sockets.map_or(0, |(p, _)| p.lost_events());
        let retransmit_events_missed = sockets.map_or(0, |(p, _)| p.retransmit_runs_missed());
        let socket_rows = match sockets {
            Some((probes, baseline)) => {
                baseline.rows(probes, iface.index, elapsed.as_secs_f64())?
            }
            None => Vec::new(),
        };
        let counters = dp.counters(iface.index)?.unwrap_or_default();
        let (all, flow_table) = dp.flows_and_table()?;
        let flows: Vec<Flow> = all
            .into_iter()
            .filter(|f| f.ifindex == iface.index)
            .collect();
        let wireguard_paths = wg_path::by_endpoint(
            &dp.wg_sessions()?,
            &dp.wg_handshakes()?,
            wg_path::mono_now_ns(),
        );
        let too_big = dp
            .too_big()?
            .into_iter()
            .filter(|t| t.ifindex == iface.index)
            .collect();
        Ok(FlowsReport {
            hooks,
            duration_s: elapsed.as_secs_f64(),
            size_buckets: (0..=SIZE_BUCKET_BOUNDS.len()).map(bucket_label).collect(),
            counters,
            flows_total: flows.len(),
            flow_table,
            tunnels: tunnel_traffic::from_flows(&flows),
            flows: top_by_bytes(flows, top),
            too_big,
            congestion_control: rates::by_cc(&socket_rows),
            sockets: socket_rows,
            congestion_control_sysctl: CongestionControl::read(),
            socket_signals,
            close_events_lost,
            retransmit_events_missed,
            interface: iface,
            tunnel: None,
            wireguard_paths,
        })
    }
}

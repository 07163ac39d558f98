//! `netdoctor flows IFACE`: attach, observe, report flows and counters.

use std::io::IsTerminal;
use std::mem::MaybeUninit;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::shutdown::Interrupts;
use super::{output, FlowsArgs};
use crate::config::iface::{self, Interface};
use crate::config::sysctl::CongestionControl;
use crate::config::wireguard::tailscale::PeerPath;
use crate::config::wireguard::Peer;
use crate::config::{link, tunnel};
use crate::facts::underlay;
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
    async fn read(iface: &Interface) -> Option<Self> {
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
    fn collect(
        dp: &Dataplane<'_>,
        sockets: Option<(&SocketProbes<'_>, &Baseline)>,
        iface: Interface,
        hooks: Hooks,
        elapsed: Duration,
        top: usize,
    ) -> crate::kernel::Result<Self> {
        let socket_signals = sockets.map(|(p, _)| p.signals()).unwrap_or_default();
        let close_events_lost = sockets.map_or(0, |(p, _)| p.lost_events());
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
            interface: iface,
            tunnel: None,
            wireguard_paths,
        })
    }
}

pub(super) async fn run(args: FlowsArgs, interrupts: Interrupts) -> anyhow::Result<ExitCode> {
    let options = args.dataplane.options()?;
    let iface = iface::by_name(&args.interface).await?;
    let mut socket_storage = MaybeUninit::uninit();
    let probes = match SocketProbes::load(&mut socket_storage) {
        Ok(p) => {
            for what in p.signals().missing() {
                tracing::warn!("{what} on this kernel");
            }
            Some(p)
        }
        Err(e) => {
            tracing::warn!("socket telemetry unavailable ({e}); reporting packets only");
            None
        }
    };
    // After the sockets: whether they loaded decides how local connections are accounted.
    let options = crate::facts::signals::with_sockets(options, probes.as_ref());
    let mut storage = MaybeUninit::uninit();
    let mut dp = Dataplane::load(&mut storage, options)?;
    let hooks = dp.attach(&iface.target())?;
    watch_underlays(&mut dp, &iface).await;
    // The window starts with the socket baseline: announce it only once that is taken.
    let baseline = probes.as_ref().map(Baseline::take).transpose()?;
    eprintln!(
        "netdoctor: watching {} ({}, MTU {}; ingress {}, egress {}) for {}; Ctrl-C stops early",
        iface.name,
        iface.kind,
        iface.mtu,
        hooks.ingress,
        hooks.egress,
        humantime::format_duration(args.duration)
    );
    let started = Instant::now();
    observe(args.duration, &interrupts, || {
        if let Some(p) = &probes {
            if let Err(e) = p.poll_closed() {
                tracing::warn!("reading close events: {e}");
            }
        }
    })
    .await;
    let sockets = probes.as_ref().zip(baseline.as_ref());
    let mut report = FlowsReport::collect(&dp, sockets, iface, hooks, started.elapsed(), args.top)?;
    drop(dp);
    report.tunnel = TunnelPeers::read(&report.interface).await;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        output::print_flows(&report);
    }
    Ok(ExitCode::SUCCESS)
}

/// Watches the underlays of a WireGuard interface too: its peers' path (loss, round trips)
/// is measured there. One that cannot be watched is named, and its peers' path is not shown.
async fn watch_underlays(dp: &mut Dataplane<'_>, iface: &Interface) {
    let Ok(details) = link::details(iface.index).await else {
        return;
    };
    let tun = tunnel::identify(iface, &details).await;
    if tun.encap != Some(crate::kernel::views::Encap::Wireguard) {
        return;
    }
    let all = iface::list().await.unwrap_or_default();
    let under = underlay::underlay(&tun, &details, &all).await;
    for u in under.watch.iter().filter(|u| u.index != iface.index) {
        if let Err(e) = dp.attach(&u.target()) {
            tracing::warn!(
                "could not watch the underlay {} (the peers' path is not measured there): {e}",
                u.name
            );
        }
    }
}

/// Waits for `duration` or Ctrl-C (the first SIGINT, which then does not stop the command),
/// calling `every_100ms` meanwhile (to drain event rings) and showing the time left when
/// stderr is a terminal.
pub(super) async fn observe(
    duration: Duration,
    interrupts: &Interrupts,
    mut every_100ms: impl FnMut(),
) {
    let tty = std::io::stderr().is_terminal();
    let deadline = tokio::time::Instant::now() + duration;
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    let mut ticks = 0u64;
    let stop_early = interrupts.stop_early();
    tokio::pin!(stop_early);
    loop {
        tokio::select! {
            _ = tokio::time::sleep_until(deadline) => break,
            _ = &mut stop_early => {
                eprintln!("\nnetdoctor: interrupted; reporting what was seen so far");
                break;
            }
            _ = tick.tick() => {
                every_100ms();
                ticks += 1;
                if tty && ticks % 10 == 1 {
                    let left = deadline.saturating_duration_since(tokio::time::Instant::now());
                    eprint!("\r  {}s left ", left.as_secs());
                }
            }
        }
    }
    if tty {
        eprint!("\r            \r");
    }
}

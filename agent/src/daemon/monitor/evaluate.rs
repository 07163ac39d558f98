//! Closing a window: facts, rules, history, and path-MTU probes of tunnels.

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::config::bond;
use crate::config::bond::LinkCounter;
use crate::config::bridge as bridge_config;
use crate::config::cpu::{DaemonSample, HostSample};
use crate::config::firewall::Ruleset;
use crate::config::iface::{self, Interface};
use crate::config::link;
use crate::config::route_table::{self, TableRoute};
use crate::config::tunnel;
use crate::daemon::store::{CcRetrans, Sample};
use crate::facts::build::{Observation, Readings};
use crate::facts::probe::{self, ProbeOptions};
use crate::facts::underlay;
use crate::facts::Facts;
use crate::facts::{bridge, watch};
use crate::kernel::drops::{DropCount, DropProbe};
use crate::kernel::packet;
use crate::kernel::packet::counters::{bucket_label, IfaceCounters};
use crate::kernel::sockets::rates::SocketRow;
use crate::rules;

use super::{now_ms, Monitor, Role, PRUNE_EVERY};
use crate::facts::probe::MAX_PROBE_TARGETS;

/// What every selected interface's evaluation of one window shares.
#[derive(Clone, Copy)]
struct Window<'a> {
    all: &'a [Interface],
    window: &'a packet::Snapshot,
    rows: Option<&'a [SocketRow]>,
    drops_now: &'a [DropCount],
    elapsed: Duration,
    routes: &'a [TableRoute],
    firewall: &'a Ruleset,
    links_now: &'a [LinkCounter],
    host_cpu: (Option<HostSample>, Option<HostSample>),
}

impl Monitor<'_> {
    /// Closes the window: facts, rules, history and the view for every selected interface.
    pub(super) async fn evaluate(&mut self) -> anyhow::Result<()> {
        let elapsed = self.window_start.elapsed();
        self.window_start = Instant::now();
        let secs = elapsed.as_secs_f64();
        let now = now_ms();

        let dp_now = self.dp_snapshot()?;
        let window = dp_now.since(&self.prev_dp);
        if let Some(dp) = &self.dp {
            // Addresses and forwarding change while the agent runs (local_tcp.rs).
            dp.refresh_local_addrs();
        }
        let rows: Option<Vec<SocketRow>> = match (&self.sockets, &self.baseline) {
            (Some(s), Some(b)) => {
                let (rows, next) = b.close(s, secs)?;
                self.baseline = Some(next);
                Some(rows)
            }
            _ => None,
        };
        let drops_now = self
            .drops
            .as_ref()
            .map(DropProbe::counts)
            .transpose()?
            .unwrap_or_default();
        let all = iface::list().await?;
        // Configuration every interface's facts share: routes, firewall, link counters.
        let routes = route_table::dump().await.unwrap_or_else(|e| {
            tracing::debug!("{e}");
            Vec::new()
        });
        let firewall = Ruleset::read();
        for e in &firewall.errors {
            tracing::debug!("firewall rules partly unread: {e}");
        }
        self.timeline_window(&routes, &firewall, now).await;
        let links_now = bond::counters().await.unwrap_or_default();
        let host_cpu_now = HostSample::read().ok();
        let shared = Window {
            all: &all,
            window: &window,
            rows: rows.as_deref(),
            drops_now: &drops_now,
            elapsed,
            routes: &routes,
            firewall: &firewall,
            links_now: &links_now,
            host_cpu: (self.prev_host_cpu, host_cpu_now),
        };

        let selected: Vec<Interface> = self
            .watched
            .values()
            .filter(|w| w.role == Role::Selected)
            .map(|w| w.iface.clone())
            .filter(|w| all.iter().any(|i| i.index == w.index))
            .collect();
        let mut evaluated = Vec::with_capacity(selected.len());
        let mut underlays = HashSet::new();
        for me in &selected {
            match self.evaluate_one(me, &shared, now).await {
                Ok((facts, underlay)) => {
                    underlays.extend(underlay);
                    evaluated.push((me.clone(), facts));
                }
                Err(e) => tracing::warn!(iface = %me.name, "evaluation failed: {e:#}"),
            }
        }
        self.timeline_peers(&evaluated, now);
        let new_underlays = underlays.difference(&self.underlays_wanted).count() > 0;
        self.underlays_wanted = underlays;

        // A failing store is logged once, by the store (store::health), and shown by
        // /readyz and the metrics: the window is published all the same.
        let active = match self.shared.store.active_findings() {
            Ok(active) => active,
            Err(_) => self.shared.view().active.clone(),
        };
        self.publish_window(
            &dp_now,
            &window,
            &evaluated,
            rows.as_deref(),
            &drops_now,
            &active,
            secs,
            now,
        );
        self.prev_dp = dp_now;
        self.prev_drops = drops_now;
        self.prev_links = links_now;
        self.prev_host_cpu = host_cpu_now;

        if self.last_prune.is_none_or(|t| t.elapsed() >= PRUNE_EVERY) {
            self.last_prune = Some(Instant::now());
            if self.shared.store.prune_events(now).is_err() {
                tracing::debug!("configuration changes not pruned");
            }
            match self.shared.store.prune(now) {
                Ok(p) if p.samples + p.findings > 0 => {
                    tracing::debug!(samples = p.samples, findings = p.findings, "pruned history")
                }
                // A failure is logged once by the store (store::health).
                Ok(_) | Err(_) => {}
            }
        }
        self.shared.ready.store(true, Ordering::Release);
        if new_underlays {
            self.reconcile().await;
        }
        Ok(())
    }

    /// One interface's window: facts, findings, a sample. Returns the facts and the
    /// indexes of the other interfaces it needs watched (underlay candidates, multipath
    /// nexthops, the uplink).
    async fn evaluate_one(
        &mut self,
        me: &Interface,
        w: &Window<'_>,
        now: i64,
    ) -> anyhow::Result<(Facts, Vec<u32>)> {
        let Window {
            all,
            window,
            rows,
            drops_now,
            elapsed,
            routes,
            firewall,
            links_now,
            host_cpu,
        } = *w;
        let details = link::details(me.index).await?;
        let tun = tunnel::identify(me, &details).await;
        for note in &tun.notes {
            tracing::debug!(iface = %me.name, "{note}");
        }
        if let Some(tp) = tun.port_to_recognise() {
            match self
                .dp
                .as_mut()
                .map_or(Ok(false), |dp| dp.add_tunnel_port(tp))
            {
                Ok(true) => {
                    tracing::info!(iface = %me.name, port = tp.port, encap = ?tp.encap, "recognising the tunnel's UDP port on the underlay")
                }
                Ok(false) => {}
                Err(e) => tracing::warn!(iface = %me.name, "tunnel port {}: {e}", tp.port),
            }
        }
        let underlay = underlay::underlay(&tun, &details, all).await;
        let bridge = bridge_config::of(me, &details, all)
            .await
            .unwrap_or_else(|e| {
                tracing::debug!(iface = %me.name, "{e}: the bridge's ports are unknown");
                None
            });
        let start = Readings::from_parts(
            self.prev_wireguard
                .get(&me.name)
                .cloned()
                .or_else(|| tun.wireguard.clone()),
            self.prev_drops.clone(),
        )
        .with_links(self.prev_links.clone())
        .with_cpu(
            self.prev_daemon_cpu.get(&me.name).cloned().map(Ok),
            host_cpu.0,
        );
        let end = Readings::of_tunnel(&tun, drops_now.to_vec())
            .with_links(links_now.to_vec())
            .with_cpu(
                tun.daemon.as_ref().map(|d| DaemonSample::read(d.pid)),
                host_cpu.1,
            );
        let observed = Observation {
            me,
            details: &details,
            all,
            tun: &tun,
            underlay: &underlay,
            window,
            sockets: rows,
            start: &start,
            end: &end,
            elapsed,
            firewall,
            routes,
        };
        let mut facts = observed
            .facts(Instant::now() + crate::facts::handshake::GRACE)
            .await?;
        if let Some(dev) = &tun.wireguard {
            self.prev_wireguard.insert(me.name.clone(), dev.clone());
        }
        for note in observed.cpu_notes() {
            tracing::debug!(iface = %me.name, "{note}");
        }
        match end.daemon_cpu() {
            Some(sample) => self.prev_daemon_cpu.insert(me.name.clone(), sample.clone()),
            None => self.prev_daemon_cpu.remove(&me.name),
        };
        if let Some(b) = &bridge {
            facts.bridge = bridge::facts(
                b,
                self.dp.is_some().then_some(window),
                self.drops.is_some().then(|| (start.drops(), end.drops())),
            );
        }
        if let Some(p) = self.probes.get(&me.name) {
            probe::targets::apply_probes(&mut facts, &tun, &p.results);
        }
        self.maybe_probe(me, &facts, &underlay, tun.kind.is_some());

        let found = rules::evaluate_partial(&self.rules, &facts.to_json(), &self.missing).findings;
        // The store logs its failures once and /readyz shows them: a failed write does not
        // fail the interface's evaluation.
        if let Ok(transitions) = self.shared.store.record(&me.name, now, &found) {
            self.opened(&me.name, &facts, &transitions.opened, now);
            for k in &transitions.resolved {
                tracing::info!(iface = %me.name, finding = %k.id, "finding resolved");
            }
        }
        let counters = window.counters(me.index);
        let mut sample = sample(me, &facts, &counters, rows, found.len(), elapsed, now);
        sample.wireguard_peers =
            super::peer_paths::peer_paths(&facts.peers, self.shared.config.max_path_peers);
        if self.shared.store.insert_sample(&sample).is_err() {
            tracing::debug!(iface = %me.name, "sample not kept");
        }
        let also = watch::also_watch(
            me,
            &underlay,
            routes,
            all,
            facts.host.ip_forward || facts.host.ip6_forward,
            &facts.nat.uplinks,
        );
        let ports = watch::bridge_ports(me, &underlay, &also, bridge.as_ref());
        let wanted = underlay.watch.iter().chain(also.iter()).chain(ports.iter());
        Ok((facts, wanted.map(|u| u.index).collect()))
    }

    /// Starts a path-MTU probe round for a tunnel when one is due. Results arrive on
    /// `probe_rx` and are used from the next window on.
    fn maybe_probe(
        &mut self,
        me: &Interface,
        facts: &Facts,
        underlay: &underlay::Underlay,
        is_tunnel: bool,
    ) {
        if !self.shared.config.probe || !is_tunnel {
            return;
        }
        let every = self.shared.config.probe_interval;
        let state = self.probes.entry(me.name.clone()).or_default();
        if state.running || state.last_started.is_some_and(|t| t.elapsed() < every) {
            return;
        }
        let targets: Vec<_> = probe::targets::probe_targets(facts, underlay, me)
            .into_iter()
            .take(MAX_PROBE_TARGETS)
            .collect();
        if targets.is_empty() {
            return;
        }
        state.running = true;
        state.last_started = Some(Instant::now());
        let tx = self.probe_tx.clone();
        let name = me.name.clone();
        tokio::task::spawn_blocking(move || {
            let mut results = Vec::new();
            for (label, target, max_size) in targets {
                let options = ProbeOptions {
                    max_size,
                    ..ProbeOptions::default()
                };
                match probe::probe(target, &options) {
                    Ok(r) => results.push((label, r)),
                    Err(e) => tracing::warn!(iface = %name, "path-MTU probe toward {target}: {e}"),
                }
            }
            let _ = tx.send((name, results));
        });
    }
}

/// One interface's sample of one window.
fn sample(
    me: &Interface,
    facts: &Facts,
    w: &IfaceCounters,
    rows: Option<&[SocketRow]>,
    active_findings: usize,
    elapsed: Duration,
    now: i64,
) -> Sample {
    let secs = elapsed.as_secs_f64().max(1e-3);
    let mut size_buckets = BTreeMap::new();
    for dir in [&w.ingress, &w.egress] {
        for (i, v) in dir.size_buckets.iter().enumerate() {
            *size_buckets.entry(bucket_label(i)).or_insert(0) += v;
        }
    }
    let mut retrans_by_cc: BTreeMap<String, CcRetrans> = BTreeMap::new();
    for r in rows
        .unwrap_or_default()
        .iter()
        .filter(|r| r.socket.ifindex == me.index)
    {
        let e = retrans_by_cc.entry(r.socket.cc.clone()).or_default();
        e.segments += r.data_segs_sent;
        e.retransmits += r.retransmits;
    }
    for e in retrans_by_cc.values_mut() {
        e.ratio = if e.segments > 0 {
            e.retransmits as f64 / e.segments as f64
        } else {
            0.0
        };
    }
    Sample {
        ts_ms: now,
        interface: me.name.clone(),
        window_s: secs,
        rx_bps: w.ingress.bytes as f64 * 8.0 / secs,
        tx_bps: w.egress.bytes as f64 * 8.0 / secs,
        rx_pps: w.ingress.segments as f64 / secs,
        tx_pps: w.egress.segments as f64 / secs,
        mtu: i64::from(me.mtu),
        size_buckets,
        retrans_by_cc,
        tcp_retrans_ratio: facts.traffic.tcp_retrans_ratio,
        drops_by_reason: facts
            .drops
            .by_reason
            .iter()
            .map(|(k, v)| (k.clone(), u64::try_from(*v).unwrap_or(0)))
            .collect(),
        overhead_expected: facts.tunnel.overhead_expected,
        overhead_measured: facts.tunnel.overhead_measured,
        path_mtu: facts.probe.path_mtu,
        probe_blackhole: facts.probe.blackhole,
        active_findings: active_findings as u64,
        wireguard_peers: Vec::new(),
    }
}

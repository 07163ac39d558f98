//! Closing a window: facts, rules, history, and path-MTU probes of tunnels.

use std::collections::HashSet;
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
use crate::facts::build::{Observation, Readings};
use crate::facts::probe;
use crate::facts::underlay;
use crate::facts::Facts;
use crate::facts::{bridge, watch};
use crate::kernel::drops::{DropCount, DropProbe};
use crate::kernel::packet;
use crate::kernel::sockets::rates::SocketRow;
use crate::rules;

use super::sample::sample;
use super::{now_ms, Monitor, Role, PRUNE_EVERY};

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
        let rows = self.close_sockets(secs)?;
        let drops_now = self
            .drops
            .as_ref()
            .map(DropProbe::counts)
            .transpose()?
            .unwrap_or_default();
        let all = iface::list().await?;
        let (routes, firewall) = self.shared_config(now).await;
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
        let (evaluated, underlays) = self.evaluate_selected(&shared, now).await;
        self.timeline_peers(&evaluated, now);
        let new_underlays = underlays.difference(&self.underlays_wanted).count() > 0;
        self.underlays_wanted = underlays;

        let active = self.active_findings();
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

        self.prune_when_due(now);
        release_freed_memory();
        self.shared.ready.store(true, Ordering::Release);
        if new_underlays {
            self.reconcile().await;
        }
        Ok(())
    }

    /// Closes the socket baseline: the window's connection rows, `None` without socket
    /// probes.
    fn close_sockets(&mut self, secs: f64) -> anyhow::Result<Option<Vec<SocketRow>>> {
        Ok(match (&self.sockets, &self.baseline) {
            (Some(s), Some(b)) => {
                let (rows, next) = b.close(s, secs)?;
                self.baseline = Some(next);
                Some(rows)
            }
            _ => None,
        })
    }

    /// Configuration every interface's facts share: routes and firewall (also entered in
    /// the timeline).
    async fn shared_config(&mut self, now: i64) -> (Vec<TableRoute>, Ruleset) {
        let routes = route_table::dump().await.unwrap_or_else(|e| {
            tracing::debug!("{e}");
            Vec::new()
        });
        let firewall = Ruleset::read();
        for e in &firewall.errors {
            tracing::debug!("firewall rules partly unread: {e}");
        }
        self.timeline_window(&routes, &firewall, now).await;
        (routes, firewall)
    }

    /// Evaluates every selected interface that still exists: their facts, and the indexes
    /// of the interfaces they need watched.
    async fn evaluate_selected(
        &mut self,
        shared: &Window<'_>,
        now: i64,
    ) -> (Vec<(Interface, Facts)>, HashSet<u32>) {
        let selected: Vec<Interface> = self
            .watched
            .values()
            .filter(|w| w.role == Role::Selected)
            .map(|w| w.iface.clone())
            .filter(|w| shared.all.iter().any(|i| i.index == w.index))
            .collect();
        let mut evaluated = Vec::with_capacity(selected.len());
        let mut underlays = HashSet::new();
        for me in &selected {
            match self.evaluate_one(me, shared, now).await {
                Ok((facts, underlay)) => {
                    underlays.extend(underlay);
                    evaluated.push((me.clone(), facts));
                }
                Err(e) => tracing::warn!(iface = %me.name, "evaluation failed: {e:#}"),
            }
        }
        (evaluated, underlays)
    }

    /// The active findings, or the last window's when the store cannot be read.
    fn active_findings(&self) -> Vec<crate::daemon::store::StoredFinding> {
        // A failing store is logged once, by the store (store::health), and shown by
        // /readyz and the metrics: the window is published all the same.
        match self.shared.store.active_findings() {
            Ok(active) => active,
            Err(_) => self.shared.view().active.clone(),
        }
    }

    /// Prunes the history at most every `PRUNE_EVERY`.
    fn prune_when_due(&mut self, now: i64) {
        if self.last_prune.is_some_and(|t| t.elapsed() < PRUNE_EVERY) {
            return;
        }
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

    /// One interface's window: facts, findings, a sample. Returns the facts and the
    /// indexes of the other interfaces it needs watched (underlay candidates, multipath
    /// nexthops, the uplink).
    async fn evaluate_one(
        &mut self,
        me: &Interface,
        w: &Window<'_>,
        now: i64,
    ) -> anyhow::Result<(Facts, Vec<u32>)> {
        let details = link::details(me.index).await?;
        let tun = tunnel::identify(me, &details).await;
        for note in &tun.notes {
            tracing::debug!(iface = %me.name, "{note}");
        }
        self.recognise_tunnel_port(me, &tun);
        let underlay = underlay::underlay(&tun, &details, w.all).await;
        let bridge = bridge_config::of(me, &details, w.all)
            .await
            .unwrap_or_else(|e| {
                tracing::debug!(iface = %me.name, "{e}: the bridge's ports are unknown");
                None
            });
        let (start, end) = self.readings(me, &tun, w);
        let observed = Observation {
            me,
            details: &details,
            all: w.all,
            tun: &tun,
            underlay: &underlay,
            window: w.window,
            sockets: w.rows,
            start: &start,
            end: &end,
            elapsed: w.elapsed,
            firewall: w.firewall,
            routes: w.routes,
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
                self.dp.is_some().then_some(w.window),
                self.drops.is_some().then(|| (start.drops(), end.drops())),
            );
        }
        if let Some(p) = self.probes.get(&me.name) {
            probe::targets::apply_probes(&mut facts, &tun, &p.results);
        }
        self.maybe_probe(me, &facts, &underlay, tun.kind.is_some());
        self.record_window(me, &facts, w, now);
        let also = watch::also_watch(
            me,
            &underlay,
            w.routes,
            w.all,
            facts.host.ip_forward || facts.host.ip6_forward,
            &facts.nat.uplinks,
        );
        let ports = watch::bridge_ports(me, &underlay, &also, bridge.as_ref());
        let wanted = underlay.watch.iter().chain(also.iter()).chain(ports.iter());
        Ok((facts, wanted.map(|u| u.index).collect()))
    }

    /// Has the data plane recognise the tunnel's UDP port on the underlay.
    fn recognise_tunnel_port(&mut self, me: &Interface, tun: &tunnel::ConfiguredTunnel) {
        let Some(tp) = tun.port_to_recognise() else {
            return;
        };
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

    /// The readings at the window's start (remembered from the last window) and end.
    fn readings(
        &self,
        me: &Interface,
        tun: &tunnel::ConfiguredTunnel,
        w: &Window<'_>,
    ) -> (Readings, Readings) {
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
            w.host_cpu.0,
        );
        let end = Readings::of_tunnel(tun, w.drops_now.to_vec())
            .with_links(w.links_now.to_vec())
            .with_cpu(
                tun.daemon.as_ref().map(|d| DaemonSample::read(d.pid)),
                w.host_cpu.1,
            );
        (start, end)
    }

    /// Evaluates the rules on the facts, records the findings' transitions and keeps the
    /// window's sample.
    fn record_window(&mut self, me: &Interface, facts: &Facts, w: &Window<'_>, now: i64) {
        let found = rules::evaluate_partial(&self.rules, &facts.to_json(), &self.missing).findings;
        // The store logs its failures once and /readyz shows them: a failed write does not
        // fail the interface's evaluation.
        if let Ok(transitions) = self.shared.store.record(&me.name, now, &found) {
            self.opened(&me.name, facts, &transitions.opened, now);
            for k in &transitions.resolved {
                tracing::info!(iface = %me.name, finding = %k.id, "finding resolved");
            }
        }
        let counters = w.window.counters(me.index);
        let mut sample = sample(me, facts, &counters, w.rows, found.len(), w.elapsed, now);
        sample.wireguard_peers =
            super::peer_paths::peer_paths(&facts.peers, self.shared.config.max_path_peers);
        if self.shared.store.insert_sample(&sample).is_err() {
            tracing::debug!(iface = %me.name, "sample not kept");
        }
    }
}

/// Hands the memory freed by the window back to the system. A window of many active flows
/// (a million, when a gateway's table fills at once) allocates its flows in large blocks;
/// glibc keeps the freed ones for reuse, so the agent would stay at that window's size
/// while later windows hold a fraction of it.
fn release_freed_memory() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim only returns free memory of the allocator's own to the system.
    unsafe {
        libc::malloc_trim(0);
    }
}

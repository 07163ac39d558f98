//! The monitor: owns the BPF programs, follows link events, and every interval turns the
//! data plane, socket and drop counters into facts, findings, history and the view the API
//! serves. The same collectors and rules as `netdoctor diagnose`, on one long-lived set of
//! programs whose windows follow each other without gaps.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, watch, Notify};

use super::select::Selector;
use super::state::{DropView, FlowView, Rates, Shared, SocketView};
use crate::counters::{bucket_label, IfaceCounters};
use crate::dataplane::{self, Dataplane};
use crate::diagnose::collect::{self, Observation, Snapshot};
use crate::diagnose::tunnel;
use crate::drops::{DropCount, DropProbe, NOT_NETWORK_DROPS};
use crate::facts::link;
use crate::facts::wireguard::Device;
use crate::facts::Facts;
use crate::iface::{self, Interface};
use crate::probe::{self, ProbeOptions, ProbeResult};
use crate::rules::{self, RuleSet};
use crate::sockets::window::{Baseline, SocketRow};
use crate::sockets::SocketProbes;
use crate::store::{CcRetrans, Sample};

/// Interfaces are re-read this often even without link events.
const RESYNC: Duration = Duration::from_secs(30);
/// Close events are moved out of their ring this often.
const RING_POLL: Duration = Duration::from_millis(100);
/// An interface that refused attachment is retried after this long.
const ATTACH_RETRY: Duration = Duration::from_secs(60);
/// History is pruned at most this often.
const PRUNE_EVERY: Duration = Duration::from_secs(60);
/// Probes per tunnel and round, so a round stays short.
const MAX_PROBE_TARGETS: usize = 4;

/// Why an interface is attached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    /// Selected: evaluated and reported.
    Selected,
    /// Attached only to measure a selected tunnel's underlay.
    Underlay,
}

#[derive(Debug)]
struct Watched {
    iface: Interface,
    role: Role,
}

/// Path-MTU probing of one tunnel.
#[derive(Debug, Default)]
struct ProbeState {
    last_started: Option<Instant>,
    running: bool,
    results: Vec<(String, ProbeResult)>,
}

/// The long-lived collectors and everything remembered between windows.
pub struct Monitor<'obj> {
    shared: Arc<Shared>,
    selector: Selector,
    rules: RuleSet,
    dp: Dataplane<'obj>,
    sockets: Option<SocketProbes<'obj>>,
    drops: Option<DropProbe<'obj>>,
    watched: HashMap<u32, Watched>,
    refused: HashMap<u32, Instant>,
    underlays_wanted: HashSet<u32>,
    window_start: Instant,
    prev_dp: dataplane::Snapshot,
    prev_drops: Vec<DropCount>,
    baseline: Option<Baseline>,
    prev_wireguard: HashMap<String, Device>,
    probes: HashMap<String, ProbeState>,
    probe_tx: mpsc::UnboundedSender<(String, Vec<(String, ProbeResult)>)>,
    probe_rx: mpsc::UnboundedReceiver<(String, Vec<(String, ProbeResult)>)>,
    last_prune: Option<Instant>,
}

impl std::fmt::Debug for Monitor<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Monitor")
            .field("watched", &self.watched)
            .finish_non_exhaustive()
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

impl<'obj> Monitor<'obj> {
    /// Takes the loaded collectors (socket and drop probes are optional: their absence is
    /// noted in the health notes).
    pub fn new(
        shared: Arc<Shared>,
        rules: RuleSet,
        dp: Dataplane<'obj>,
        sockets: Option<SocketProbes<'obj>>,
        drops: Option<DropProbe<'obj>>,
    ) -> anyhow::Result<Self> {
        let selector = Selector::new(&shared.config.interfaces, &shared.config.exclude)?;
        let baseline = sockets.as_ref().map(Baseline::take).transpose()?;
        let prev_drops = drops
            .as_ref()
            .map(DropProbe::counts)
            .transpose()?
            .unwrap_or_default();
        let (probe_tx, probe_rx) = mpsc::unbounded_channel();
        Ok(Monitor {
            shared,
            selector,
            rules,
            dp,
            sockets,
            drops,
            watched: HashMap::new(),
            refused: HashMap::new(),
            underlays_wanted: HashSet::new(),
            window_start: Instant::now(),
            prev_dp: dataplane::Snapshot::default(),
            prev_drops,
            baseline,
            prev_wireguard: HashMap::new(),
            probes: HashMap::new(),
            probe_tx,
            probe_rx,
            last_prune: None,
        })
    }

    /// Runs until `shutdown` turns true; then detaches everything (dropping the programs'
    /// links) and returns.
    pub async fn run(mut self, mut shutdown: watch::Receiver<bool>) -> anyhow::Result<()> {
        let changed = Arc::new(Notify::new());
        let events = match super::links::watch(changed.clone()) {
            Ok(task) => Some(task),
            Err(e) => {
                tracing::warn!("{e:#}; interfaces are re-read every {}s only", RESYNC.as_secs());
                None
            }
        };
        self.reconcile().await;
        self.prev_dp = self.dp.snapshot()?;
        self.window_start = Instant::now();

        let interval = self.shared.config.interval;
        let mut evaluate = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
        evaluate.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut resync = tokio::time::interval(RESYNC);
        let mut ring = tokio::time::interval(RING_POLL);
        ring.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        loop {
            tokio::select! {
                _ = shutdown.changed() => break,
                () = changed.notified() => {
                    // Events come in bursts (a new tunnel: create, address, up): settle first.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    self.reconcile().await;
                }
                _ = resync.tick() => self.reconcile().await,
                _ = ring.tick() => {
                    if let Some(s) = &self.sockets {
                        if let Err(e) = s.poll_closed() {
                            tracing::warn!("reading connection-close events: {e}");
                        }
                    }
                }
                Some((name, results)) = self.probe_rx.recv() => {
                    let p = self.probes.entry(name).or_default();
                    p.running = false;
                    p.results = results;
                }
                _ = evaluate.tick() => {
                    let started = Instant::now();
                    if let Err(e) = self.evaluate().await {
                        tracing::error!("evaluation failed: {e:#}");
                    }
                    self.shared.evaluation_seconds.observe(started.elapsed().as_secs_f64());
                }
            }
        }
        if let Some(task) = events {
            task.abort();
        }
        tracing::info!(
            interfaces = self.watched.len(),
            "detaching from every interface"
        );
        Ok(())
    }

    /// Makes the attachments match the selection and the interfaces that exist now.
    async fn reconcile(&mut self) {
        let all = match iface::list().await {
            Ok(all) => all,
            Err(e) => {
                tracing::warn!("listing interfaces: {e}");
                return;
            }
        };
        let by_index: HashMap<u32, &Interface> = all.iter().map(|i| (i.index, i)).collect();

        // Gone, or renamed: forget (the kernel already removed a deleted device's links).
        let gone: Vec<u32> = self
            .watched
            .iter()
            .filter(|(idx, w)| by_index.get(idx).is_none_or(|i| i.name != w.iface.name))
            .map(|(idx, _)| *idx)
            .collect();
        for idx in gone {
            if let Some(w) = self.watched.remove(&idx) {
                self.dp.detach(idx);
                tracing::info!(iface = %w.iface.name, "interface gone; forgotten");
                if w.role == Role::Selected && !all.iter().any(|i| i.name == w.iface.name) {
                    if let Err(e) = self.shared.store.resolve_interface(&w.iface.name, now_ms()) {
                        tracing::warn!("resolving the findings of {}: {e}", w.iface.name);
                    }
                }
                self.prev_wireguard.remove(&w.iface.name);
                self.probes.remove(&w.iface.name);
            }
        }
        self.refused.retain(|idx, _| by_index.contains_key(idx));

        for i in &all {
            let role = if self.selector.wants(i) {
                Role::Selected
            } else if self.underlays_wanted.contains(&i.index) {
                Role::Underlay
            } else {
                continue;
            };
            match self.watched.get_mut(&i.index) {
                Some(w) => {
                    if w.iface.mtu != i.mtu {
                        if let Err(e) = self.dp.watch(i.index, i.mtu, i.link) {
                            tracing::warn!(iface = %i.name, "updating the MTU: {e}");
                        }
                    }
                    w.iface = i.clone();
                    w.role = role;
                }
                None => {
                    if self
                        .refused
                        .get(&i.index)
                        .is_some_and(|t| t.elapsed() < ATTACH_RETRY)
                    {
                        continue;
                    }
                    match self.dp.attach(i) {
                        Ok(_) => {
                            self.refused.remove(&i.index);
                            self.watched.insert(
                                i.index,
                                Watched {
                                    iface: i.clone(),
                                    role,
                                },
                            );
                        }
                        Err(e) => {
                            self.shared.attach_failures.fetch_add(1, Ordering::Relaxed);
                            self.refused.insert(i.index, Instant::now());
                            tracing::warn!(iface = %i.name, "not watched: {e}");
                        }
                    }
                }
            }
        }
        self.publish_interfaces(&all);
    }

    /// Lists every interface in the view, keeping what the last evaluation learnt.
    fn publish_interfaces(&self, all: &[Interface]) {
        let mut view = self.shared.view_mut();
        let mut next = BTreeMap::new();
        for i in all {
            let w = self.watched.get(&i.index);
            let mut entry = view
                .interfaces
                .remove(&i.name)
                .filter(|v| v.index == i.index)
                .unwrap_or_else(|| super::state::IfaceView {
                    name: i.name.clone(),
                    index: i.index,
                    kind: i.kind.to_string(),
                    mtu: i.mtu,
                    up: i.up,
                    watched: false,
                    hooks: None,
                    counters: IfaceCounters::default(),
                    rates: Rates::default(),
                    facts: None,
                    worst_severity: None,
                    updated_ms: now_ms(),
                });
            entry.kind = i.kind.to_string();
            entry.mtu = i.mtu;
            entry.up = i.up;
            entry.watched = w.is_some_and(|w| w.role == Role::Selected);
            entry.hooks = self.dp.hooks(i.index).cloned();
            if !entry.watched {
                entry.facts = None;
                entry.worst_severity = None;
            }
            next.insert(i.name.clone(), entry);
        }
        view.interfaces = next;
        view.health.programs_attached = self
            .watched
            .keys()
            .filter_map(|idx| self.dp.hooks(*idx))
            .count() as u64
            * 2;
    }

    /// Closes the window: facts, rules, history and the view for every selected interface.
    async fn evaluate(&mut self) -> anyhow::Result<()> {
        let elapsed = self.window_start.elapsed();
        self.window_start = Instant::now();
        let secs = elapsed.as_secs_f64();
        let now = now_ms();

        let dp_now = self.dp.snapshot()?;
        let window = dp_now.since(&self.prev_dp);
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
            match self
                .evaluate_one(me, &all, &window, rows.as_deref(), &drops_now, elapsed, now)
                .await
            {
                Ok((facts, underlay)) => {
                    underlays.extend(underlay);
                    evaluated.push((me.clone(), facts));
                }
                Err(e) => tracing::warn!(iface = %me.name, "evaluation failed: {e:#}"),
            }
        }
        let new_underlays = underlays.difference(&self.underlays_wanted).count() > 0;
        self.underlays_wanted = underlays;

        let active = self.shared.store.active_findings()?;
        self.publish_window(&dp_now, &window, &evaluated, rows.as_deref(), &drops_now, &active, secs, now);
        self.prev_dp = dp_now;
        self.prev_drops = drops_now;

        if self.last_prune.is_none_or(|t| t.elapsed() >= PRUNE_EVERY) {
            self.last_prune = Some(Instant::now());
            match self.shared.store.prune(now) {
                Ok(p) if p.samples + p.findings > 0 => {
                    tracing::debug!(samples = p.samples, findings = p.findings, "pruned history")
                }
                Ok(_) => {}
                Err(e) => tracing::warn!("pruning the history: {e}"),
            }
        }
        self.shared.ready.store(true, Ordering::Release);
        if new_underlays {
            self.reconcile().await;
        }
        Ok(())
    }

    /// One interface's window: facts, findings, a sample. Returns the facts and the
    /// indexes of its underlay candidates.
    #[allow(clippy::too_many_arguments)]
    async fn evaluate_one(
        &mut self,
        me: &Interface,
        all: &[Interface],
        window: &dataplane::Snapshot,
        rows: Option<&[SocketRow]>,
        drops_now: &[DropCount],
        elapsed: Duration,
        now: i64,
    ) -> anyhow::Result<(Facts, Vec<u32>)> {
        let details = link::details(me.index).await?;
        let tun = tunnel::identify(me, &details);
        let underlay = collect::underlay(&tun, &details, all).await;
        let start = Snapshot::from_parts(
            self.prev_wireguard
                .get(&me.name)
                .cloned()
                .or_else(|| tun.wireguard.clone()),
            self.prev_drops.clone(),
        );
        let end = Snapshot::from_parts(tun.wireguard.clone(), drops_now.to_vec());
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
        };
        let mut facts = observed.facts().await?;
        if let Some(dev) = &tun.wireguard {
            self.prev_wireguard.insert(me.name.clone(), dev.clone());
        }
        if let Some(p) = self.probes.get(&me.name) {
            collect::apply_probes(&mut facts, &tun, &p.results);
        }
        self.maybe_probe(me, &facts, &underlay, tun.kind.is_some());

        let found = rules::evaluate(&self.rules, &facts.to_json());
        let transitions = self.shared.store.record(&me.name, now, &found)?;
        for k in &transitions.opened {
            tracing::info!(iface = %me.name, finding = %k.id, "finding opened");
        }
        for k in &transitions.resolved {
            tracing::info!(iface = %me.name, finding = %k.id, "finding resolved");
        }
        let counters = window.counters(me.index);
        self.shared
            .store
            .insert_sample(&sample(me, &facts, &counters, rows, found.len(), elapsed, now))?;
        Ok((facts, underlay.watch.iter().map(|u| u.index).collect()))
    }

    /// Starts a path-MTU probe round for a tunnel when one is due. Results arrive on
    /// `probe_rx` and are used from the next window on.
    fn maybe_probe(
        &mut self,
        me: &Interface,
        facts: &Facts,
        underlay: &collect::Underlay,
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
        let targets: Vec<_> = collect::probe_targets(facts, underlay, me)
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

    /// Replaces the view with this window's figures.
    #[allow(clippy::too_many_arguments)]
    fn publish_window(
        &self,
        dp_now: &dataplane::Snapshot,
        window: &dataplane::Snapshot,
        evaluated: &[(Interface, Facts)],
        rows: Option<&[SocketRow]>,
        drops_now: &[DropCount],
        active: &[crate::store::StoredFinding],
        secs: f64,
        now: i64,
    ) {
        let names: HashMap<u32, String> = self
            .watched
            .values()
            .map(|w| (w.iface.index, w.iface.name.clone()))
            .collect();
        let name_of = |idx: u32| names.get(&idx).cloned().unwrap_or_default();
        let (fill, capacity) = self.dp.flow_table_fill();
        let program_stats = self.dp.program_stats();

        let mut view = self.shared.view_mut();
        for (idx, counters) in &dp_now.counters {
            let Some(entry) = view.interfaces.get_mut(&name_of(*idx)) else {
                continue;
            };
            let w = window.counters(*idx);
            let per_s = |v: u64| if secs > 0.0 { v as f64 / secs } else { 0.0 };
            entry.counters = counters.clone();
            entry.rates = Rates {
                rx_bps: per_s(w.ingress.bytes) * 8.0,
                tx_bps: per_s(w.egress.bytes) * 8.0,
                rx_pps: per_s(w.ingress.segments),
                tx_pps: per_s(w.egress.segments),
            };
            entry.updated_ms = now;
        }
        for (me, facts) in evaluated {
            if let Some(entry) = view.interfaces.get_mut(&me.name) {
                entry.facts = Some(facts.clone());
                entry.worst_severity = active
                    .iter()
                    .filter(|f| f.interface == me.name)
                    .map(|f| f.severity)
                    .max();
            }
            view.handshakes.insert(
                me.name.clone(),
                facts
                    .peers
                    .iter()
                    .filter(|p| facts.tunnel.kind == "wireguard" || p.handshake_age_s >= 0)
                    .map(|p| (p.name.clone(), p.handshake_age_s))
                    .collect(),
            );
        }
        view.handshakes
            .retain(|name, _| evaluated.iter().any(|(me, _)| &me.name == name));

        view.flows = dp_now
            .flows
            .iter()
            .map(|f| FlowView {
                interface: name_of(f.ifindex),
                flow: f.clone(),
            })
            .collect();
        if let Some(rows) = rows {
            view.sockets = rows
                .iter()
                .map(|r| SocketView {
                    interface: name_of(r.socket.ifindex),
                    row: r.clone(),
                })
                .collect();
            for (name, ratio_rows) in by_iface_cc(rows, &name_of) {
                let t = view.tcp.entry(name).or_default();
                t.segments += ratio_rows.0;
                t.retransmits += ratio_rows.1;
                t.last_ratio = if ratio_rows.0 > 0 {
                    ratio_rows.1 as f64 / ratio_rows.0 as f64
                } else {
                    0.0
                };
            }
            for r in rows.iter().filter(|r| r.socket.srtt_us > 0 && r.socket.ifindex != 0) {
                let name = name_of(r.socket.ifindex);
                if !name.is_empty() {
                    view.srtt
                        .entry(name)
                        .or_default()
                        .observe(f64::from(r.socket.srtt_us) / 1e6);
                }
            }
        }
        view.drops = drop_views(&self.prev_drops, drops_now, &name_of, self.drops.as_ref());
        view.active = active.to_vec();
        view.health.map_fill = BTreeMap::from([(
            "flows".to_owned(),
            if capacity > 0 {
                fill as f64 / capacity as f64
            } else {
                0.0
            },
        )]);
        view.health.program_stats = program_stats
            .into_iter()
            .map(|(n, runs, ns)| (n.to_owned(), (runs, ns)))
            .collect();
        view.health.last_evaluation_ms = now_ms();
    }
}

/// Sums window rows per (interface name, congestion control): (segments, retransmits).
fn by_iface_cc(
    rows: &[SocketRow],
    name_of: &dyn Fn(u32) -> String,
) -> BTreeMap<(String, String), (u64, u64)> {
    let mut out: BTreeMap<(String, String), (u64, u64)> = BTreeMap::new();
    for r in rows {
        let name = name_of(r.socket.ifindex);
        if name.is_empty() {
            continue;
        }
        let e = out.entry((name, r.socket.cc.clone())).or_default();
        e.0 += r.data_segs_sent;
        e.1 += r.retransmits;
    }
    out
}

/// Drops since the agent started and in the last window, by interface name and reason.
fn drop_views(
    before: &[DropCount],
    now: &[DropCount],
    name_of: &dyn Fn(u32) -> String,
    probe: Option<&DropProbe<'_>>,
) -> Vec<DropView> {
    if probe.is_none() {
        return Vec::new();
    }
    let window = crate::drops::delta(before, now);
    let mut out: BTreeMap<(String, String), (u64, u64)> = BTreeMap::new();
    for d in now.iter().filter(|d| !NOT_NETWORK_DROPS.contains(&d.reason.as_str())) {
        out.entry((name_of(d.ifindex), d.reason.clone())).or_default().0 += d.packets;
    }
    for d in window.iter().filter(|d| !NOT_NETWORK_DROPS.contains(&d.reason.as_str())) {
        out.entry((name_of(d.ifindex), d.reason.clone())).or_default().1 += d.packets;
    }
    out.into_iter()
        .map(|((interface, reason), (total, last))| DropView {
            interface,
            reason,
            packets_total: total,
            packets_last_window: last,
        })
        .collect()
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
    }
}


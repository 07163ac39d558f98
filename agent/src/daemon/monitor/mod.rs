//! The monitor: owns the BPF programs, follows link events, and every interval turns the
//! data plane, socket and drop counters into facts, findings, history and the view the API
//! serves. The same collectors and rules as `netdoctor diagnose`, on one long-lived set of
//! programs whose windows follow each other without gaps.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, watch, Notify};

mod evaluate;
mod peer_paths;
mod probes;
mod publish;
mod sample;
mod timeline;

use super::select::Selector;
use super::state::Shared;
use crate::config::iface::{self, Interface};
use crate::config::wireguard::Device;
use crate::facts::probe::ProbeResult;
use crate::kernel::drops::{DropCount, DropProbe};
use crate::kernel::packet::{self, Dataplane};
use crate::kernel::sockets::rates::Baseline;
use crate::kernel::sockets::SocketProbes;
use crate::rules::RuleSet;

/// Interfaces are re-read this often even without link events.
const RESYNC: Duration = Duration::from_secs(30);
/// Close events are moved out of their ring this often.
const RING_POLL: Duration = Duration::from_millis(100);
/// An interface that refused attachment is retried after this long.
const ATTACH_RETRY: Duration = Duration::from_secs(60);
/// A notification's burst settles this long before the timeline reads.
const TIMELINE_SETTLE: Duration = Duration::from_millis(100);
/// Notifications start a timeline reading at most this often.
const TIMELINE_GAP: Duration = Duration::from_millis(500);
/// History is pruned at most this often.
const PRUNE_EVERY: Duration = Duration::from_secs(60);

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
    /// The packet data plane; `None` when it cannot load here (the rules that need it are
    /// then not evaluated, see `missing`).
    dp: Option<Dataplane<'obj>>,
    /// Facts this kernel cannot give (see `diagnose::signals`).
    missing: Vec<String>,
    sockets: Option<SocketProbes<'obj>>,
    drops: Option<DropProbe<'obj>>,
    watched: HashMap<u32, Watched>,
    refused: HashMap<u32, Instant>,
    underlays_wanted: HashSet<u32>,
    window_start: Instant,
    prev_dp: packet::Snapshot,
    prev_drops: Vec<DropCount>,
    /// Every link's transmit counters at the window's start (bond members).
    prev_links: Vec<crate::config::bond::LinkCounter>,
    baseline: Option<Baseline>,
    prev_wireguard: HashMap<String, Device>,
    /// The host's CPU time at the window's start.
    prev_host_cpu: Option<crate::config::cpu::HostSample>,
    /// Each selected tunnel's daemon's CPU time at the window's start.
    prev_daemon_cpu: HashMap<String, crate::config::cpu::DaemonSample>,
    probes: HashMap<String, ProbeState>,
    probe_tx: mpsc::UnboundedSender<(String, Vec<(String, ProbeResult)>)>,
    probe_rx: mpsc::UnboundedReceiver<(String, Vec<(String, ProbeResult)>)>,
    last_prune: Option<Instant>,
    /// The configuration as last read, for the timeline.
    timeline: crate::daemon::timeline::Snapshot,
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
        dp: Option<Dataplane<'obj>>,
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
        let missing =
            crate::diagnose::signals::missing_facts(dp.is_some(), sockets.as_ref(), drops.as_ref());
        Ok(Monitor {
            shared,
            selector,
            rules,
            dp,
            missing,
            sockets,
            drops,
            watched: HashMap::new(),
            refused: HashMap::new(),
            underlays_wanted: HashSet::new(),
            window_start: Instant::now(),
            prev_dp: packet::Snapshot::default(),
            prev_drops,
            prev_links: Vec::new(),
            baseline,
            prev_wireguard: HashMap::new(),
            prev_host_cpu: crate::config::cpu::HostSample::read().ok(),
            prev_daemon_cpu: HashMap::new(),
            probes: HashMap::new(),
            probe_tx,
            probe_rx,
            last_prune: None,
            timeline: crate::daemon::timeline::Snapshot::default(),
        })
    }

    /// What the data plane counted so far, with the flows of the window it closes (nothing
    /// without a data plane; the first call begins the windows).
    fn dp_snapshot(&mut self) -> crate::kernel::Result<packet::Snapshot> {
        Ok(self
            .dp
            .as_mut()
            .map(Dataplane::window_snapshot)
            .transpose()?
            .unwrap_or_default())
    }

    /// Runs until `shutdown` turns true; then detaches everything (dropping the programs'
    /// links) and returns.
    pub async fn run(mut self, mut shutdown: watch::Receiver<bool>) -> anyhow::Result<()> {
        let changed = Arc::new(Notify::new());
        let config = Arc::new(Notify::new());
        let wake = super::links::Wake {
            links: changed.clone(),
            config: config.clone(),
        };
        let events = match super::links::watch(wake) {
            Ok(task) => Some(task),
            Err(e) => {
                tracing::warn!(
                    "{e:#}; interfaces are re-read every {}s only",
                    RESYNC.as_secs()
                );
                None
            }
        };
        self.reconcile().await;
        self.timeline_notified().await;
        let mut last_timeline = Instant::now();
        self.prev_dp = self.dp_snapshot()?;
        self.window_start = Instant::now();

        let interval = self.shared.config.interval;
        let mut evaluate =
            tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
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
                () = config.notified() => {
                    // Settle a burst (a route change: delete, add) into one reading, and
                    // read at most once a TIMELINE_GAP however often the kernel notifies.
                    let wait = TIMELINE_GAP.saturating_sub(last_timeline.elapsed());
                    tokio::time::sleep(wait.max(TIMELINE_SETTLE)).await;
                    self.timeline_notified().await;
                    last_timeline = Instant::now();
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
        self.forget_gone(&all, &by_index);
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
                        let watched = self.dp.as_ref().map(|dp| dp.watch(i.index, i.mtu, i.link));
                        if let Some(Err(e)) = watched {
                            tracing::warn!(iface = %i.name, "updating the MTU: {e}");
                        }
                    }
                    w.iface = i.clone();
                    w.role = role;
                }
                None => self.start_watching(i, role),
            }
        }
        self.publish_interfaces(&all);
    }

    /// Forgets the watched interfaces that are gone or renamed (the kernel already removed
    /// a deleted device's links), resolving the findings of a selected one that is gone.
    fn forget_gone(&mut self, all: &[Interface], by_index: &HashMap<u32, &Interface>) {
        let gone: Vec<u32> = self
            .watched
            .iter()
            .filter(|(idx, w)| by_index.get(idx).is_none_or(|i| i.name != w.iface.name))
            .map(|(idx, _)| *idx)
            .collect();
        for idx in gone {
            let Some(w) = self.watched.remove(&idx) else {
                continue;
            };
            if let Some(dp) = &mut self.dp {
                dp.detach(idx);
            }
            tracing::info!(iface = %w.iface.name, "interface gone; forgotten");
            if w.role == Role::Selected && !all.iter().any(|i| i.name == w.iface.name) {
                // A failure is logged once by the store (store::health).
                if self
                    .shared
                    .store
                    .resolve_interface(&w.iface.name, now_ms())
                    .is_err()
                {
                    tracing::debug!(iface = %w.iface.name, "findings not resolved");
                }
            }
            self.prev_wireguard.remove(&w.iface.name);
            self.prev_daemon_cpu.remove(&w.iface.name);
            self.probes.remove(&w.iface.name);
        }
    }

    /// Starts watching `i`: attaches the data plane unless it refused `i` lately.
    fn start_watching(&mut self, i: &Interface, role: Role) {
        if self
            .refused
            .get(&i.index)
            .is_some_and(|t| t.elapsed() < ATTACH_RETRY)
        {
            return;
        }
        // Without a data plane an interface is still watched: configuration, sockets and
        // drops.
        match self
            .dp
            .as_mut()
            .map(|dp| dp.attach(&i.target()))
            .transpose()
        {
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

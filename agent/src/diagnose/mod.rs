//! `diagnose`: configuration facts, a short observation through the data plane and socket
//! telemetry with the active path-MTU probes running during it, then the rules. One code path for the CLI and the
//! agent's `POST /api/v1/diagnose/{iface}`; the agent's own windows go through the same
//! facts ([`crate::facts::build`]) and rules.

mod error;
mod probes;
pub mod signals;

pub use error::Error;

use crate::config::host::Host;
use crate::config::{bond, route_table, tunnel};
use crate::facts::{bridge, build, underlay, watch};

use std::mem::MaybeUninit;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::config::firewall::Ruleset;
use crate::config::iface;
use crate::config::link;
use crate::facts::probe::{targets, MAX_PROBE_TARGETS};
use crate::facts::Facts;
use crate::kernel::packet::{Dataplane, Options};
use crate::kernel::sockets::rates::Baseline;
use crate::kernel::sockets::SocketProbes;
use crate::rules::finding::{self, Finding, Severity};
use crate::rules::{self, NotEvaluated, RuleSet};
use probes::Probes;

/// How to diagnose.
#[derive(Debug, Clone)]
pub struct DiagnoseOptions {
    /// Observation time.
    pub duration: Duration,
    /// Run the active path-MTU probe.
    pub probe: bool,
    /// Extra rules directory.
    pub rules_dir: Option<PathBuf>,
    /// Data-plane options (hooks, extra tunnel ports).
    pub dataplane: Options,
}

/// The result: the documented `--json` schema.
#[derive(Debug, Serialize)]
pub struct Report {
    /// Interface name.
    pub interface: String,
    /// Interface kind.
    pub kind: String,
    /// Observation time in seconds.
    pub duration_s: f64,
    /// Everything the rules read.
    pub facts: Facts,
    /// Findings, most severe first.
    pub findings: Vec<Finding>,
    /// Rules that could not be decided because facts they read are missing (a BPF program
    /// or hook this kernel lacks), with those facts named. Never counted as passed.
    pub not_evaluated: Vec<NotEvaluated>,
    /// Signals that were unavailable and what that means for the findings.
    pub notes: Vec<String>,
}

impl Report {
    /// The worst severity found.
    pub fn worst(&self) -> Option<Severity> {
        finding::worst(&self.findings)
    }
}

/// What a caller learns while a diagnosis runs.
pub trait Progress {
    /// One line of progress.
    fn step(&self, message: &str);
}

/// How long after the window the probes and a WireGuard handshake in flight may take:
/// `diagnose` ends within its `--duration` plus a second.
const AFTER_WINDOW: Duration = Duration::from_millis(600);
/// The window is looked at for new probe targets this often, while at least this much of
/// it is left.
const LOOK_EVERY: Duration = Duration::from_secs(1);

/// Runs a diagnosis of interface `name`.
pub async fn diagnose(
    name: &str,
    opts: &DiagnoseOptions,
    progress: &dyn Progress,
) -> Result<Report, Error> {
    let rules = RuleSet::load(opts.rules_dir.as_deref())?;

    let all = iface::list().await?;
    let me = all
        .iter()
        .find(|i| i.name == name)
        .cloned()
        .ok_or_else(|| crate::config::Error::UnknownInterface(name.to_owned()))?;
    let details = link::details(me.index).await?;
    let tun = tunnel::identify(&me, &details).await;
    let mut notes = tun.notes.clone();
    let underlay = underlay::underlay(&tun, &details, &all).await;
    let routes = route_table::dump().await.unwrap_or_else(|e| {
        notes.push(format!(
            "{e}: multipath routes and the gateway's uplink are unknown"
        ));
        Vec::new()
    });
    let gateway = Host::forwarding();
    let mut also = watch::also_watch(&me, &underlay, &routes, &all, gateway, &[]);
    let bridge = crate::config::bridge::of(&me, &details, &all)
        .await
        .unwrap_or_else(|e| {
            notes.push(format!("{e}: the bridge's ports are unknown"));
            None
        });
    also.extend(watch::bridge_ports(&me, &underlay, &also, bridge.as_ref()));

    // Data plane on the interface, its underlay, multipath nexthops and the uplink, with
    // the tunnel's port when the data plane cannot recognise the protocol by itself.
    let mut dp_options = opts.dataplane.clone();
    if let Some(tp) = tun.port_to_recognise() {
        if dp_options.tunnel_ports.len() < crate::kernel::packet::MAX_TUNNEL_PORTS {
            dp_options.tunnel_ports.push(tp);
        }
    }
    // Sockets first: whether they load decides how local connections are accounted.
    let mut sock_storage = MaybeUninit::uninit();
    let mut drop_storage = MaybeUninit::uninit();
    let (sockets, drops) = signals::load_probes(&mut sock_storage, &mut drop_storage, &mut notes);
    let mut dp_storage = MaybeUninit::uninit();
    let mut dp = signals::packet_dataplane(
        &mut dp_storage,
        signals::with_sockets(dp_options, sockets.as_ref()),
        &me,
        &underlay,
        &also,
        &mut notes,
    );
    let missing = signals::missing_facts(dp.is_some(), sockets.as_ref(), drops.as_ref());
    let (has_dataplane, has_drops) = (dp.is_some(), drops.is_some());

    let start = build::Readings::take(&tun, drops.as_ref())?
        .with_links(bond::counters().await.unwrap_or_default());
    let dp_start = dp.as_ref().map(Dataplane::snapshot).transpose()?;
    let baseline = sockets.as_ref().map(Baseline::take).transpose()?;
    progress.step(&format!(
        "observing {} ({}, MTU {}) for {}",
        me.name,
        me.kind,
        me.mtu,
        humantime::format_duration(opts.duration)
    ));
    let started = Instant::now();
    let window_end = started + opts.duration;
    let mut probes = Probes::new(window_end + AFTER_WINDOW);
    if opts.probe {
        probes.start(
            targets::endpoint_targets(&tun.endpoints, underlay.route_mtu),
            progress,
        );
    }
    let mut next_look = started + LOOK_EVERY.min(opts.duration / 3);
    // Close events queue in a bounded ring: read it while waiting. What the window shows
    // so far names more probe targets (endpoints seen, stalled connections).
    while started.elapsed() < opts.duration {
        let left = opts.duration.saturating_sub(started.elapsed());
        tokio::time::sleep(left.min(Duration::from_millis(100))).await;
        if let Some(s) = &sockets {
            s.poll_closed()?;
        }
        let now = Instant::now();
        let probing = opts.probe && window_end.saturating_duration_since(now) >= LOOK_EVERY;
        // A gateway's clients may leave by another uplink than the default route's: the
        // window so far says which, and the data plane watches it from then on.
        let uplinks = gateway && underlay::is_tunnel_kind(&me.kind);
        if (probing || uplinks) && now >= next_look {
            next_look = now + LOOK_EVERY;
            let so_far = match (&dp, &dp_start) {
                (Some(dp), Some(s)) => dp.snapshot()?.since(s),
                _ => crate::kernel::packet::Snapshot::default(),
            };
            let rows = match (&sockets, &baseline) {
                (Some(s), Some(b)) => Some(b.peek(s, started.elapsed().as_secs_f64())?),
                _ => None,
            };
            let look = build::Observation {
                me: &me,
                details: &details,
                all: &all,
                tun: &tun,
                underlay: &underlay,
                window: &so_far,
                sockets: rows.as_deref(),
                start: &start,
                end: &start,
                elapsed: started.elapsed(),
                firewall: &Ruleset::default(),
                routes: &routes,
            };
            let facts = look.provisional().await?;
            if probing {
                probes.start(targets::probe_targets(&facts, &underlay, &me), progress);
            }
            if let Some(dp) = dp.as_mut().filter(|_| uplinks) {
                let wanted =
                    watch::also_watch(&me, &underlay, &routes, &all, gateway, &facts.nat.uplinks);
                signals::watch_more(dp, &mut also, wanted, &mut notes);
            }
        }
    }
    let elapsed = started.elapsed();
    if let Some(lost) = sockets
        .as_ref()
        .map(SocketProbes::lost_events)
        .filter(|l| *l > 0)
    {
        notes.push(crate::kernel::sockets::lost_closes_note(lost));
    }
    // The data plane's window closes before the peers' state is read, so a handshake
    // response it counted is already in that state.
    let window = match (&dp, &dp_start) {
        (Some(dp), Some(start)) => dp.snapshot()?.since(start),
        _ => crate::kernel::packet::Snapshot::default(),
    };
    drop(dp);
    let refreshed = refresh_until(&tun, window_end + AFTER_WINDOW, &mut notes).await;
    let end = build::Readings::take(&refreshed, drops.as_ref())?
        .with_links(bond::counters().await.unwrap_or_default());
    let socket_rows = match (&sockets, &baseline) {
        (Some(s), Some(b)) => Some(b.close(s, elapsed.as_secs_f64())?.0),
        _ => None,
    };

    let firewall = Ruleset::read();
    for e in &firewall.errors {
        notes.push(format!(
            "firewall rules partly unread ({e}): NAT and MSS clamping rules there are not seen"
        ));
    }
    let observed = build::Observation {
        me: &me,
        details: &details,
        all: &all,
        tun: &tun,
        underlay: &underlay,
        window: &window,
        sockets: socket_rows.as_deref(),
        start: &start,
        end: &end,
        elapsed,
        firewall: &firewall,
        routes: &routes,
    };
    let mut facts = observed.facts(window_end + AFTER_WINDOW).await?;
    notes.extend(observed.cpu_notes());
    if let Some(b) = &bridge {
        facts.bridge = bridge::facts(
            b,
            has_dataplane.then_some(&window),
            has_drops.then(|| (start.drops(), end.drops())),
        );
    }

    if opts.probe {
        // Targets the whole window names but no probe started on (found in its last
        // second, or beyond the number of probes): said, not silently dropped.
        for (_, target, _) in targets::probe_targets(&facts, &underlay, &me) {
            if !probes.started(target) {
                notes.push(format!(
                    "path-MTU probe toward {target} not run: found too late in the observation, \
                     or beyond the {MAX_PROBE_TARGETS} probes of one diagnosis"
                ));
            }
        }
        let results = probes.finish(&mut notes);
        targets::apply_probes(&mut facts, &tun, &results);
    } else {
        notes.push("path-MTU probe skipped (--no-probe)".into());
    }

    let evaluation = rules::evaluate_partial(&rules, &facts.to_json(), &missing);
    for n in &evaluation.not_evaluated {
        notes.push(format!(
            "rule {} not evaluated: missing {}",
            n.rule,
            n.missing.join(", ")
        ));
    }
    Ok(Report {
        interface: me.name.clone(),
        kind: me.kind.to_string(),
        duration_s: elapsed.as_secs_f64(),
        facts,
        findings: evaluation.findings,
        not_evaluated: evaluation.not_evaluated,
        notes,
    })
}

/// The tunnel with its peers read again ([`tunnel::refresh`]) if they answer by `until`
/// (a stuck daemon must not hold the diagnosis up); else as it was, with a note.
async fn refresh_until(
    tun: &tunnel::ConfiguredTunnel,
    until: Instant,
    notes: &mut Vec<String>,
) -> tunnel::ConfiguredTunnel {
    let until = tokio::time::Instant::from_std(until);
    match tokio::time::timeout_at(until, tunnel::refresh(tun)).await {
        Ok(t) => t,
        Err(_) => {
            notes.push(format!(
                "the peers of {} were not read again at the end of the observation: no \
                 answer within the diagnosis's time (--duration plus a second); their \
                 counters and handshakes are those of its start",
                tun.wireguard
                    .as_ref()
                    .map_or("the tunnel", |d| d.name.as_str())
            ));
            tun.clone()
        }
    }
}

//! `diagnose`: configuration facts, a short observation through the data plane and socket
//! telemetry, an active path-MTU probe, then the rules. One code path for the CLI and the
//! agent's `POST /api/v1/diagnose/{iface}`; the agent's own windows go through the same
//! facts ([`crate::facts::build`]) and rules.

mod error;

pub use error::Error;

use crate::facts::{build, signals, tunnel, underlay};

use std::mem::MaybeUninit;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::facts::iface;
use crate::facts::probe::{self, ProbeOptions, ProbeResult, MAX_PROBE_TARGETS};
use crate::facts::{link, Facts};
use crate::kernel::packet::{Dataplane, Options};
use crate::kernel::sockets::rates::Baseline;
use crate::kernel::sockets::SocketProbes;
use crate::rules::finding::{self, Finding, Severity};
use crate::rules::{self, NotEvaluated, RuleSet};

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
        .ok_or_else(|| crate::facts::Error::UnknownInterface(name.to_owned()))?;
    let details = link::details(me.index).await?;
    let tun = tunnel::identify(&me, &details).await;
    let mut notes = tun.notes.clone();
    let underlay = underlay::underlay(&tun, &details, &all).await;

    // Data plane on the interface and on its underlay, with the tunnel's port when the
    // data plane cannot recognise the protocol by itself.
    let mut dp_options = opts.dataplane.clone();
    if let Some(tp) = tun.port_to_recognise() {
        if dp_options.tunnel_ports.len() < crate::kernel::packet::MAX_TUNNEL_PORTS {
            dp_options.tunnel_ports.push(tp);
        }
    }
    let mut dp_storage = MaybeUninit::uninit();
    let dp = signals::packet_dataplane(&mut dp_storage, dp_options, &me, &underlay, &mut notes);
    let mut sock_storage = MaybeUninit::uninit();
    let mut drop_storage = MaybeUninit::uninit();
    let (sockets, drops) = signals::load_probes(&mut sock_storage, &mut drop_storage, &mut notes);
    let missing = signals::missing_facts(dp.is_some(), sockets.as_ref(), drops.as_ref());

    let start = build::Snapshot::take(&tun, drops.as_ref())?;
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
    // Close events queue in a bounded ring: read it while waiting.
    while started.elapsed() < opts.duration {
        let left = opts.duration.saturating_sub(started.elapsed());
        tokio::time::sleep(left.min(Duration::from_millis(100))).await;
        if let Some(s) = &sockets {
            s.poll_closed()?;
        }
    }
    let elapsed = started.elapsed();
    if let Some(lost) = sockets
        .as_ref()
        .map(SocketProbes::lost_events)
        .filter(|l| *l > 0)
    {
        notes.push(format!("{lost} connection-close events were lost (ring buffer full): short connections may be missing"));
    }
    // The data plane's window closes before the peers' state is read, so a handshake
    // response it counted is already in that state.
    let window = match (&dp, &dp_start) {
        (Some(dp), Some(start)) => dp.snapshot()?.since(start),
        _ => crate::kernel::packet::Snapshot::default(),
    };
    drop(dp);
    let end = build::Snapshot::take(&tunnel::refresh(&tun).await, drops.as_ref())?;
    let socket_rows = match (&sockets, &baseline) {
        (Some(s), Some(b)) => Some(b.close(s, elapsed.as_secs_f64())?.0),
        _ => None,
    };

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
    };
    let mut facts = observed.facts().await?;

    if opts.probe {
        let targets = probe::targets::probe_targets(&facts, &underlay, &me);
        let mut results: Vec<(String, ProbeResult)> = Vec::new();
        for (label, target, max_size) in targets.into_iter().take(MAX_PROBE_TARGETS) {
            progress.step(&format!(
                "probing the path MTU toward {target} (up to {max_size} bytes)"
            ));
            let options = ProbeOptions {
                max_size,
                ..ProbeOptions::default()
            };
            match tokio::task::spawn_blocking(move || probe::probe(target, &options)).await? {
                Ok(r) => results.push((label, r)),
                Err(e) => notes.push(format!("path-MTU probe toward {target} failed: {e}")),
            }
        }
        probe::targets::apply_probes(&mut facts, &tun, &results);
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

//! `diagnose`: configuration facts, a short observation through the data plane and socket
//! telemetry with the active path-MTU probes running during it, then the rules. One code path for the CLI and the
//! agent's `POST /api/v1/diagnose/{iface}`; the agent's own windows go through the same
//! facts ([`crate::facts::build`]) and rules.

mod error;
mod many;
mod probes;
mod select;
pub mod signals;
mod target;

pub use error::Error;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use serde::Serialize;

use crate::config::{iface, route_table, tunnel};
use crate::facts::Facts;
use crate::kernel::packet::Options;
use crate::rules::finding::{self, Finding, Severity};
use crate::rules::NotEvaluated;

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

/// What a caller learns while a diagnosis runs, and how it may end the observation early.
pub trait Progress {
    /// One line of progress.
    fn step(&self, message: &str);

    /// Resolves when the caller wants the observation to end now and be reported on what
    /// it saw (Ctrl-C on the command line). Polled only while the window is open; the
    /// default never resolves.
    fn stop_early(&self) -> BoxFuture<'_, ()> {
        Box::pin(std::future::pending())
    }
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
    let mut reports = many::run(&[name.to_owned()], opts, progress).await?;
    reports.pop().ok_or(Error::NothingToDiagnose)
}

/// Diagnoses several interfaces in one observation window: the programs load once and
/// attach to all of them; one report per interface, in the order of `names` (a name
/// given twice is diagnosed once).
pub async fn diagnose_many(
    names: &[String],
    opts: &DiagnoseOptions,
    progress: &dyn Progress,
) -> Result<Vec<Report>, Error> {
    if names.is_empty() {
        return Err(Error::NothingToDiagnose);
    }
    many::run(names, opts, progress).await
}

/// The interfaces `netdoctor diagnose` looks at when none is named ([`select`]): every
/// tunnel and overlay interface that is up, the bridges carrying them and the
/// default-route interfaces. Empty when the host has none of them.
pub async fn every_interface() -> Result<Vec<String>, Error> {
    let all = iface::list().await?;
    let routes = route_table::dump().await?;
    let controllers = crate::config::bridge::controllers().await?;
    Ok(select::every(&all, &routes, &controllers))
}

/// The tunnel with its peers read again ([`tunnel::refresh`]) if they answer by `until`
/// (a stuck daemon must not hold the diagnosis up); else as it was, with a note.
pub(super) async fn refresh_until(
    tun: &tunnel::ConfiguredTunnel,
    until: Instant,
    notes: &mut Vec<String>,
) -> tunnel::ConfiguredTunnel {
    let until = tokio::time::Instant::from_std(until);
    let name = tun
        .wireguard
        .as_ref()
        .map_or("the tunnel", |d| d.name.as_str());
    match tokio::time::timeout_at(until, tunnel::refresh(tun)).await {
        Ok((t, None)) => t,
        Ok((t, Some(e))) => {
            notes.push(format!(
                "the peers of {name} could not be read again at the end of the observation \
                 ({e}): their counters and handshakes are those of its start"
            ));
            t
        }
        Err(_) => {
            notes.push(format!(
                "the peers of {name} were not read again at the end of the observation: no \
                 answer within the diagnosis's time (--duration plus a second); their \
                 counters and handshakes are those of its start"
            ));
            tun.clone()
        }
    }
}

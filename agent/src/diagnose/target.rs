//! One interface of a diagnosis: its configuration read before the observation (tunnel,
//! underlay, the interfaces watched with it, its bridge), and the notes only it gets.
//! A diagnosis of several interfaces holds one per interface and shares the programs; its
//! facts, probe results and rules become the interface's [`Report`].

use std::time::Duration;

use super::probes::{Outcomes, Probes};
use super::Report;
use crate::config::bridge::Bridge;
use crate::config::iface::Interface;
use crate::config::link::{self, LinkDetails};
use crate::config::route_table::TableRoute;
use crate::config::tunnel::{self, ConfiguredTunnel};
use crate::facts::probe::{targets, MAX_PROBE_TARGETS};
use crate::facts::underlay::{self, Underlay};
use crate::facts::{bridge, watch, Facts};
use crate::kernel::packet::Snapshot;
use crate::rules::{self, RuleSet};

/// One interface being diagnosed.
pub(super) struct Target {
    pub(super) me: Interface,
    pub(super) details: LinkDetails,
    pub(super) tun: ConfiguredTunnel,
    pub(super) underlay: Underlay,
    /// Interfaces watched beside it and its underlay: multipath nexthops, the uplink, a
    /// bridge's ports.
    pub(super) also: Vec<Interface>,
    pub(super) bridge: Option<Bridge>,
    /// Whether the packet data plane is attached to it.
    pub(super) has_dataplane: bool,
    /// What its report says about signals and readings it lacks.
    pub(super) notes: Vec<String>,
}

impl Target {
    /// Reads the configuration of interface `name` (one of `all`). `routes_note` says why
    /// the routing table is unknown, when it is.
    pub(super) async fn prepare(
        name: &str,
        all: &[Interface],
        routes: &[TableRoute],
        routes_note: Option<&str>,
        gateway: bool,
    ) -> Result<Target, super::Error> {
        let me = all
            .iter()
            .find(|i| i.name == name)
            .cloned()
            .ok_or_else(|| crate::config::Error::UnknownInterface(name.to_owned()))?;
        let details = link::details(me.index).await?;
        let tun = tunnel::identify(&me, &details).await;
        let mut notes = tun.notes.clone();
        let underlay = underlay::underlay(&tun, &details, all).await;
        notes.extend(routes_note.map(str::to_owned));
        let mut also = watch::also_watch(&me, &underlay, routes, all, gateway, &[]);
        let bridge = crate::config::bridge::of(&me, &details, all)
            .await
            .unwrap_or_else(|e| {
                notes.push(format!("{e}: the bridge's ports are unknown"));
                None
            });
        also.extend(watch::bridge_ports(&me, &underlay, &also, bridge.as_ref()));
        Ok(Target {
            me,
            details,
            tun,
            underlay,
            also,
            bridge,
            has_dataplane: false,
            notes,
        })
    }

    /// `facts` with the bridge `t` is or is a port of (`window`: the data plane's counts, when
    /// it watched `t`; `drops`: the drop counts at the window's start and end).
    pub(super) fn with_bridge(
        &self,
        mut facts: Facts,
        window: Option<&Snapshot>,
        drops: Option<(
            &[crate::kernel::drops::DropCount],
            &[crate::kernel::drops::DropCount],
        )>,
    ) -> Facts {
        if let Some(b) = &self.bridge {
            facts.bridge = bridge::facts(b, window, drops);
        }
        facts
    }

    /// The report of one interface: its probes' results in its facts (`probes`: its probes
    /// and how every probe ended; `None` with `--no-probe`), then the rules.
    pub(super) fn report(
        mut self,
        mut facts: Facts,
        probes: Option<(Probes, &Outcomes)>,
        rules: &RuleSet,
        missing: &[String],
        elapsed: Duration,
    ) -> Report {
        if let Some((probes, outcomes)) = probes {
            // Targets the whole window names but no probe started on (found in its last
            // second, or beyond the number of probes): said, not silently dropped.
            for (_, target, _) in targets::probe_targets(&facts, &self.underlay, &self.me) {
                if !probes.started(target) {
                    self.notes.push(format!(
                    "path-MTU probe toward {target} not run: found too late in the observation, \
                     or beyond the {MAX_PROBE_TARGETS} probes of one diagnosis"
                ));
                }
            }
            let results = probes.finish(outcomes, &mut self.notes);
            targets::apply_probes(&mut facts, &self.tun, &results);
        } else {
            self.notes
                .push("path-MTU probe skipped (--no-probe)".into());
        }
        let evaluation = rules::evaluate_partial(rules, &facts.to_json(), missing);
        for n in &evaluation.not_evaluated {
            self.notes.push(format!(
                "rule {} not evaluated: missing {}",
                n.rule,
                n.missing.join(", ")
            ));
        }
        Report {
            interface: self.me.name.clone(),
            kind: self.me.kind.to_string(),
            duration_s: elapsed.as_secs_f64(),
            facts,
            findings: evaluation.findings,
            not_evaluated: evaluation.not_evaluated,
            notes: self.notes,
        }
    }
}

/// Adds `note` to every interface's notes.
pub(super) fn note_all(ifaces: &mut [Target], note: &str) {
    ifaces
        .iter_mut()
        .for_each(|t| t.notes.push(note.to_owned()));
}

/// Every interface's facts, its CPU notes added to its notes; the first failure fails all.
pub(super) fn with_cpu_notes<E>(
    built: Vec<(Result<Facts, E>, Vec<String>)>,
    ifaces: &mut [Target],
) -> Result<Vec<Facts>, E> {
    let mut facts = Vec::with_capacity(built.len());
    for ((f, cpu_notes), t) in built.into_iter().zip(ifaces.iter_mut()) {
        t.notes.extend(cpu_notes);
        facts.push(f?);
    }
    Ok(facts)
}

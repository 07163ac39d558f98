//! Path-MTU probe rounds of tunnels, started from a window and run off the monitor's
//! task; their results are used from the next window on.

use std::time::Instant;

use crate::config::iface::Interface;
use crate::facts::probe::{self, ProbeOptions, MAX_PROBE_TARGETS};
use crate::facts::underlay;
use crate::facts::Facts;

use super::Monitor;

impl Monitor<'_> {
    /// Starts a path-MTU probe round for a tunnel when one is due. Results arrive on
    /// `probe_rx` and are used from the next window on.
    pub(super) fn maybe_probe(
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

//! The path-MTU probes of one diagnosis, run while the observation is open so that
//! `diagnose` ends on time: the tunnel's configured endpoints from the start, then what the
//! window shows as it goes (endpoints seen on the underlay, connections retransmitting
//! full-size segments). Each probe runs on its own thread (they are blocking ICMP
//! exchanges, told apart by identifier and source) and stops at a deadline shortly after
//! the window, finished or not. Probes use ICMP echo, which none of the facts counts.

use std::net::IpAddr;
use std::thread::JoinHandle;
use std::time::Instant;

use super::Progress;
use crate::facts::probe::{self, ProbeOptions, ProbeResult, MAX_PROBE_TARGETS};

/// Probes started, each with its label and target.
pub(super) struct Probes {
    deadline: Instant,
    running: Vec<(String, IpAddr, JoinHandle<std::io::Result<ProbeResult>>)>,
}

impl Probes {
    /// No probe yet; every probe started stops at `deadline`.
    pub(super) fn new(deadline: Instant) -> Self {
        Probes {
            deadline,
            running: Vec::new(),
        }
    }

    /// Starts a probe for each of `targets` (label, address, largest size) not probed yet,
    /// up to [`MAX_PROBE_TARGETS`] in all.
    pub(super) fn start(&mut self, targets: Vec<(String, IpAddr, u32)>, progress: &dyn Progress) {
        for (label, target, max_size) in targets {
            if self.running.len() >= MAX_PROBE_TARGETS || self.started(target) {
                continue;
            }
            progress.step(&format!(
                "probing the path MTU toward {target} (up to {max_size} bytes)"
            ));
            let options = ProbeOptions {
                max_size,
                deadline: Some(self.deadline),
                ..ProbeOptions::default()
            };
            let handle = std::thread::spawn(move || probe::probe(target, &options));
            self.running.push((label, target, handle));
        }
    }

    /// Whether a probe toward `target` was started.
    pub(super) fn started(&self, target: IpAddr) -> bool {
        self.running.iter().any(|(_, t, _)| *t == target)
    }

    /// Waits for every probe (each ends by the deadline) and returns their results; what
    /// failed or ran out of time becomes a note.
    pub(super) fn finish(self, notes: &mut Vec<String>) -> Vec<(String, ProbeResult)> {
        let mut results = Vec::new();
        for (label, target, handle) in self.running {
            match handle.join() {
                Ok(Ok(r)) => {
                    if r.incomplete {
                        notes.push(format!(
                            "path-MTU probe toward {target} did not finish within the observation; \
                             its figures were not used"
                        ));
                    }
                    results.push((label, r));
                }
                Ok(Err(e)) => notes.push(format!("path-MTU probe toward {target} failed: {e}")),
                Err(_) => notes.push(format!("path-MTU probe toward {target} panicked")),
            }
        }
        results
    }
}

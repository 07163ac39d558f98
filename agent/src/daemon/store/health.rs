//! Whether the history database takes the monitor's writes. A full file system (or a
//! failing disk) makes every write of every evaluation fail until it clears; the agent
//! keeps evaluating and serving live figures, so the failure is said once when it starts
//! and once when it ends, never per write, and is shown by `/readyz` and the metrics.
//!
//! Any failed write marks the store failing. Only a write that changed rows marks it
//! healthy again: a transaction with nothing to change succeeds even on a full disk.

use std::sync::{Mutex, PoisonError};

use serde::Serialize;

use super::StoreError;

/// The store's health as `/readyz` shows it (`store` in docs/api.md).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StoreHealth {
    /// `"ok"` or `"failing"`.
    pub status: &'static str,
    /// Since when writes fail (ms since the epoch); `null` while healthy.
    pub failing_since_ms: Option<i64>,
    /// The first error of the current failure; `null` while healthy.
    pub error: Option<String>,
    /// The monitor's operations on the store that failed since the agent started.
    pub errors_total: u64,
}

impl StoreHealth {
    /// Writes work.
    pub fn is_ok(&self) -> bool {
        self.failing_since_ms.is_none()
    }
}

/// What the store's writes did lately.
#[derive(Debug, Default)]
pub(super) struct Tracker {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    failing: Option<Failure>,
    errors_total: u64,
}

#[derive(Debug)]
struct Failure {
    since_ms: i64,
    error: String,
    /// Failed writes during this failure.
    count: u64,
}

/// A change of the store's health, to be logged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Change {
    /// Writes started failing.
    Failing { what: &'static str, error: String },
    /// Writes work again after `failed` failures over `for_ms`.
    Recovered { failed: u64, for_ms: i64 },
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

impl Tracker {
    /// Records the outcome of one write (`wrote`: it changed rows) and logs a change.
    pub(super) fn observe<T>(
        &self,
        what: &'static str,
        result: &Result<T, StoreError>,
        wrote: bool,
    ) {
        let change = self.update(what, result.as_ref().err(), wrote, now_ms());
        match change {
            Some(Change::Failing { what, error }) => tracing::warn!(
                "history database: {what} failed: {error}. The agent keeps evaluating and \
                 serving live figures, but keeps no history and serves findings as they were \
                 until writes work again (/readyz says \"degraded\"; a full file system? \
                 docs/agent.md)"
            ),
            Some(Change::Recovered { failed, for_ms }) => tracing::warn!(
                "history database: writes work again, after {failed} failed over {:.1} s",
                for_ms as f64 / 1000.0
            ),
            None => {}
        }
    }

    /// The state machine: returns the change this outcome makes, if any.
    pub(super) fn update(
        &self,
        what: &'static str,
        error: Option<&StoreError>,
        wrote: bool,
        now_ms: i64,
    ) -> Option<Change> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        match (error, state.failing.as_mut()) {
            (Some(e), None) => {
                state.errors_total += 1;
                let error = e.to_string();
                state.failing = Some(Failure {
                    since_ms: now_ms,
                    error: error.clone(),
                    count: 1,
                });
                Some(Change::Failing { what, error })
            }
            (Some(_), Some(failure)) => {
                failure.count += 1;
                state.errors_total += 1;
                None
            }
            (None, Some(_)) if wrote => {
                let failure = state.failing.take()?;
                Some(Change::Recovered {
                    failed: failure.count,
                    for_ms: now_ms.saturating_sub(failure.since_ms),
                })
            }
            (None, _) => None,
        }
    }

    /// The current health.
    pub(super) fn get(&self) -> StoreHealth {
        let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        StoreHealth {
            status: if state.failing.is_some() {
                "failing"
            } else {
                "ok"
            },
            failing_since_ms: state.failing.as_ref().map(|f| f.since_ms),
            error: state.failing.as_ref().map(|f| f.error.clone()),
            errors_total: state.errors_total,
        }
    }
}

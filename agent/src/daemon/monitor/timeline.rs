//! The monitor's side of the configuration timeline: compare each reading with the last,
//! log, count and store the changes, and give a finding that opens the change it began
//! after.

use super::{now_ms, Monitor};
use crate::config::firewall::Ruleset;
use crate::config::iface::Interface;
use crate::config::route_table::TableRoute;
use crate::daemon::store::{EventQuery, FindingKey};
use crate::daemon::timeline::{self, Snapshot, WindowParts};
use crate::facts::Facts;

/// A finding cites a change at most this long before it began.
pub(super) const CAUSE_WITHIN_MS: i64 = 10 * 60 * 1000;

impl Monitor<'_> {
    /// After an rtnetlink notification (and at start): links, addresses and routes.
    pub(super) async fn timeline_notified(&mut self) {
        let snap = timeline::read_fast().await;
        self.timeline_compare(snap, now_ms());
    }

    /// At a window, before the rules: links, addresses, routes, sysctls, the firewall.
    pub(super) async fn timeline_window(
        &mut self,
        routes: &[TableRoute],
        firewall: &Ruleset,
        now: i64,
    ) {
        let parts = WindowParts {
            routes: Some(routes),
            firewall,
        };
        let snap = timeline::read_window(parts).await;
        self.timeline_compare(snap, now);
    }

    /// At a window, after the interfaces' evaluation: their WireGuard and Tailscale peers.
    pub(super) fn timeline_peers(&mut self, evaluated: &[(Interface, Facts)], now: i64) {
        self.timeline_compare(timeline::peers_of(evaluated), now);
    }

    fn timeline_compare(&mut self, snap: Snapshot, now: i64) {
        let events = timeline::diff(&self.timeline, &snap, now);
        self.timeline.update(snap);
        if events.is_empty() {
            return;
        }
        for e in &events {
            tracing::info!(kind = %e.kind, iface = %e.interface, "configuration changed: {}", e.text);
            self.shared.count_change(&e.kind);
        }
        // A failure is logged once by the store (store::health).
        if self.shared.store.insert_events(&events).is_err() {
            tracing::debug!("configuration changes not kept");
        }
    }

    /// Logs the findings that opened on `iface` and records the change each began after.
    pub(super) fn opened(&self, iface: &str, facts: &Facts, opened: &[FindingKey], now: i64) {
        if opened.is_empty() {
            return;
        }
        let underlays: Vec<String> = [&facts.tunnel.underlay_iface]
            .into_iter()
            .filter(|u| !u.is_empty())
            .cloned()
            .collect();
        let cause = self.cause_of(iface, &underlays, now);
        for k in opened {
            let said = cause.as_deref().unwrap_or("");
            tracing::info!(iface, finding = %k.id, cause = said, "finding opened");
            if let Some(cause) = &cause {
                // A failure is logged once by the store (store::health).
                let _ = self
                    .shared
                    .store
                    .set_cause(&k.id, iface, k.subject.as_deref(), cause);
            }
        }
    }

    /// The cause a finding on `iface` (over `underlays`) that opened at `now` cites, from
    /// the history (so a change before a restart counts too).
    pub(super) fn cause_of(&self, iface: &str, underlays: &[String], now: i64) -> Option<String> {
        let q = EventQuery {
            since_ms: Some(now - CAUSE_WITHIN_MS),
            until_ms: Some(now),
            limit: 1000,
            ..EventQuery::default()
        };
        let page = self.shared.store.events(&q).ok()?;
        let mut concerning: Vec<_> = page
            .items
            .into_iter()
            .filter(|e| e.concerns(iface, underlays))
            .collect();
        concerning.reverse();
        timeline::cause(&concerning, now, CAUSE_WITHIN_MS)
    }
}

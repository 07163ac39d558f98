//! The Prometheus alerting rules (`rules/prometheus/`), the Grafana dashboard
//! (`dashboard/grafana/netdoctor.json`) and the lab's Prometheus helpers.
//!
//! Needs `promtool` and `prometheus` (Debian package `prometheus`): the tests skip
//! without them, and fail under CI=true. No root needed.
//!
//! One module per subject: [`alerting_rules`], [`grafana_dashboard`] and [`lab_helpers`]
//! hold the tests; [`api_metrics`] (docs/api.md's metric table) and [`exporter`] (a static
//! HTTP exporter for Prometheus to scrape) serve them.

mod api_metrics;
mod exporter;

mod alerting_rules;
mod grafana_dashboard;
mod lab_helpers;

use std::time::Duration;

/// How long a test waits for Prometheus' first successful scrape of a target.
const SCRAPE_TIMEOUT: Duration = Duration::from_secs(30);

//! The agent's own series: active findings, build, BPF programs and maps, the flow table,
//! the kernel's BPF run statistics, configuration changes, the history store and the last
//! evaluation.

use std::sync::atomic::Ordering;

use super::out::Out;
use crate::daemon::state::{Shared, View};

/// Puts the findings' and the agent's own series.
pub(super) fn agent_health(out: &mut Out, view: &View, shared: &Shared) {
    findings(out, view);
    programs(out, view, shared);
    store_and_evaluation(out, view, shared);
}

/// One series per active finding id, severity and interface.
fn findings(out: &mut Out, view: &View) {
    // Findings about several subjects (peers, flows) make one series: the alert is about
    // the interface.
    let active: std::collections::BTreeSet<(&str, String, &str)> = view
        .active
        .iter()
        .map(|f| (f.id.as_str(), f.severity.to_string(), f.interface.as_str()))
        .collect();
    for (id, severity, iface) in &active {
        out.put("netdoctor_finding_active", &[id, severity, iface], 1.0);
    }
}

/// The build, the BPF programs and maps, attach failures, configuration changes, the flow
/// table and the kernel's run statistics.
fn programs(out: &mut Out, view: &View, shared: &Shared) {
    out.put("netdoctor_build_info", &[env!("CARGO_PKG_VERSION")], 1.0);
    let h = &view.health;
    out.put(
        "netdoctor_bpf_programs_attached",
        &[],
        h.programs_attached as f64,
    );
    out.put(
        "netdoctor_attach_failures_total",
        &[],
        shared.attach_failures.load(Ordering::Relaxed) as f64,
    );
    let changes = shared
        .config_changes
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    for (kind, n) in changes {
        out.put("netdoctor_config_changes_total", &[kind], n as f64);
    }
    for (program, loaded) in &h.programs_loaded {
        out.put(
            "netdoctor_bpf_program_loaded",
            &[program],
            f64::from(u8::from(*loaded)),
        );
    }
    for (map, fill) in &h.map_fill {
        out.put("netdoctor_bpf_map_fill_ratio", &[map], *fill);
    }
    if h.flow_table.capacity > 0 {
        out.put(
            "netdoctor_flow_table_capacity",
            &[],
            h.flow_table.capacity as f64,
        );
        out.put(
            "netdoctor_flow_table_evictions_total",
            &[],
            h.flow_table.evictions as f64,
        );
    }
    if let Some(on) = h.bpf_stats_enabled {
        out.put("netdoctor_bpf_stats_enabled", &[], f64::from(u8::from(on)));
    }
    for (program, missed) in &h.program_misses {
        out.put(
            "netdoctor_bpf_missed_runs_total",
            &[program],
            *missed as f64,
        );
    }
    for (program, (runs, ns)) in &h.program_stats {
        out.put("netdoctor_bpf_run_count_total", &[program], *runs as f64);
        out.put(
            "netdoctor_bpf_run_time_seconds_total",
            &[program],
            *ns as f64 / 1e9,
        );
    }
}

/// The history store's health and when the last evaluation finished.
fn store_and_evaluation(out: &mut Out, view: &View, shared: &Shared) {
    let h = &view.health;
    let store = shared.store.health();
    out.put(
        "netdoctor_store_healthy",
        &[],
        f64::from(u8::from(store.is_ok())),
    );
    out.put(
        "netdoctor_store_errors_total",
        &[],
        store.errors_total as f64,
    );
    if h.last_evaluation_ms > 0 {
        out.put(
            "netdoctor_last_evaluation_timestamp_seconds",
            &[],
            h.last_evaluation_ms as f64 / 1000.0,
        );
    }
}

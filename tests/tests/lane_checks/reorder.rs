//! Reordering against loss, as tests/vm/reorder.sh left it: netem reordering on a veth path
//! (tcp.reordering, not the loss findings), netem loss on the same path (tcp.high_retransmits,
//! not tcp.reordering), a balance-rr bond over two veths of different delay (tcp.reordering
//! naming the bond's mode) and the same bond with equal members (silent).

use anyhow::{ensure, Result};
use netdoctor_lab::diagnosis::Diagnosis;
use netdoctor_lab::kernel_lane::Run;
use serde_json::Value;

use super::{diagnosis, Failures};

const REORDERING: &str = "tcp.reordering";
const RETRANS: &str = "tcp.high_retransmits";
const CUBIC: &str = "tcp.cubic_on_lossy_path";

/// The interface's retransmission and reordering figures, for the messages.
fn figures(d: &Diagnosis) -> String {
    let t = d.fact("traffic");
    format!(
        "segments {} retransmits {} spurious {} ({} %) reordering events {} metric {}",
        t["tcp_segments"],
        t["tcp_retransmits"],
        t["tcp_spurious_retransmits"],
        t["tcp_spurious_percent"],
        t["tcp_reord_seen"],
        t["tcp_reordering_max"]
    )
}

/// The upload crossed the interface in the window (a twin without traffic proves nothing).
fn carried(d: &Diagnosis) -> Result<()> {
    let segments = d.fact("traffic.tcp_segments").as_i64().unwrap_or(0);
    ensure!(
        segments >= 1000,
        "the upload was not in the window: {}",
        figures(d)
    );
    Ok(())
}

/// tcp.reordering with the reordering in its evidence; returns it.
fn reordered(d: &Diagnosis) -> Result<Value> {
    let f = d.expect_finding(REORDERING, "warning")?.clone();
    let e = &f["evidence"];
    let (spurious, events) = (
        e["spurious_percent"].as_f64().unwrap_or(-1.0),
        e["reordering_events"].as_i64().unwrap_or(0),
    );
    ensure!(
        (spurious > 50.0 || events >= 5) && e["reordering_metric"].as_i64() > Some(3),
        "tcp.reordering without the reordering in its evidence: {e}"
    );
    let summary = f["summary"].as_str().unwrap_or_default();
    ensure!(
        summary.contains("is reordered rather than lost"),
        "summary: {summary}"
    );
    Ok(f)
}

fn netem(run: &Run) -> Result<()> {
    let d = diagnosis(run, "reorder_netem")?;
    carried(&d)?;
    reordered(&d)?;
    d.assert_none_of(&[RETRANS, CUBIC])
}

fn loss(run: &Run) -> Result<()> {
    let d = diagnosis(run, "reorder_loss")?;
    carried(&d)?;
    d.expect_finding(RETRANS, "warning")?;
    d.assert_none_of(&[REORDERING])
}

fn balance_rr(run: &Run) -> Result<()> {
    ensure!(
        run.text("reorder_rr.unsupported").is_empty(),
        "no balance-rr bond here: {}",
        run.text("reorder_rr.unsupported")
    );
    let d = diagnosis(run, "reorder_rr")?;
    carried(&d)?;
    let f = reordered(&d)?;
    let (summary, fix) = (
        f["summary"].as_str().unwrap_or_default(),
        f["fix"].as_str().unwrap_or_default(),
    );
    ensure!(
        f["evidence"]["bond_mode"] == "balance-rr"
            && summary.contains("is a bond in balance-rr over 2 links")
            && fix.contains("type bond mode balance-xor xmit_hash_policy layer3+4"),
        "the bond's balance-rr not named: summary {summary:?}, fix {fix:?}"
    );
    Ok(())
}

fn even(run: &Run) -> Result<()> {
    let d = diagnosis(run, "reorder_rr_even")?;
    carried(&d)?;
    d.assert_none_of(&[REORDERING])
        .map_err(|e| e.context(figures(&d)))
}

/// Every case of the suite; whether all held.
pub fn check(run: &Run, failures: &mut Failures) -> bool {
    let before = failures.0.len();
    failures.check("reorder_netem", run, || netem(run));
    failures.check("reorder_loss", run, || loss(run));
    failures.check("reorder_rr", run, || balance_rr(run));
    failures.check("reorder_rr_even", run, || even(run));
    for case in [
        "reorder_netem",
        "reorder_loss",
        "reorder_rr",
        "reorder_rr_even",
    ] {
        if let Ok(d) = diagnosis(run, case) {
            println!("{} {case}: {:?}; {}", run.name, d.ids(), figures(&d));
        }
    }
    failures.0.len() == before
}

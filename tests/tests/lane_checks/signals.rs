//! The kernel lane's signal cases (tests/vm/cases.sh, every kernel): SIGINT and SIGTERM
//! during `diagnose --attach netlink`, the attachment kernels before 6.6 fall back to.

use anyhow::{ensure, Result};
use netdoctor_lab::kernel_lane::{Run, Signals};

/// SIGINT and SIGTERM during `diagnose --attach netlink`: attached while it ran (tc filters,
/// the clsact, generic XDP for `sigterm`), then exit 130 / 143 with the line saying so, and
/// nothing left: no filter, no XDP, no clsact. `sigint_theirs`: the clsact that was there
/// before stays, with its u32 filter, and only netdoctor's filter goes.
pub fn check(run: &Run, _: &mut Signals) -> Result<()> {
    for (case, code, name) in [
        ("sigint", 130, "SIGINT"),
        ("sigterm", 143, "SIGTERM"),
        ("sigint_theirs", 130, "SIGINT"),
    ] {
        let during = run.text(&format!("{case}.during"));
        let after = run.text(&format!("{case}.after"));
        ensure!(
            during.contains("clsact") && during.contains("nd_tc_egress"),
            "{case}: not attached by netlink while it ran:\n{during}"
        );
        if case == "sigterm" {
            ensure!(
                during.contains("xdpgeneric"),
                "{case}: no generic XDP while it ran:\n{during}"
            );
        }
        ensure!(
            run.rc(case) == code,
            "{case}: exit code {}, expected {code}",
            run.rc(case)
        );
        let line = format!("netdoctor: stopped by {name}");
        ensure!(
            run.text(&format!("{case}.err")).contains(&line),
            "{case}: no {line:?} on stderr"
        );
        ensure!(
            !after.contains("nd_tc") && !after.contains("xdp"),
            "{case}: netdoctor's programs left attached:\n{after}"
        );
        let theirs = case == "sigint_theirs";
        ensure!(
            after.contains("clsact") == theirs && after.contains("u32") == theirs,
            "{case}: the clsact qdisc {} after the signal:\n{after}",
            if theirs {
                "that was there before (with its u32 filter) must stay"
            } else {
                "netdoctor created must go"
            }
        );
    }
    Ok(())
}

//! The kernel lane's netlink cases (tests/vm/cases.sh, every kernel), the attachment kernels
//! before 6.6 fall back to: SIGINT and SIGTERM during `diagnose --attach netlink`, and two
//! data planes attached by netlink to one interface at once.

use anyhow::{ensure, Context, Result};
use netdoctor_lab::kernel_lane::{Run, Signals};

use super::diagnosis;

/// Ctrl-C and SIGTERM during `diagnose --attach netlink`: attached while it ran (tc filters,
/// the clsact, generic XDP for `sigterm`), then nothing left: no filter, no XDP, no clsact.
/// SIGTERM exits 143 with the line saying so; Ctrl-C ends the observation, which is reported
/// (a shorter window, noted). `sigint_theirs`: the clsact that was there before stays, with
/// its u32 filter, and only netdoctor's filter goes.
pub fn check(run: &Run, _: &mut Signals) -> Result<()> {
    for (case, code, name) in [
        ("sigint", None, "SIGINT"),
        ("sigterm", Some(143), "SIGTERM"),
        ("sigint_theirs", None, "SIGINT"),
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
        match code {
            Some(code) => {
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
            }
            None => diagnosis(run, case)?.expect_ended_early(200.0)?,
        }
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

/// The handles of program `name`'s filters in `tc filter show` output, each at netdoctor's
/// priority (0xe0d0 = 57552).
fn handles(shown: &str, name: &str) -> Result<Vec<String>> {
    shown
        .lines()
        .filter(|l| l.contains(name))
        .map(|l| {
            ensure!(
                l.contains("pref 57552 "),
                "not at netdoctor's priority: {l}"
            );
            l.split_whitespace()
                .skip_while(|w| *w != "handle")
                .nth(1)
                .map(str::to_owned)
                .with_context(|| format!("no handle in {l}"))
        })
        .collect()
}

/// Data planes by netlink on one interface at once: `two_netlink` (`flows` with generic XDP
/// and a tc egress filter) beside a diagnosis (`two_netlink_diag`): while both run, an egress
/// filter of each at its own handle and the diagnosis's ingress filter; the diagnosis exits 0
/// and leaves `flows`' egress filter and XDP in place. Then a `flows` asking for XDP too
/// (`two_netlink_xdp`) exits 0 counting with tc, saying that XDP is taken. The first counts
/// exactly the 20 pings sent after both and exits 0; after it, nothing is left.
pub fn two_data_planes(run: &Run, _: &mut Signals) -> Result<()> {
    let during = run.text("two_netlink.during");
    let egress = handles(&during, "nd_tc_egress")?;
    ensure!(
        egress.len() == 2 && egress[0] != egress[1] && during.contains("xdpgeneric"),
        "while both ran: two egress filters at their own handles and XDP expected:\n{during}"
    );
    ensure!(
        handles(&during, "nd_tc_ingress")?.len() == 1,
        "while both ran: the diagnosis's ingress filter expected:\n{during}"
    );
    ensure!(
        run.rc("two_netlink_diag") == 0,
        "the diagnosis exited with {}",
        run.rc("two_netlink_diag")
    );
    let between = run.text("two_netlink.between");
    ensure!(
        handles(&between, "nd_tc_egress")?.len() == 1
            && !between.contains("nd_tc_ingress")
            && between.contains("xdpgeneric"),
        "after the diagnosis, flows' egress filter and XDP (only) expected:\n{between}"
    );
    let xdp = run.json("two_netlink_xdp.out");
    let xdp_err = run.text("two_netlink_xdp.err");
    ensure!(
        run.rc("two_netlink_xdp") == 0
            && xdp.is_ok_and(|v| v["hooks"]["ingress"] == "tc")
            && xdp_err.contains("XDP is taken by nd_xdp_ingress")
            && xdp_err.contains("with tc instead"),
        "a flows asking for the XDP flows has: exit {}, expected 0 counting with tc and a note \
         that XDP is taken; stderr:\n{xdp_err}",
        run.rc("two_netlink_xdp")
    );
    ensure!(
        run.rc("two_netlink") == 0,
        "flows exited with {}",
        run.rc("two_netlink")
    );
    let flows = run.json("two_netlink.out")?;
    let icmp: Vec<i64> = flows["flows"]
        .as_array()
        .map_or(&[][..], Vec::as_slice)
        .iter()
        .filter(|f| f["protocol"] == 1)
        .filter_map(|f| f["packets"].as_i64())
        .collect();
    ensure!(
        icmp == [20, 20],
        "flows counted ICMP flows of {icmp:?} packets after the others ended, 20 each way sent"
    );
    let after = run.text("two_netlink.after");
    ensure!(
        !after.contains("nd_tc") && !after.contains("xdp") && !after.contains("clsact"),
        "left after all:\n{after}"
    );
    Ok(())
}

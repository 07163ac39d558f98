//! What every test reads its report with: addresses, iperf3's port of its data
//! connection, the one flow matching a predicate, and a tolerance check of counts; and for
//! the attachment tests, netdoctor started in the background, the clsact qdisc, netdoctor's
//! tc filters and someone else's.

use std::net::IpAddr;

use anyhow::{bail, Context, Result};
use netdoctor_lab::netdoctor::{self, Flow, Report, START_TIMEOUT};
use netdoctor_lab::{BgProcess, Iperf3Report, Netns};
use serde_json::Value;

pub(crate) fn ip(s: &str) -> Result<IpAddr> {
    s.parse().with_context(|| format!("bad address {s}"))
}

/// The local TCP port of iperf3's data connection (`start.connected[0]`),
/// as iperf3 itself reports it.
pub(crate) fn iperf3_local_port(r: &Iperf3Report) -> Result<u16> {
    r.json
        .pointer("/start/connected/0/local_port")
        .and_then(Value::as_u64)
        .and_then(|p| u16::try_from(p).ok())
        .context("iperf3 JSON has no start.connected[0].local_port")
}

/// The single flow matching `pred`; errors listing every flow otherwise.
pub(crate) fn one_flow<'a>(
    report: &'a Report,
    what: &str,
    pred: impl Fn(&Flow) -> bool,
) -> Result<&'a Flow> {
    let matching: Vec<&Flow> = report.flows.iter().filter(|f| pred(f)).collect();
    match matching.as_slice() {
        [f] => Ok(f),
        _ => bail!(
            "expected exactly one flow {what}, found {}; flows:\n{}",
            matching.len(),
            report.describe_flows()
        ),
    }
}

/// |measured - expected| <= expected * pct / 100 + abs.
pub(crate) fn assert_close(what: &str, measured: u64, expected: u64, pct: u64, abs: u64) {
    let tolerance = expected * pct / 100 + abs;
    assert!(
        measured.abs_diff(expected) <= tolerance,
        "{what}: netdoctor {measured} vs kernel {expected} (difference {} > tolerance {tolerance})",
        measured.abs_diff(expected)
    );
}

/// The interface of [`netdoctor_lab::PairTopology`]'s namespaces.
pub(crate) const IF: &str = netdoctor_lab::PairTopology::IFNAME;

/// Someone else's filter on [`IF`]'s ingress: u32, which needs no action module.
const FOREIGN_FILTER: [&str; 17] = [
    "tc", "filter", "add", "dev", IF, "ingress", "prio", "1", "protocol", "ip", "u32", "match",
    "u32", "0", "0", "classid", "1:1",
];

pub(crate) fn add_foreign_filter(ns: &Netns) -> Result<()> {
    ns.run(&FOREIGN_FILTER)?;
    Ok(())
}

/// Whether [`IF`] has a clsact qdisc.
pub(crate) fn has_clsact(ns: &Netns) -> Result<bool> {
    Ok(ns
        .run(&["tc", "qdisc", "show", "dev", IF])?
        .contains("clsact"))
}

/// The handles of program `name`'s filters in `tc filter show dev IF DIR`, each checked to
/// be at netdoctor's priority (0xe0d0 = 57552).
pub(crate) fn our_filters(ns: &Netns, dir: &str, name: &str) -> Result<Vec<String>> {
    let shown = ns.run(&["tc", "filter", "show", "dev", IF, dir])?;
    shown
        .lines()
        .filter(|l| l.contains(name))
        .map(|l| {
            if !l.contains("pref 57552 ") {
                bail!("not at netdoctor's priority: {l}");
            }
            let handle = l.split_whitespace().skip_while(|w| *w != "handle").nth(1);
            handle
                .map(str::to_owned)
                .with_context(|| format!("no handle in {l}"))
        })
        .collect()
}

/// `netdoctor ARGS` in the background in `ns`, once it printed `ready` (attached).
pub(crate) fn start(ns: &Netns, args: &[&str], ready: &str) -> Result<BgProcess> {
    let bin = netdoctor::binary()?;
    let command = ns.command(&bin.to_string_lossy(), args);
    let mut process = ns.spawn_command(&format!("netdoctor {}", args.join(" ")), command)?;
    process.wait_for_output(ready, START_TIMEOUT)?;
    Ok(process)
}

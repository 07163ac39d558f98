//! The packet section: iperf3 runs with nothing attached (baseline), with `netdoctor flows`
//! in each configuration (plus the empty tc programs in front of it and, on tc, NetObserv's
//! behind it), and with only the empty programs (XDP floor runs); per run the programs'
//! statistics deltas and the CPU time the machine spent busy.

pub(crate) mod run;

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use netdoctor_lab::BgProcess;
use serde_json::Value;

use crate::args::Config;
use crate::floor::Floor;
use crate::lab::{finish_netdoctor, flows_argv, Lab, NetPath};
use crate::machine::{clk_tck, cpu_busy_ns};
use crate::peer::Peer;
use crate::programs::{all_programs, query_hooks};
use crate::{STOP, WATCHING};
use run::{DirCount, Hook, Kind, ProgRun, Role, Run};

/// Runs `f` and returns, beside its result, the statistics deltas of the programs in `ids`
/// and how much CPU time the machine spent busy meanwhile.
pub(crate) fn measure<T>(
    ids: &[(Role, Hook, u32)],
    f: impl FnOnce() -> Result<T>,
) -> Result<(T, Vec<ProgRun>, Option<u64>)> {
    // Asked once (it runs `getconf`), not at every run.
    static CLK_TCK: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    let clk_tck = *CLK_TCK.get_or_init(clk_tck);
    let busy_before = cpu_busy_ns(clk_tck);
    let before = all_programs();
    let out = f()?;
    let after = all_programs();
    let busy = cpu_busy_ns(clk_tck)
        .zip(busy_before)
        .map(|(b, a)| b.saturating_sub(a));
    let mut progs = Vec::new();
    for &(role, hook, id) in ids {
        let (Some(b), Some(a)) = (before.get(&id), after.get(&id)) else {
            bail!("program {id} vanished during the run");
        };
        progs.push(ProgRun {
            role,
            hook,
            name: a.name.clone(),
            id,
            runs: a.run_cnt.saturating_sub(b.run_cnt),
            run_time_ns: a.run_time_ns.saturating_sub(b.run_time_ns),
        });
    }
    Ok((out, progs, busy))
}

/// Starts `netdoctor flows` on the watched interface and finds its attached programs.
pub(crate) fn start_netdoctor(
    lab: &Lab,
    netdoctor: &str,
    config: Config,
) -> Result<(BgProcess, Vec<(Hook, u32)>)> {
    let known: HashSet<u32> = all_programs().into_keys().collect();
    let mut argv = flows_argv(netdoctor);
    argv.extend_from_slice(config.netdoctor_args());
    let mut nd = lab.watched().spawn(&argv)?;
    nd.wait_for_output(WATCHING, Duration::from_secs(30))
        .context("netdoctor did not attach")?;
    let attached = query_hooks(lab.watched(), lab.ifindex)?;
    let mut found: Vec<(Hook, u32)> = all_programs()
        .into_iter()
        .filter(|(id, _)| !known.contains(id) && attached.contains(*id))
        .filter_map(|(id, p)| Hook::from_netdoctor_name(&p.name).map(|h| (h, id)))
        .collect();
    found.sort();
    let hooks: Vec<Hook> = found.iter().map(|(h, _)| *h).collect();
    let want = config.hooks();
    ensure!(
        hooks == want,
        "expected netdoctor's new programs on {want:?} of the watched interface, found {found:?} \
         (attached: {attached:?}); netdoctor stderr: {}",
        nd.stderr().unwrap_or_default().trim()
    );
    Ok((nd, found))
}

/// Checks that each tcx chain of the watched interface runs exactly the measured programs,
/// in the order the figures assume: the floor, netdoctor, then NetObserv.
fn check_order(lab: &Lab, ids: &[(Role, Hook, u32)]) -> Result<()> {
    let attached = query_hooks(lab.watched(), lab.ifindex)?;
    for (hook, chain) in [
        (Hook::TcIn, &attached.tc_in),
        (Hook::TcOut, &attached.tc_out),
    ] {
        let want: Vec<u32> = [Role::Floor, Role::Netdoctor, Role::Peer]
            .into_iter()
            .flat_map(|role| {
                ids.iter()
                    .filter(move |&&(r, h, _)| r == role && h == hook)
                    .map(|&(_, _, id)| id)
            })
            .collect();
        ensure!(
            *chain == want,
            "{} chain of the watched interface is {chain:?}, expected floor, netdoctor, NetObserv: \
             {want:?}",
            hook.name()
        );
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn run_once(
    lab: &Lab,
    floor: &Floor<'_>,
    peer: Option<&Peer>,
    netdoctor: &str,
    kind: Kind,
    round: u32,
    secs: u32,
    parallel: u32,
) -> Result<Run> {
    if STOP.load(Ordering::SeqCst) {
        bail!("interrupted");
    }
    let mut run = Run {
        path: lab.path,
        kind,
        round,
        parallel,
        secs,
        duration_s: 0.0,
        gbps: 0.0,
        retransmits: None,
        programs: Vec::new(),
        counters: None,
        flows_total: None,
        ingress_hook: None,
        cpu_busy_ns: None,
    };
    let started = Instant::now();
    let report = match kind {
        Kind::Baseline => lab.iperf(secs, parallel)?,
        Kind::Netdoctor(config) => {
            let (nd, found) = start_netdoctor(lab, netdoctor, config)?;
            let floor_hooks: Vec<Hook> = found
                .iter()
                .map(|(h, _)| *h)
                .filter(|h| *h != Hook::Xdp)
                .collect();
            // The floor first (see `floor`), the peer last: its TC_ACT_OK ends the tcx
            // chain (see `peer`).
            let links = floor.attach(lab.watched(), lab.ifindex, &floor_hooks, 0)?;
            let mut ids: Vec<(Role, Hook, u32)> = found
                .iter()
                .map(|&(h, id)| (Role::Netdoctor, h, id))
                .collect();
            ids.extend(floor_hooks.iter().map(|&h| (Role::Floor, h, floor.id(h))));
            let peer_links = match peer.filter(|_| config.is_tc()) {
                Some(p) => {
                    let links = p.attach(lab.watched(), lab.ifindex, &floor_hooks)?;
                    ids.extend(
                        floor_hooks
                            .iter()
                            .filter_map(|&h| Some((Role::Peer, h, p.id(h)?))),
                    );
                    links
                }
                None => Vec::new(),
            };
            check_order(lab, &ids)?;
            let (report, progs, busy) = measure(&ids, || lab.iperf(secs, parallel))?;
            drop(peer_links);
            drop(links);
            run.cpu_busy_ns = busy;
            let json = finish_netdoctor(nd)?;
            let counters = json.get("counters").cloned().unwrap_or(Value::Null);
            run.counters = Some((
                DirCount::from_json(&counters["ingress"]),
                DirCount::from_json(&counters["egress"]),
            ));
            run.flows_total = json.get("flows_total").and_then(Value::as_u64);
            // On the underlay the WireGuard tracking must have run: paths per endpoint.
            let wg_paths = json["wireguard_paths"].as_array().map_or(0, Vec::len);
            ensure!(
                lab.path != NetPath::Wireguard || wg_paths > 0,
                "netdoctor reported no WireGuard path on the underlay: its WireGuard tracking \
                 did not run on the measured packets"
            );
            let ingress = json["hooks"]["ingress"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            ensure!(
                ingress == config.expected_ingress(),
                "netdoctor used ingress hook {ingress:?}, expected {:?}",
                config.expected_ingress()
            );
            run.ingress_hook = Some(ingress);
            run.programs = progs;
            report
        }
        Kind::Floor(config) => {
            let hooks = config.hooks();
            let links = floor.attach(
                lab.watched(),
                lab.ifindex,
                hooks,
                config.xdp_flags().unwrap_or(0),
            )?;
            let ids: Vec<(Role, Hook, u32)> = hooks
                .iter()
                .map(|&h| (Role::Floor, h, floor.id(h)))
                .collect();
            let (report, progs, busy) = measure(&ids, || lab.iperf(secs, parallel))?;
            drop(links);
            run.cpu_busy_ns = busy;
            run.programs = progs;
            report
        }
    };
    run.duration_s = started.elapsed().as_secs_f64();
    run.gbps = report.received_bits_per_second / 1e9;
    run.retransmits = report.retransmits;
    Ok(run)
}

pub(crate) fn progress(run: &Run, total: usize, done: usize) {
    let mut line = format!(
        "[{done:>2}/{total}] round {} {:<9} {:<20} {:>6.2} Gbit/s",
        run.round + 1,
        run.path.name(),
        if run.parallel > 1 {
            format!("{} -P {}", run.kind.label(), run.parallel)
        } else {
            run.kind.label()
        },
        run.gbps
    );
    for p in &run.programs {
        let who = match p.role {
            Role::Netdoctor => "nd",
            Role::Floor => "floor",
            Role::Peer => "netobserv",
        };
        match p.ns_per_run() {
            Some(ns) => line.push_str(&format!("  {who} {} {ns:.0} ns/run", p.hook.name())),
            None => line.push_str(&format!("  {who} {} no runs", p.hook.name())),
        }
    }
    eprintln!("{line}");
}

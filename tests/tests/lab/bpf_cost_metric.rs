//! The agent's own cost on `/metrics` (issue 34): each program it loaded reports runs and
//! run time from the kernel's BPF statistics while `kernel.bpf_stats_enabled` reads 1, and
//! nothing of them while it reads 0 (the agent never switches the statistics on itself); the
//! runs the kernel skipped are exported either way.
//!
//! The real agent in one end of a veth pair, pings from the other. Both tests set the
//! host-wide sysctl and restore what it was, taking turns with every test that sets it
//! ([`StatsSysctl`]).
//!
//! Needs root and BPF; skips elsewhere, fails under CI=true.

use std::time::Duration;

use anyhow::{ensure, Result};
use netdoctor_lab::agent::{find_metric, parse_metrics, Agent};
use netdoctor_lab::bpf::sysctl::StatsSysctl;
use netdoctor_lab::wait::eventually;
use netdoctor_lab::{lab_guard, PairTopology};

/// The program that counts what `eth0` receives.
const INGRESS: &str = "nd_tc_ingress";
/// How long the agent (1 s evaluations) may take to publish on a busy machine.
const SETTLE: Duration = Duration::from_secs(15);

/// `netdoctor_bpf_run_count_total{program}` and the run time, if exported.
fn runs(text: &str, program: &str) -> Result<Option<(f64, f64)>> {
    let samples = parse_metrics(text)?;
    let one = |name| {
        find_metric(&samples, name, &[("program", program)])
            .first()
            .map(|s| s.value)
    };
    Ok(one("netdoctor_bpf_run_count_total").zip(one("netdoctor_bpf_run_time_seconds_total")))
}

fn stats_gauge(text: &str) -> Result<Option<f64>> {
    let samples = parse_metrics(text)?;
    Ok(find_metric(&samples, "netdoctor_bpf_stats_enabled", &[])
        .first()
        .map(|s| s.value))
}

fn ping(pair: &PairTopology) -> Result<()> {
    pair.b
        .run(&["ping", "-c", "20", "-i", "0.05", "-q", PairTopology::A_IP])?;
    Ok(())
}

#[test]
fn with_bpf_stats_on_each_program_reports_runs_that_grow() -> Result<()> {
    lab_guard!();
    let pair = PairTopology::new(1500)?;
    let _on = StatsSysctl::set(true)?;
    let agent = Agent::start(&pair.a, &["--interval", "1s", "--no-probe"])?;
    ping(&pair)?;
    let first = eventually(SETTLE, || {
        let r = runs(&agent.metrics()?, INGRESS)?;
        ensure!(
            r.is_some_and(|(n, t)| n >= 20.0 && t > 0.0),
            "{INGRESS}: no runs of the pings on /metrics: {r:?}"
        );
        Ok(r.unwrap_or_default())
    })?;
    ping(&pair)?;
    eventually(SETTLE, || {
        let r = runs(&agent.metrics()?, INGRESS)?.unwrap_or_default();
        ensure!(
            r.0 >= first.0 + 20.0 && r.1 > first.1,
            "{INGRESS}: runs did not grow with 20 more pings: {first:?} then {r:?}"
        );
        Ok(())
    })?;
    // Every program the agent loaded has its series, the socket and drop programs too.
    let m = agent.metrics()?;
    for program in ["nd_tc_egress", "nd_kfree_skb"] {
        ensure!(runs(&m, program)?.is_some(), "no run series for {program}");
    }
    ensure!(
        stats_gauge(&m)? == Some(1.0),
        "netdoctor_bpf_stats_enabled is not 1"
    );
    Ok(())
}

#[test]
fn with_bpf_stats_off_no_run_figures_are_exported() -> Result<()> {
    lab_guard!();
    let pair = PairTopology::new(1500)?;
    let _off = StatsSysctl::set(false)?;
    let agent = Agent::start(&pair.a, &["--interval", "1s", "--no-probe"])?;
    ping(&pair)?;
    // Two evaluations after the traffic.
    eventually(SETTLE, || {
        let m = agent.metrics()?;
        ensure!(
            m.contains("netdoctor_flow_table_capacity "),
            "no evaluation published yet"
        );
        Ok(())
    })?;
    std::thread::sleep(Duration::from_secs(2));
    let m = agent.metrics()?;
    ensure!(
        !m.contains("netdoctor_bpf_run_count_total{")
            && !m.contains("netdoctor_bpf_run_time_seconds_total{"),
        "run figures exported with the statistics off:\n{}",
        m.lines()
            .filter(|l| l.starts_with("netdoctor_bpf_run"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    ensure!(
        stats_gauge(&m)? == Some(0.0),
        "netdoctor_bpf_stats_enabled is not 0"
    );
    // Skipped runs are counted whether or not the statistics are on.
    let samples = parse_metrics(&m)?;
    for program in [INGRESS, "nd_tcp_retransmit", "nd_kfree_skb"] {
        ensure!(
            !find_metric(
                &samples,
                "netdoctor_bpf_missed_runs_total",
                &[("program", program)]
            )
            .is_empty(),
            "no netdoctor_bpf_missed_runs_total for {program}"
        );
    }
    Ok(())
}

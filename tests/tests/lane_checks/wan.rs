//! WAN paths with netem, as tests/vm/wan.sh left them: cubic and bbr on a lossy path, the
//! loss-based estimate (Mathis) against iperf3, high retransmissions, a kernel WireGuard MTU
//! error and a PMTU blackhole behind long round trips, each with its twin.

use anyhow::{ensure, Context, Result};
use netdoctor_lab::kernel_lane::{runs_suite, Run};
use netdoctor_lab::netdoctor;
use std::time::Duration;

use super::{diagnosis, Failures};

const CUBIC: &str = "tcp.cubic_on_lossy_path";
const RETRANS: &str = "tcp.high_retransmits";

/// iperf3's received rate in case file `name` (JSON), bits/s.
fn iperf3_bps(run: &Run, name: &str) -> Result<f64> {
    let v = run.json(name)?;
    v["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .with_context(|| format!("{name}: no end.sum_received: {:.300}", v.to_string()))
}

/// Whether tcp.high_retransmits' condition holds on case `case`'s facts: the rule evaluated
/// again by `netdoctor rules eval` on the saved report, so this check and the rule cannot drift.
fn retrans_says(run: &Run, case: &str) -> Result<bool> {
    let report = run.dir.join(format!("{case}.out"));
    let report = report.to_string_lossy();
    let args = ["rules", "eval", &report, "--rule", RETRANS, "--json"];
    let out = netdoctor::run(None, &args, Duration::from_secs(30))?;
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).with_context(|| {
        format!(
            "netdoctor rules eval {report}: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })?;
    let found = v["findings"].as_array().map_or(0, Vec::len);
    ensure!(
        v["not_evaluated"].as_array().is_some_and(Vec::is_empty),
        "{RETRANS} not evaluated on {case}'s facts: {v}"
    );
    Ok(found > 0)
}

/// What the cubic finding at one (RTT, loss) point says, beside iperf3's figure.
struct Point {
    /// The loss-based estimate, bits/s.
    estimate: f64,
    /// What netdoctor saw the connection move in its window, bits/s.
    moved: f64,
    /// iperf3's received rate for the whole connection, bits/s.
    iperf: f64,
    /// The connection's srtt (ms) and retransmission ratio, which the estimate uses.
    srtt_ms: f64,
    retrans: f64,
}

/// The cubic finding at (rtt, loss) and its numbers.
fn cubic(run: &Run, point: &str, rtt_ms: f64) -> Result<Point> {
    let case = format!("wan_cubic_{point}");
    let d = diagnosis(run, &case)?;
    let f = d.expect_finding(CUBIC, "warning")?;
    let ev = &f["evidence"];
    let num = |k: &str| ev[k].as_f64().unwrap_or(-1.0);
    let (estimate, moved, srtt) = (
        num("loss_based_limit_bps"),
        num("throughput_bps"),
        num("srtt_ms"),
    );
    ensure!(
        estimate > 0.0
            && moved > 0.0
            && srtt >= rtt_ms * 0.9
            && num("host_throughput_bps") >= moved,
        "the finding's evidence lacks the estimate, the rate or the round trip: {ev}"
    );
    ensure!(
        num("congestion_limited_percent") >= 50.0,
        "a cubic bulk transfer on a lossy path is limited by its congestion window: {ev}"
    );
    let summary = f["summary"].as_str().unwrap_or_default();
    ensure!(
        summary.contains("can sustain about")
            && super::says_rate(summary)
            && summary.contains("ms RTT"),
        "summary: {summary}"
    );
    Ok(Point {
        estimate,
        moved,
        iperf: iperf3_bps(run, &format!("{case}.iperf3"))?,
        srtt_ms: srtt,
        retrans: num("retrans_ratio"),
    })
}

fn wan_cases(run: &Run, failures: &mut Failures) {
    failures.check("wan_bbr_60_5", run, || {
        let d = diagnosis(run, "wan_bbr_60_5")?;
        d.assert_none_of(&[CUBIC])?;
        let says = retrans_says(run, "wan_bbr_60_5")?;
        ensure!(
            d.all(RETRANS).is_empty() != says,
            "{RETRANS} present: {}, its condition on the facts: {says}:\n{}",
            !d.all(RETRANS).is_empty(),
            d.describe()
        );
        Ok(())
    });
    if !runs_suite(&run.name, "wan_faults") {
        return;
    }
    failures.check("wan_retrans_20_10", run, || {
        let d = diagnosis(run, "wan_retrans_20_10")?;
        d.expect_finding(RETRANS, "warning")?;
        d.assert_none_of(&[CUBIC])
    });
    failures.check("wan_retrans_20_05", run, || {
        diagnosis(run, "wan_retrans_20_05")?.assert_none_of(&[RETRANS, CUBIC])
    });
    failures.check("wan_wg1500", run, || {
        let d = diagnosis(run, "wan_wg1500")?;
        d.expect_finding("mtu.tunnel_exceeds_underlay", "critical")?;
        d.check_exit_code()
    });
    failures.check("wan_wg1440", run, || {
        diagnosis(run, "wan_wg1440")?.expect_healthy()
    });
    failures.check("wan_blackhole", run, || {
        let d = diagnosis(run, "wan_blackhole")?;
        d.expect_finding("pmtu.blackhole", "critical")?;
        Ok(())
    });
    failures.check("wan_pmtud", run, || {
        diagnosis(run, "wan_pmtud")?.assert_none_of(&["pmtu.blackhole"])
    });
}

/// Every case of the suite; returns whether all held and the estimate-vs-iperf3 table.
pub fn check(run: &Run, failures: &mut Failures) -> (bool, String) {
    let before = failures.0.len();
    wan_cases(run, failures);
    let mut table = format!(
        "loss-based estimate vs iperf3 on {} (netem RTT and loss; the connection's srtt and \
         retransmission ratio; rates in Mbit/s):\n| RTT ms | loss % | srtt ms | retrans % | \
         estimate | netdoctor saw cubic move | iperf3 cubic | iperf3 bbr | cubic / estimate \
         |\n|---|---|---|---|---|---|---|---|---|\n",
        run.name
    );
    let points = [
        ("60_5", 60.0, 5.0, "wan_bbr_60_5.iperf3"),
        ("20_2", 20.0, 2.0, "wan_bbr_20_2.iperf3"),
        ("200_2", 200.0, 2.0, "wan_bbr_200_2.iperf3"),
    ];
    let here = if runs_suite(&run.name, "mathis") {
        3
    } else {
        1
    };
    for (point, rtt, loss, bbr) in points.into_iter().take(here) {
        failures.check(&format!("wan_cubic_{point}"), run, || {
            let p = cubic(run, point, rtt)?;
            let (estimate, iperf_cubic) = (p.estimate, p.iperf);
            let iperf_bbr = iperf3_bps(run, bbr)?;
            let ratio = iperf_cubic / estimate;
            table.push_str(&format!(
                "| {rtt} | {loss} | {:.1} | {:.1} | {:.2} | {:.2} | {:.2} | {:.2} | {ratio:.2} |\n",
                p.srtt_ms,
                p.retrans * 100.0,
                estimate / 1e6,
                p.moved / 1e6,
                iperf_cubic / 1e6,
                iperf_bbr / 1e6
            ));
            // Mathis gives the order of what cubic gets up to tens of ms (measured here 1.1-1.9
            // times the estimate at 20-60 ms: within a factor of 3 either way), and bbr, which
            // does not read loss as congestion, is ahead everywhere. The formula counts lost
            // packets where TCP backs off once per loss event (several losses in one window),
            // so at long RTTs, with many packets in flight, cubic beats it by more (2.7-6.8
            // times at 200 ms): there the estimate only must not overstate cubic.
            let agrees = if rtt <= 60.0 {
                (1.0 / 3.0..=3.0).contains(&ratio)
            } else {
                ratio >= 1.0 / 3.0
            };
            ensure!(
                agrees && iperf_bbr > iperf_cubic,
                "at {rtt} ms and {loss} % the estimate is {:.2} Mbit/s, iperf3 moved cubic {:.2}, bbr {:.2}",
                estimate / 1e6,
                iperf_cubic / 1e6,
                iperf_bbr / 1e6
            );
            Ok(())
        });
    }
    (failures.0.len() == before, table)
}

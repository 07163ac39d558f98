//! The cases every kernel runs (tests/vm/cases.sh): the data plane's counters on tc and
//! XDP against the kernel's, socket telemetry, drops with and without reasons, SIGINT and
//! SIGTERM cleaning up netlink attachments and two data planes attached by netlink at once
//! (`super::signals`), the agent with and without BPF, and kernel WireGuard's MTU finding
//! with its twins. Each check records the signals it proves for the kernel table.

use anyhow::{ensure, Context, Result};
use netdoctor_lab::kernel_lane::{Run, Signals};
use serde_json::Value;

use super::diagnosis;

/// What a kernel must give. `None`: whatever it gives is recorded, not required (the
/// host's kernel is whatever CI runs on).
#[derive(Debug, Clone, Copy)]
struct Expect {
    /// tc programs attached by tcx links (else by netlink clsact filters).
    tcx: Option<bool>,
    /// kfree_skb reports drop reasons (Linux 5.17).
    drop_reasons: Option<bool>,
    /// Kernel WireGuard is there (the host's kernel has none).
    wireguard: Option<bool>,
}

fn expect(kernel: &str) -> Expect {
    match kernel {
        "5.10" => Expect {
            tcx: Some(false),
            drop_reasons: Some(false),
            wireguard: Some(true),
        },
        "6.1" => Expect {
            tcx: Some(false),
            drop_reasons: Some(true),
            wireguard: Some(true),
        },
        "6.12" => Expect {
            tcx: Some(true),
            drop_reasons: Some(true),
            wireguard: Some(true),
        },
        _ => Expect {
            tcx: None,
            drop_reasons: None,
            wireguard: None,
        },
    }
}

/// A check of one case: Ok, or what is wrong.
type Check = Result<()>;

/// A case's check, which records the signals it proves.
type CaseCheck = fn(&Run, &mut Signals) -> Check;

/// Case `case`'s JSON report, once it exited 0.
fn output(run: &Run, case: &str) -> Result<Value> {
    ensure!(run.rc(case) == 0, "netdoctor exited with {}", run.rc(case));
    run.json(&format!("{case}.out"))
}

fn counters(v: &Value, dir: &str) -> i64 {
    v["counters"][dir]["packets"].as_i64().unwrap_or(-1)
}

fn ip_delta(run: &Run, dir: &str) -> Result<i64> {
    let at = |name: &str| -> Result<i64> {
        let v = run.json(name)?;
        v[0]["stats64"][dir]["packets"]
            .as_i64()
            .with_context(|| format!("{name}: no stats64.{dir}.packets"))
    };
    Ok(at("dataplane.after")? - at("dataplane.before")?)
}

/// tc counters against the kernel's own (`ip -s link`) over the same window: the 20 pings
/// and their replies exactly, and nothing the kernel counted that netdoctor did not. A
/// non-IP frame (the neighbour layer's) may slip between attaching and the first read of
/// `ip -s link`: netdoctor then counts it and the kernel's delta does not.
fn dataplane(run: &Run, s: &mut Signals) -> Check {
    let v = output(run, "dataplane")?;
    s.tc = v["hooks"]["method"].as_str().unwrap_or("?").to_owned();
    ensure!(v["hooks"]["ingress"] == "tc", "ingress hook {}", v["hooks"]);
    for (dir, kernel_dir) in [("ingress", "rx"), ("egress", "tx")] {
        let ip = ip_delta(run, kernel_dir)?;
        let all = counters(&v, dir);
        let non_ip = v["counters"][dir]["non_ip"].as_i64().unwrap_or(-1);
        ensure!(
            all - non_ip == 20 && (all - non_ip..=all).contains(&ip),
            "{dir}: netdoctor counted {all} packets ({non_ip} not IP), ip -s link {ip}; 20 pings"
        );
    }
    let icmp: Vec<i64> = v["flows"]
        .as_array()
        .map_or(&[][..], Vec::as_slice)
        .iter()
        .filter(|f| f["protocol"] == 1)
        .filter_map(|f| f["packets"].as_i64())
        .collect();
    ensure!(
        icmp == [20, 20],
        "ICMP flows with {icmp:?} packets, expected 20 each way"
    );
    s.dataplane = true;
    let e = expect(&run.name);
    if let Some(tcx) = e.tcx {
        let want = if tcx { "link" } else { "netlink" };
        ensure!(s.tc == want, "tc attached by {}, expected {want}", s.tc);
    }
    Ok(())
}

/// Generic XDP counts exactly the 20 echo replies (and at most a neighbour-layer frame).
fn xdp(run: &Run, s: &mut Signals) -> Check {
    let v = output(run, "xdp")?;
    ensure!(
        v["hooks"]["ingress"] == "xdp-generic",
        "ingress hook {}",
        v["hooks"]
    );
    let non_ip = v["counters"]["ingress"]["non_ip"].as_i64().unwrap_or(-1);
    ensure!(
        counters(&v, "ingress") - non_ip == 20,
        "XDP counted {} packets in ({non_ip} not IP), 20 replies sent",
        counters(&v, "ingress")
    );
    s.xdp = true;
    Ok(())
}

fn sockets_of(v: &Value) -> &[Value] {
    v["sockets"].as_array().map_or(&[], Vec::as_slice)
}

/// A cubic connection over 5 % loss: its congestion control and retransmissions.
fn sockets(run: &Run, s: &mut Signals) -> Check {
    let v = output(run, "sockets")?;
    ensure!(
        v["socket_signals"]["snapshots"] == true && v["socket_signals"]["retransmits"] == true,
        "socket signals {}",
        v["socket_signals"]
    );
    let cubic = sockets_of(&v)
        .iter()
        .find(|r| r["cc"] == "cubic" && r["data_segs_sent"].as_i64() > Some(0))
        .context("no cubic connection sending data")?;
    ensure!(
        cubic["retransmits"].as_i64() > Some(0),
        "no retransmissions over 5 % loss: {cubic}"
    );
    s.sockets = true;
    Ok(())
}

/// A short reno connection that opened and closed inside the window.
fn close_events(run: &Run, s: &mut Signals) -> Check {
    let v = output(run, "close")?;
    ensure!(
        v["socket_signals"]["lifecycle"] == true,
        "socket signals {}",
        v["socket_signals"]
    );
    ensure!(
        sockets_of(&v)
            .iter()
            .any(|r| r["cc"] == "reno" && r["closed"] == true),
        "the short reno connection was not caught at close"
    );
    s.close_events = true;
    Ok(())
}

/// Forwarding off: drops with IP_INADDRERRORS, or counted without a reason where the kernel
/// has none (and said so).
fn drops(run: &Run, s: &mut Signals) -> Check {
    let v = output(run, "drops")?;
    let reasons = v["reasons"]
        .as_bool()
        .context("no `reasons` in the report")?;
    if let Some(want) = expect(&run.name).drop_reasons {
        ensure!(
            reasons == want,
            "drop reasons reported: {reasons}, expected {want}"
        );
    }
    let want = if reasons {
        "IP_INADDRERRORS"
    } else {
        "UNKNOWN"
    };
    let dropped: i64 = v["drops"]
        .as_array()
        .map_or(&[][..], Vec::as_slice)
        .iter()
        .filter(|d| {
            d["reason"] == want
                && d["interface"]
                    .as_str()
                    .is_some_and(|i| i.starts_with("ndvb"))
        })
        .filter_map(|d| d["packets"].as_i64())
        .sum();
    ensure!(
        dropped >= 20,
        "{dropped} drops with reason {want} on the gateway, 20 sent"
    );
    if !reasons {
        ensure!(
            run.text("drops.err").contains("reports no drop reason"),
            "the missing reasons are not named on stderr"
        );
    }
    s.drop_reasons = Some(reasons);
    Ok(())
}

/// The agent starts, attaches and serves /metrics and /api/v1/interfaces.
fn agent(run: &Run, _: &mut Signals) -> Check {
    ensure!(
        run.text("agent.readyz").contains("\"ready\""),
        "/readyz: {}",
        run.text("agent.readyz")
    );
    let metrics = run.text("agent.metrics");
    for line in [
        "netdoctor_bpf_programs_attached 2",
        "netdoctor_bpf_program_loaded{program=\"nd_tc_ingress\"} 1",
        "netdoctor_bpf_program_loaded{program=\"nd_tc_egress\"} 1",
    ] {
        ensure!(
            metrics.lines().any(|l| l == line),
            "/metrics lacks `{line}`"
        );
    }
    let v = run.json("agent.interfaces")?;
    let va = v["interfaces"]
        .as_array()
        .and_then(|a| {
            a.iter()
                .find(|i| i["name"].as_str().is_some_and(|n| n.starts_with("ndva")))
        })
        .context("/api/v1/interfaces lacks the veth")?;
    ensure!(
        va["hooks"]["egress"] == "tc",
        "the veth's hooks: {}",
        va["hooks"]
    );
    ensure!(
        va["counters"]["egress"]["packets"].as_i64() >= Some(5),
        "the veth's counters: {}",
        va["counters"]
    );
    ensure!(run.rc("agent") == 0, "the agent did not exit 0 on SIGTERM");
    Ok(())
}

/// The agent with BPF refused serves what it has: ready, the veth listed, /metrics saying
/// the packet programs did not load, /readyz naming the missing signal.
fn agent_degraded(run: &Run, _: &mut Signals) -> Check {
    let readyz = run.text("agent_degraded.readyz");
    ensure!(readyz.contains("\"ready\""), "/readyz: {readyz}");
    ensure!(
        readyz.contains("packet data plane unavailable"),
        "/readyz does not name the missing data plane: {readyz}"
    );
    let metrics = run.text("agent_degraded.metrics");
    let line = "netdoctor_bpf_program_loaded{program=\"nd_tc_ingress\"} 0";
    ensure!(
        metrics.lines().any(|l| l == line),
        "/metrics lacks `{line}`"
    );
    let v = run.json("agent_degraded.interfaces")?;
    ensure!(
        v["interfaces"].as_array().is_some_and(|a| a
            .iter()
            .any(|i| i["name"].as_str().is_some_and(|n| n.starts_with("ndva")))),
        "/api/v1/interfaces lacks the veth"
    );
    ensure!(
        run.rc("agent_degraded") == 0,
        "the agent did not exit 0 on SIGTERM"
    );
    Ok(())
}

/// Kernel WireGuard, MTU 1500 over a 1500 underlay: the critical finding, exit 2; the
/// healthy twin at 1420: nothing; with BPF refused: the same finding from configuration,
/// the missing signal named and the rules it costs listed as not evaluated.
fn wireguard(run: &Run, s: &mut Signals) -> Check {
    let supported = !run.dir.join("wireguard.unsupported").exists();
    if let Some(want) = expect(&run.name).wireguard {
        ensure!(
            supported == want,
            "kernel WireGuard available: {supported}, expected {want}: {}",
            run.text("wireguard.unsupported")
        );
    }
    if !supported {
        return Ok(());
    }
    let bad = diagnosis(run, "wg1500")?;
    bad.expect_finding("mtu.tunnel_exceeds_underlay", "critical")?;
    bad.check_exit_code()?; // 2: a critical finding
    ensure!(
        !bad.json["notes"]
            .to_string()
            .contains("packet data plane unavailable"),
        "{}",
        bad.describe()
    );
    if expect(&run.name).drop_reasons == Some(false) {
        // The gateway rules need drop reasons this kernel does not report (forwarding is
        // off in the namespace): not evaluated, named; never passed.
        let listed = bad.json["not_evaluated"].as_array().is_some_and(|a| {
            a.iter().any(|n| {
                n["rule"] == "forwarding.disabled"
                    && n["missing"].to_string().contains("drops.forwarding")
            })
        });
        ensure!(
            listed,
            "forwarding.disabled not listed as not evaluated:\n{}",
            bad.describe()
        );
        ensure!(
            bad.json["notes"]
                .to_string()
                .contains("drop reasons unavailable"),
            "the missing drop reasons are not named:\n{}",
            bad.describe()
        );
    }
    diagnosis(run, "wg1420")?.expect_healthy()?;
    let degraded = diagnosis(run, "degraded")?;
    degraded.expect_finding("mtu.tunnel_exceeds_underlay", "critical")?;
    degraded.check_exit_code()?;
    let notes = degraded.json["notes"].to_string();
    ensure!(
        notes.contains("packet data plane unavailable"),
        "the missing data plane is not named: {notes}"
    );
    let not_evaluated = degraded.json["not_evaluated"]
        .as_array()
        .map_or(0, Vec::len);
    ensure!(
        not_evaluated > 0,
        "no rule listed as not evaluated without the data plane:\n{}",
        degraded.describe()
    );
    s.wireguard_mtu = Some(true);
    Ok(())
}

pub const CASES: [(&str, CaseCheck); 10] = [
    ("dataplane", dataplane),
    ("xdp", xdp),
    ("sockets", sockets),
    ("close", close_events),
    ("drops", drops),
    ("sigint", super::signals::check),
    ("two_netlink", super::signals::two_data_planes),
    ("agent", agent),
    ("agent_degraded", agent_degraded),
    ("wg1500", wireguard),
];

//! End-to-end tests of `netdoctor agent`'s HTTP API (docs/api.md): the real binary in a
//! lab namespace, a wireguard-go tunnel over a veth underlay with ping and iperf3 traffic,
//! and every answer checked over real HTTP against what the lab set up (MTUs, addresses,
//! ports, congestion control). Also the security contract: no public address without a
//! token, bearer tokens, and 400s naming the bad parameter, never a 5xx.
//!
//! Needs root, BPF and the lab tools; skips elsewhere, fails under CI=true.
//! Build the binary first: `cargo build -p netdoctor`.

use std::sync::Barrier;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use netdoctor_lab::agent::{self, Agent, Auth, Reply};
use netdoctor_lab::attached;
use netdoctor_lab::netdoctor;
use netdoctor_lab::{ci, traffic, wg_over_pair, Iperf3Opts, Iperf3Server, Netns, PairTopology};
use serde_json::Value;

/// Underlay (veth) MTU of the API lab: not a default, so a right answer is no accident.
const UNDERLAY_MTU: u32 = 1480;
/// WireGuard MTU of the API lab: fits the underlay (1416 + 60 <= 1480) and is within 32
/// bytes of the largest that fits (1420), so the lab is healthy.
const WG_MTU: u32 = 1416;
/// Congestion control the iperf3 client asks for.
const CC: &str = "cubic";
/// How long signals of running traffic may take to show (1 s windows, busy CPUs).
const SEEN: Duration = Duration::from_secs(20);

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// The entry of `list` whose `key` equals `value`.
fn find<'a>(list: &'a [Value], key: &str, value: &str) -> Option<&'a Value> {
    list.iter().find(|v| v[key] == value)
}

fn interfaces(r: &Reply) -> &[Value] {
    r.json["interfaces"]
        .as_array()
        .map_or(&[][..], Vec::as_slice)
}

/// Requires a 4xx JSON error with `code` (and `parameter`, when given).
fn expect_error(r: &Reply, status: u16, code: &str, parameter: Option<&str>) -> Result<()> {
    ensure!(
        r.status == status
            && r.error_code() == Some(code)
            && r.json
                .pointer("/error/message")
                .and_then(Value::as_str)
                .is_some_and(|m| !m.is_empty())
            && parameter.is_none_or(|p| r.error_parameter() == Some(p)),
        "expected HTTP {status} with error.code {code:?}{}: {}",
        parameter
            .map(|p| format!(" and error.parameter {p:?}"))
            .unwrap_or_default(),
        r.describe()
    );
    ensure!(
        r.content_type.starts_with("application/json"),
        "error without a JSON content type ({:?}): {}",
        r.content_type,
        r.describe()
    );
    Ok(())
}

// ---------------------------------------------------------------------------
// 1. The API against a WireGuard lab with traffic.
// ---------------------------------------------------------------------------

#[test]
fn agent_api_reports_a_wireguard_lab_with_traffic() -> Result<()> {
    if !ci::lab_ready(&["ping", "iperf3", "wireguard-go", "wg"]) {
        return Ok(());
    }
    let (pair, wg) = wg_over_pair(UNDERLAY_MTU, WG_MTU)?;
    let _server = Iperf3Server::start(&pair.b, 5201)?;
    let agent = Agent::start(&pair.a, &["--no-probe"])?;
    let wg_name = wg.a.ifname();
    let eth0 = PairTopology::IFNAME;

    // Health.
    let r = agent.request("GET", "/healthz", Auth::Missing)?;
    ensure!(
        r.status == 200 && r.json["status"] == "ok",
        "{}",
        r.describe()
    );
    let r = agent.get("/readyz")?;
    ensure!(
        r.status == 200
            && r.json["status"] == "ready"
            && r.json["interval_s"].as_f64() == Some(1.0)
            && r.json["now_ms"]
                .as_i64()
                .is_some_and(|t| t.abs_diff(now_ms()) < 10_000)
            && r.json["notes"].is_array(),
        "{}",
        r.describe()
    );

    // Interfaces: both, with their real MTUs, kinds and indexes, watched, hooks attached.
    let wg_index = attached::ifindex(&pair.a, wg_name)?;
    let eth0_index = attached::ifindex(&pair.a, eth0)?;
    agent.poll(
        "/api/v1/interfaces",
        Duration::from_secs(5),
        "wg and veth watched",
        |r| {
            let list = interfaces(r);
            let ok = |name: &str, kind: &str, mtu: u32, index: u32| {
                find(list, "name", name).is_some_and(|i| {
                    i["kind"] == kind
                        && i["mtu"] == mtu
                        && i["index"] == index
                        && i["up"] == true
                        && i["watched"] == true
                        && i["hooks"]["ingress"].is_string()
                        && i["hooks"]["egress"].is_string()
                        && i["hooks"]["method"].is_string()
                })
            };
            (r.status == 200
                && ok(wg_name, "wireguard", WG_MTU, wg_index)
                && ok(eth0, "veth", UNDERLAY_MTU, eth0_index)
                && find(list, "name", "lo").is_some_and(|lo| {
                    lo["watched"] == false && lo["hooks"].is_null() && lo["facts"].is_null()
                }))
            .then_some(())
        },
    )?;

    // One interface, with the facts of the last window.
    let one = agent.poll(
        &format!("/api/v1/interfaces/{wg_name}"),
        Duration::from_secs(10),
        "wg interface with facts",
        |r| (r.status == 200 && r.json["facts"].is_object()).then(|| r.json.clone()),
    )?;
    let facts = &one["facts"];
    ensure!(
        one["name"] == wg_name
            && one["mtu"] == WG_MTU
            && facts["iface"]["name"] == wg_name
            && facts["iface"]["mtu"] == WG_MTU
            && facts["tunnel"]["kind"] == "wireguard"
            && facts["tunnel"]["overhead_expected"] == 60
            && facts["tunnel"]["underlay_iface"] == eth0
            && facts["tunnel"]["underlay_mtu"] == UNDERLAY_MTU
            && facts["tunnel"]["max_mtu"] == UNDERLAY_MTU - 60
            && one["counters"]["ingress"]["packets"].is_u64()
            && one["rates"]["rx_bps"].is_number()
            && one["updated_ms"].is_i64(),
        "GET /api/v1/interfaces/{wg_name}: {one}"
    );
    expect_error(
        &agent.get("/api/v1/interfaces/ndnosuch0")?,
        404,
        "unknown_interface",
        None,
    )?;

    // Traffic: iperf3 with cubic through the tunnel, checked while it runs.
    let mut opts = Iperf3Opts::new(wg.b.ip());
    opts.duration_secs = 10;
    opts.congestion = Some(CC.to_owned());
    // Userspace WireGuard on two busy cores: a moderate rate keeps it loss-free.
    opts.bitrate = Some("20M".to_owned());
    let (iperf, seen) = std::thread::scope(|s| {
        let client = s.spawn(|| traffic::iperf3_client(&pair.a, &opts));
        let seen = check_while_traffic_runs(&agent, wg_name, wg.b.ip());
        let iperf = match client.join() {
            Ok(r) => r,
            Err(_) => Err(anyhow::anyhow!("iperf3 thread panicked")),
        };
        (iperf, seen)
    });
    let iperf = iperf?;
    seen?;
    ensure!(
        iperf.sender_congestion.as_deref() == Some(CC),
        "iperf3 did not use {CC}: {:?}",
        iperf.sender_congestion
    );

    // The WireGuard underlay flow on the veth, recognised by its message shape.
    let port = u64::from(wg.a.listen_port());
    let flows = agent.poll(
        &format!("/api/v1/flows?interface={eth0}&limit=1000"),
        SEEN,
        "WireGuard flows on the underlay",
        |r| {
            let out = r.items().iter().find(|f| {
                f["direction"] == "egress"
                    && f["src"] == PairTopology::A_IP
                    && f["dst"] == PairTopology::B_IP
            })?;
            let back = r.items().iter().find(|f| {
                f["direction"] == "ingress"
                    && f["src"] == PairTopology::B_IP
                    && f["dst"] == PairTopology::A_IP
            })?;
            (r.status == 200 && out["wireguard"]["data"].as_u64() > Some(0))
                .then(|| (r.clone(), out.clone(), back.clone()))
        },
    )?;
    let (page, out, back) = flows;
    for f in [&out, &back] {
        ensure!(
            f["interface"] == eth0
                && f["encap"] == "wireguard"
                && f["protocol"] == 17
                && f["src_port"] == port
                && f["dst_port"] == port
                && f["bytes"].as_u64() > Some(0),
            "underlay flow: {f}"
        );
    }
    ensure!(
        page.json["total"].as_u64() >= Some(2)
            && page.json["limit"] == 1000
            && page.json["offset"] == 0
            && page.items().iter().all(|f| f["interface"] == eth0),
        "flows page filtered on {eth0}: {}",
        page.describe()
    );

    // Drops answer (nothing is dropped on purpose here: the shape is what counts).
    let drops = agent.get_json("/api/v1/drops")?;
    ensure!(drops["drops"].is_array(), "GET /api/v1/drops: {drops}");
    for d in drops["drops"].as_array().into_iter().flatten() {
        ensure!(
            d["interface"].is_string()
                && d["reason"].is_string()
                && d["packets_total"].is_u64()
                && d["packets_last_window"].is_u64(),
            "drop entry: {d}"
        );
    }

    // Metrics with the lab's figures.
    let metrics = agent::parse_metrics(&agent.metrics()?)?;
    let one_metric = |name: &str, labels: &[(&str, &str)]| -> Result<f64> {
        match agent::find_metric(&metrics, name, labels).as_slice() {
            [m] => Ok(m.value),
            other => bail!("{name}{labels:?}: expected one sample, got {other:?}"),
        }
    };
    ensure!(
        one_metric("netdoctor_interface_mtu_bytes", &[("interface", wg_name)])?
            == f64::from(WG_MTU)
    );
    ensure!(
        one_metric(
            "netdoctor_interface_info",
            &[("interface", wg_name), ("kind", "wireguard")]
        )? == 1.0
    );
    ensure!(
        one_metric(
            "netdoctor_tunnel_overhead_bytes",
            &[("interface", wg_name), ("source", "expected")]
        )? == 60.0
    );
    // Bytes sent through the tunnel: at least iperf3's payload (the last window may lag).
    agent.poll(
        "/metrics",
        SEEN,
        "tx bytes on the wg interface >= iperf3's",
        |r| {
            let samples = agent::parse_metrics(&r.text).ok()?;
            let tx = agent::find_metric(
                &samples,
                "netdoctor_interface_bytes_total",
                &[("interface", wg_name), ("direction", "tx")],
            );
            (tx.len() == 1 && tx[0].value >= iperf.sent_bytes as f64).then_some(())
        },
    )?;

    diagnose_once_at_a_time(&agent, wg_name)?;
    ensure!(
        agent.get("/healthz")?.status == 200,
        "agent stopped serving; stderr: {}",
        agent.stderr()
    );
    Ok(())
}

/// While iperf3 runs: its connection in `/api/v1/sockets` with the congestion control
/// asked for, and samples of the wg interface with traffic both ways.
fn check_while_traffic_runs(agent: &Agent, wg_name: &str, server_ip: &str) -> Result<()> {
    let remote = format!("{server_ip}:5201");
    let socket = agent.poll(
        &format!("/api/v1/sockets?interface={wg_name}&limit=1000"),
        SEEN,
        "iperf3 connection in /api/v1/sockets",
        |r| {
            r.items()
                .iter()
                .find(|s| s["remote"] == remote.as_str() && s["cc"] == CC)
                .cloned()
        },
    )?;
    ensure!(
        socket["interface"] == wg_name
            && socket["local"]
                .as_str()
                .is_some_and(|l| l.starts_with("10.250.0.1:"))
            && socket["state"].is_string()
            && socket["srtt_us"].is_u64()
            && socket["mss"]
                .as_u64()
                .is_some_and(|m| m > 0 && m <= u64::from(WG_MTU) - 40),
        "iperf3 socket: {socket}"
    );
    let sample = agent.poll(
        &format!("/api/v1/samples?interface={wg_name}&limit=1000"),
        SEEN,
        "a sample of the wg interface with rx and tx traffic",
        |r| {
            r.items()
                .iter()
                .find(|s| s["rx_bps"].as_f64() > Some(0.0) && s["tx_bps"].as_f64() > Some(0.0))
                .cloned()
        },
    )?;
    ensure!(
        sample["interface"] == wg_name
            && sample["mtu"] == WG_MTU
            && sample["window_s"]
                .as_f64()
                .is_some_and(|w| (0.5..5.0).contains(&w))
            && sample["rx_pps"].as_f64() > Some(0.0)
            && sample["tx_pps"].as_f64() > Some(0.0)
            && sample["overhead_expected"] == 60
            && sample["ts_ms"].is_i64()
            && sample["size_buckets"].is_object(),
        "sample: {sample}"
    );
    Ok(())
}

/// Two diagnoses started at once: one report, one 429 `busy`; then, the first one done,
/// another runs (the slot is released), and an unknown interface is a 404.
fn diagnose_once_at_a_time(agent: &Agent, wg_name: &str) -> Result<()> {
    let path = format!("/api/v1/diagnose/{wg_name}?duration=2s&probe=false");
    let barrier = Barrier::new(2);
    let replies: Vec<Result<Reply>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..2)
            .map(|_| {
                s.spawn(|| {
                    barrier.wait();
                    agent.post(&path)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("POST thread panicked")))
            })
            .collect()
    });
    let replies = replies.into_iter().collect::<Result<Vec<_>>>()?;
    let (ok, busy): (Vec<&Reply>, Vec<&Reply>) = replies.iter().partition(|r| r.status == 200);
    let ([report], [busy]) = (ok.as_slice(), busy.as_slice()) else {
        bail!(
            "two concurrent diagnoses: expected one 200 and one 429, got:\n{}",
            replies
                .iter()
                .map(Reply::describe)
                .collect::<Vec<_>>()
                .join("\n")
        );
    };
    expect_error(busy, 429, "busy", None)?;
    ensure!(
        busy.retry_after.parse::<u64>().is_ok_and(|s| s > 0),
        "429 without a Retry-After in seconds: {:?}",
        busy.retry_after
    );
    check_report(report, wg_name)?;

    // The slot is free again.
    let again = agent.post(&format!(
        "/api/v1/diagnose/{wg_name}?duration=1s&probe=false"
    ))?;
    check_report(&again, wg_name)?;
    expect_error(
        &agent.post("/api/v1/diagnose/ndnosuch0?duration=1s&probe=false")?,
        404,
        "unknown_interface",
        None,
    )?;
    Ok(())
}

fn check_report(r: &Reply, wg_name: &str) -> Result<()> {
    let j = &r.json;
    ensure!(
        r.status == 200
            && j["interface"] == wg_name
            && j["kind"] == "wireguard"
            && j["facts"]["iface"]["mtu"] == WG_MTU
            && j["facts"]["tunnel"]["underlay_mtu"] == UNDERLAY_MTU
            && j["findings"].is_array()
            && j["notes"].is_array()
            && j["duration_s"].as_f64().is_some_and(|d| d >= 0.9),
        "diagnosis report: {}",
        r.describe()
    );
    ensure!(
        j["facts"]["probe"]["ran"] != true,
        "probe=false, but the report says the probe ran: {}",
        j["facts"]["probe"]
    );
    Ok(())
}

// ---------------------------------------------------------------------------
// 6. Security: public addresses need a token; tokens; bad parameters.
// ---------------------------------------------------------------------------

#[test]
fn agent_refuses_a_public_address_without_a_token() -> Result<()> {
    if !ci::lab_ready(&["ss"]) {
        return Ok(());
    }
    let ns = Netns::new()?;
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("netdoctor.db");
    let started = Instant::now();
    let out = netdoctor::run(
        Some(&ns),
        &[
            "agent",
            "--listen",
            "0.0.0.0:9470",
            "--database",
            &db.to_string_lossy(),
            "--interval",
            "1s",
        ],
        Duration::from_secs(30),
    )?;
    let took = started.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    ensure!(
        out.status.code().is_some_and(|c| c != 0),
        "agent on 0.0.0.0 without a token: expected a non-zero exit, got {}; stderr: {stderr}",
        out.status
    );
    ensure!(
        stderr.contains("--token-file"),
        "the refusal does not mention --token-file: {stderr}"
    );
    ensure!(
        took < Duration::from_secs(5),
        "refusing took {took:?} (expected before anything is loaded)"
    );
    // Nothing listens, nothing was attached.
    let listening = ns.run(&["ss", "-Htln"])?;
    ensure!(
        listening.trim().is_empty(),
        "something listens: {listening}"
    );
    Ok(())
}

#[test]
fn agent_checks_tokens_and_rejects_bad_parameters() -> Result<()> {
    if !ci::lab_ready(&[]) {
        return Ok(());
    }
    let ns = Netns::new()?;
    let dir = tempfile::tempdir()?;
    let token = format!(
        "{:032x}",
        (u128::from(std::process::id()) << 64) | 0x5eed_cafe_f00d
    );
    ensure!(token.len() == 32);
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, format!("{token}\n"))?;
    let token_path = token_file.to_string_lossy().into_owned();
    let agent = Agent::start_with_token(
        &ns,
        &["--no-probe", "--token-file", &token_path],
        Some(&token),
    )?;

    // /healthz needs no token.
    let r = agent.request("GET", "/healthz", Auth::Missing)?;
    ensure!(
        r.status == 200 && r.json["status"] == "ok",
        "{}",
        r.describe()
    );

    // Neither do the dashboard's static files (they hold no data).
    let r = agent.request("GET", "/", Auth::Missing)?;
    ensure!(
        r.status == 200 && r.content_type.starts_with("text/html"),
        "dashboard page without a token: {}",
        r.describe()
    );

    // Everything else does: missing, wrong, truncated, or another scheme gives 401.
    let wrong = format!("Bearer {}", "0".repeat(32));
    let short = format!("Bearer {}", &token[..31]);
    let longer = format!("Bearer {token}x");
    let basic = format!("Basic {token}");
    let paths = [
        ("GET", "/readyz"),
        ("GET", "/metrics"),
        ("GET", "/api/v1/interfaces"),
        ("GET", "/api/v1/findings?state=all"),
        ("GET", "/api/v1/samples"),
        ("POST", "/api/v1/diagnose/lo?duration=1s&probe=false"),
    ];
    for (method, path) in paths {
        for auth in [
            Auth::Missing,
            Auth::Header(&wrong),
            Auth::Header(&short),
            Auth::Header(&longer),
            Auth::Header(&basic),
            Auth::Header("Bearer "),
        ] {
            let r = agent.request(method, path, auth)?;
            expect_error(&r, 401, "unauthorized", None)
                .with_context(|| format!("{method} {path} with {auth:?}"))?;
            ensure!(
                r.www_authenticate.starts_with("Bearer"),
                "401 without WWW-Authenticate: Bearer: {:?}",
                r.www_authenticate
            );
        }
    }
    // The right token opens every read endpoint.
    for path in [
        "/readyz",
        "/api/v1/interfaces",
        "/api/v1/flows",
        "/api/v1/sockets",
        "/api/v1/findings?state=all",
        "/api/v1/drops",
        "/api/v1/samples",
    ] {
        let r = agent.get(path)?;
        ensure!(r.status == 200 && r.json.is_object(), "{}", r.describe());
    }
    ensure!(agent.metrics()?.contains("netdoctor_build_info"));

    // Bad parameters: 400 naming the parameter, never a 5xx.
    let long_value = "a".repeat(300);
    let huge_query = format!("interface={}", "a".repeat(5000));
    let bad: Vec<(&str, String, &str)> = vec![
        ("GET", "/api/v1/flows?limit=abc".into(), "limit"),
        ("GET", "/api/v1/flows?limit=0".into(), "limit"),
        ("GET", "/api/v1/sockets?limit=100000".into(), "limit"),
        ("GET", "/api/v1/findings?limit=-1".into(), "limit"),
        ("GET", "/api/v1/samples?limit=1.5".into(), "limit"),
        ("GET", "/api/v1/findings?offset=-1".into(), "offset"),
        ("GET", "/api/v1/samples?offset=1000001".into(), "offset"),
        (
            "GET",
            "/api/v1/flows?offset=99999999999999999999".into(),
            "offset",
        ),
        ("GET", "/api/v1/findings?since=abc".into(), "since"),
        ("GET", "/api/v1/samples?since=abc".into(), "since"),
        ("GET", "/api/v1/samples?until=-5".into(), "until"),
        (
            "GET",
            "/api/v1/samples?since=2000&until=1000".into(),
            "since",
        ),
        ("GET", "/api/v1/findings?state=bogus".into(), "state"),
        ("GET", "/api/v1/findings?state=".into(), "state"),
        ("GET", "/api/v1/flows?bogus=1".into(), "bogus"),
        ("GET", "/api/v1/interfaces?verbose=1".into(), "verbose"),
        ("GET", "/api/v1/drops?limit=10".into(), "limit"),
        (
            "GET",
            format!("/api/v1/findings?interface={long_value}"),
            "interface",
        ),
        ("GET", format!("/api/v1/findings?{huge_query}"), "query"),
        ("GET", format!("/api/v1/interfaces?{huge_query}"), "query"),
        (
            "POST",
            "/api/v1/diagnose/lo?duration=100s".into(),
            "duration",
        ),
        (
            "POST",
            "/api/v1/diagnose/lo?duration=abc".into(),
            "duration",
        ),
        ("POST", "/api/v1/diagnose/lo?duration=0s".into(), "duration"),
        ("POST", "/api/v1/diagnose/lo?duration=0".into(), "duration"),
        ("POST", "/api/v1/diagnose/lo?duration=-5".into(), "duration"),
        ("POST", "/api/v1/diagnose/lo?duration=61".into(), "duration"),
        (
            "POST",
            "/api/v1/diagnose/lo?duration=500ms".into(),
            "duration",
        ),
        (
            "POST",
            "/api/v1/diagnose/lo?duration=99999999999999999999".into(),
            "duration",
        ),
        ("POST", "/api/v1/diagnose/lo?probe=maybe".into(), "probe"),
        ("POST", "/api/v1/diagnose/lo?force=1".into(), "force"),
    ];
    let mut failures = Vec::new();
    for (method, path, parameter) in &bad {
        let r = agent.request(method, path, Auth::Agent)?;
        if let Err(e) = expect_error(&r, 400, "bad_parameter", Some(parameter)) {
            failures.push(format!("{e:#}"));
        }
    }
    ensure!(
        failures.is_empty(),
        "bad parameters not answered with 400 naming them:\n{}",
        failures.join("\n")
    );

    // Malformed query strings: a client error, never a server error.
    for path in [
        "/api/v1/findings?limit=%FF",
        "/api/v1/findings?limit=%zz",
        "/api/v1/findings?=&&==",
        "/api/v1/findings?limit=1&limit=2",
    ] {
        let r = agent.get(path)?;
        ensure!(
            r.status < 500,
            "malformed query answered with a server error: {}",
            r.describe()
        );
    }

    // A bare number is seconds, as on the command line.
    let r = agent.post("/api/v1/diagnose/lo?duration=1&probe=false")?;
    let took = r.json["duration_s"].as_f64().unwrap_or_default();
    ensure!(
        r.status == 200 && (1.0..2.5).contains(&took),
        "duration=1 observed {took} s: {}",
        r.describe()
    );

    // Still serving, and the process is alive.
    let r = agent.get("/api/v1/interfaces")?;
    ensure!(
        r.status == 200 && interfaces(&r).iter().any(|i| i["name"] == "lo"),
        "{}",
        r.describe()
    );
    ensure!(agent.get("/healthz")?.status == 200);
    Ok(())
}

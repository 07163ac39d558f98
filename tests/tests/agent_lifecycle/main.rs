//! End-to-end tests of `netdoctor agent` over time, on real namespaces, veths and
//! wireguard-go tunnels: a finding's lifecycle (opened once, refreshed, resolved when the
//! MTU is fixed), interfaces that disappear and come back, `kill -9` (nothing stays
//! attached, the SQLite history survives intact and is served after a restart) and SIGTERM
//! (exit 0, nothing attached).
//!
//! Needs root, BPF and the lab tools; skips elsewhere, fails under CI=true.
//! Build the binary first: `cargo build -p netdoctor`.

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use ::netdoctor::daemon::store::{FindingQuery, SampleQuery, StateFilter, Store};
use anyhow::{bail, ensure, Context, Result};
use netdoctor_lab::agent::{self, Agent, Reply};
use netdoctor_lab::attached;
use netdoctor_lab::{
    ci, traffic, wg_over_pair, BgProcess, Netns, PairTopology, PingOpts, WgInterface, WgTunnel,
};
use serde_json::Value;

/// The finding these tests provoke.
const EXCEEDS: &str = "mtu.tunnel_exceeds_underlay";
/// Underlay MTU of the MTU labs.
const UNDERLAY_MTU: u32 = 1400;
/// WireGuard MTU that fits it exactly (1400 - 60).
const FITTING_MTU: u32 = 1340;
/// WireGuard MTU that does not (1420 + 60 > 1400).
const OVERSIZED_MTU: u32 = 1420;
/// How long a change may take to show with 1 s evaluations on busy CPUs.
const SETTLE: Duration = Duration::from_secs(15);
/// How fast the agent must follow interfaces appearing and disappearing.
const CHURN: Duration = Duration::from_secs(2);

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// The items of a findings page with id `id`.
fn with_id<'a>(r: &'a Reply, id: &str) -> Vec<&'a Value> {
    r.items().iter().filter(|f| f["id"] == id).collect()
}

/// The entry `name` of `/api/v1/interfaces`, if listed.
fn listed<'a>(r: &'a Reply, name: &str) -> Option<&'a Value> {
    r.json["interfaces"]
        .as_array()?
        .iter()
        .find(|i| i["name"] == name)
}

/// A pair joined by a veth of `UNDERLAY_MTU` and a wireguard-go tunnel of `wg_mtu`.
fn mtu_lab(wg_mtu: u32) -> Result<(PairTopology, WgTunnel)> {
    wg_over_pair(UNDERLAY_MTU, wg_mtu)
}

/// Value of `netdoctor_finding_active` for (`id`, `interface`), if exported.
fn finding_metric(agent: &Agent, id: &str, interface: &str) -> Result<Option<(f64, String)>> {
    let samples = agent::parse_metrics(&agent.metrics()?)?;
    let found = agent::find_metric(
        &samples,
        "netdoctor_finding_active",
        &[("id", id), ("interface", interface)],
    );
    Ok(match found.as_slice() {
        [] => None,
        [m] => Some((
            m.value,
            m.labels.get("severity").cloned().unwrap_or_default(),
        )),
        more => bail!("several netdoctor_finding_active samples for {id} on {interface}: {more:?}"),
    })
}

// ---------------------------------------------------------------------------
// 2. A finding opens once, is refreshed, and resolves when the MTU is fixed.
// ---------------------------------------------------------------------------

#[test]
fn agent_finding_opens_once_and_resolves_when_the_mtu_is_fixed() -> Result<()> {
    if !ci::lab_ready(&["ping", "wireguard-go", "wg"]) {
        return Ok(());
    }
    let (pair, wg) = mtu_lab(FITTING_MTU)?;
    let ns = &pair.a;
    let name = wg.a.ifname();
    let agent = Agent::start(ns, &["--no-probe"])?;
    let active = format!("/api/v1/findings?interface={name}");

    // Healthy first: the agent sees what fits, and nothing is wrong.
    agent.poll(
        &format!("/api/v1/interfaces/{name}"),
        SETTLE,
        "facts of the healthy tunnel",
        |r| {
            let t = &r.json["facts"]["tunnel"];
            (r.json["mtu"] == FITTING_MTU
                && t["underlay_mtu"] == UNDERLAY_MTU
                && t["overhead_expected"] == 60
                && t["max_mtu"] == FITTING_MTU)
                .then_some(())
        },
    )?;
    let r = agent.get(&active)?;
    ensure!(
        r.status == 200 && with_id(&r, EXCEEDS).is_empty(),
        "healthy tunnel has {EXCEEDS}: {}",
        r.describe()
    );

    // Too big: the finding opens.
    let provoked = now_ms();
    ns.set_mtu(name, OVERSIZED_MTU)?;
    let opened = agent.poll(&active, SETTLE, "the finding, active", |r| {
        with_id(r, EXCEEDS).first().map(|f| (*f).clone())
    })?;
    ensure!(
        opened["interface"] == name
            && opened["state"] == "active"
            && opened["severity"] == "critical"
            && opened["resolved_ms"].is_null()
            && opened["opened_ms"]
                .as_i64()
                .is_some_and(|t| t >= provoked - 1000)
            && opened["last_seen_ms"].as_i64() >= opened["opened_ms"].as_i64()
            && opened["evidence"]["tunnel_mtu"] == OVERSIZED_MTU
            && opened["evidence"]["overhead_expected"] == 60
            && opened["evidence"]["underlay_route_mtu"] == UNDERLAY_MTU
            && opened["evidence"]["largest_fitting_mtu"] == FITTING_MTU
            && opened["fix"]
                .as_str()
                .is_some_and(|f| f.contains(&format!("ip link set dev {name} mtu {FITTING_MTU}"))),
        "opened finding: {opened}"
    );
    let opened_ms = opened["opened_ms"].as_i64().unwrap_or_default();

    // Exported as a metric, and as the interface's worst severity.
    let deadline = Instant::now() + SETTLE;
    loop {
        let m = finding_metric(&agent, EXCEEDS, name)?;
        if m == Some((1.0, "critical".to_owned())) {
            break;
        }
        ensure!(
            Instant::now() < deadline,
            "netdoctor_finding_active{{id=\"{EXCEEDS}\",interface=\"{name}\"}} is {m:?}, not 1 (critical)"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let iface = agent.get_json(&format!("/api/v1/interfaces/{name}"))?;
    ensure!(
        iface["worst_severity"] == "critical",
        "worst_severity: {}",
        iface["worst_severity"]
    );

    // Refreshed by later evaluations: one row, evaluations counting up.
    let refreshed = agent.poll(&active, SETTLE, "the finding, evaluated 3 times", |r| {
        with_id(r, EXCEEDS)
            .first()
            .filter(|f| f["evaluations"].as_u64() >= Some(3))
            .map(|f| (*f).clone())
    })?;
    ensure!(
        refreshed["opened_ms"] == opened_ms && refreshed["last_seen_ms"].as_i64() > Some(opened_ms),
        "refreshed finding: {refreshed}"
    );
    let all = agent.get(&format!("/api/v1/findings?state=all&interface={name}"))?;
    ensure!(
        with_id(&all, EXCEEDS).len() == 1,
        "one finding must be one row, not one per evaluation: {}",
        all.describe()
    );

    // Fixed: resolved, same row.
    let fixed = now_ms();
    ns.set_mtu(name, FITTING_MTU)?;
    let resolved = agent.poll(
        &format!("/api/v1/findings?state=resolved&interface={name}"),
        SETTLE,
        "the finding, resolved",
        |r| with_id(r, EXCEEDS).first().map(|f| (*f).clone()),
    )?;
    ensure!(
        resolved["state"] == "resolved"
            && resolved["opened_ms"] == opened_ms
            && resolved["resolved_ms"]
                .as_i64()
                .is_some_and(|t| t >= fixed - 1000)
            && resolved["resolved_ms"].as_i64() >= resolved["last_seen_ms"].as_i64()
            && resolved["evaluations"].as_u64() >= Some(3),
        "resolved finding: {resolved}"
    );
    let r = agent.get(&active)?;
    ensure!(
        r.status == 200 && with_id(&r, EXCEEDS).is_empty(),
        "still active after the fix: {}",
        r.describe()
    );
    let r = agent.get("/api/v1/findings?state=active")?;
    ensure!(
        r.status == 200 && with_id(&r, EXCEEDS).is_empty(),
        "still active after the fix: {}",
        r.describe()
    );
    let all = agent.get(&format!("/api/v1/findings?state=all&interface={name}"))?;
    ensure!(
        with_id(&all, EXCEEDS).len() == 1 && all.json["total"].as_u64() >= Some(1),
        "after resolution there must still be exactly one row: {}",
        all.describe()
    );
    agent.poll("/metrics", SETTLE, "netdoctor_finding_active gone", |r| {
        let samples = agent::parse_metrics(&r.text).ok()?;
        agent::find_metric(
            &samples,
            "netdoctor_finding_active",
            &[("id", EXCEEDS), ("interface", name)],
        )
        .is_empty()
        .then_some(())
    })?;
    Ok(())
}

// ---------------------------------------------------------------------------
// 3. Interface churn: a tunnel deleted and recreated under the same name.
// ---------------------------------------------------------------------------

/// Starts wireguard-go again for `old`'s interface name in `ns`, with `old`'s key, port
/// and address, peered with `peer` at `peer_underlay_ip`, MTU `mtu`, up. Returns once the
/// link is configured and up (not waiting for a handshake).
fn restart_wireguard(
    ns: &Netns,
    old: &WgInterface,
    peer: &WgInterface,
    peer_underlay_ip: &str,
    mtu: u32,
) -> Result<BgProcess> {
    let name = old.ifname();
    let mut command = ns.command("wireguard-go", [name]);
    command.env("WG_PROCESS_FOREGROUND", "1");
    let mut process = ns.spawn_command(&format!("wireguard-go {name} (again)"), command)?;
    let deadline = Instant::now() + Duration::from_secs(5);
    while !(old.socket_path().exists()
        && ns
            .output(&["ip", "link", "show", "dev", name])
            .is_ok_and(|o| o.status.success()))
    {
        if let Some(status) = process.try_status()? {
            bail!(
                "wireguard-go {name} exited ({status}): {}",
                process.stderr().unwrap_or_default()
            );
        }
        ensure!(
            Instant::now() < deadline,
            "wireguard-go {name} not ready after 5 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut key = tempfile::NamedTempFile::with_prefix("ndlab-wgkey-")?;
    writeln!(key, "{}", old.private_key())?;
    let port = old.listen_port().to_string();
    let endpoint = format!("{peer_underlay_ip}:{port}");
    let allowed = format!("{}/32", peer.ip());
    ns.run(&[
        "wg",
        "set",
        name,
        "listen-port",
        &port,
        "private-key",
        &key.path().to_string_lossy(),
        "peer",
        peer.public_key(),
        "endpoint",
        &endpoint,
        "allowed-ips",
        &allowed,
    ])
    .with_context(|| format!("configuring {name} again"))?;
    ns.add_addr(name, old.addr())?;
    ns.set_mtu(name, mtu)?;
    ns.set_up(name)?;
    Ok(process)
}

#[test]
fn agent_follows_a_tunnel_that_disappears_and_comes_back() -> Result<()> {
    if !ci::lab_ready(&["ping", "wireguard-go", "wg"]) {
        return Ok(());
    }
    let (pair, mut wg) = mtu_lab(FITTING_MTU)?;
    let ns = &pair.a;
    let name = wg.a.ifname().to_owned();
    let agent = Agent::start(ns, &["--no-probe"])?;
    let old_index = attached::ifindex(ns, &name)?;
    agent.poll("/api/v1/interfaces", SETTLE, "the tunnel, watched", |r| {
        listed(r, &name)
            .filter(|i| i["watched"] == true && i["index"] == old_index && i["hooks"].is_object())
            .map(drop)
    })?;

    // Gone: wireguard-go stops, its TUN device goes with it.
    wg.a.process_mut().stop()?;
    let gone_at = Instant::now();
    ensure!(
        !ns.output(&["ip", "link", "show", "dev", &name])?
            .status
            .success(),
        "{name} still exists after wireguard-go stopped"
    );
    agent.poll(
        "/api/v1/interfaces",
        CHURN,
        "the tunnel, no longer listed",
        |r| (r.status == 200 && listed(r, &name).is_none()).then_some(()),
    )?;
    println!(
        "{name} unlisted {:?} after it was deleted",
        gone_at.elapsed()
    );
    let r = agent.get(&format!("/api/v1/interfaces/{name}"))?;
    ensure!(
        r.status == 404 && r.error_code() == Some("unknown_interface"),
        "{}",
        r.describe()
    );
    // Nothing of the deleted interface lingers: no series with its name (labels must stay
    // bounded under churn), no flows left without an interface.
    let label = format!("interface=\"{name}\"");
    let started = Instant::now();
    loop {
        let metrics = agent.metrics()?;
        let flows = agent.get_json("/api/v1/flows?limit=1000")?;
        let orphans = flows["items"].as_array().map_or(0, |a| {
            a.iter()
                .filter(|f| f["interface"] == "" || f["interface"] == name.as_str())
                .count()
        });
        let lingering: Vec<&str> = metrics.lines().filter(|l| l.contains(&label)).collect();
        if lingering.is_empty() && orphans == 0 {
            break;
        }
        ensure!(
            started.elapsed() < CHURN + Duration::from_secs(3),
            "{name} deleted, yet {orphans} flows without an interface and series:\n{}",
            lingering.join("\n")
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    ensure!(
        agent.get("/healthz")?.status == 200,
        "agent stopped serving"
    );

    // Back under the same name: a new device, watched again. (A socket left behind would
    // make the readiness check below pass too early.)
    let _ = std::fs::remove_file(wg.a.socket_path());
    let _again = restart_wireguard(ns, &wg.a, &wg.b, PairTopology::B_IP, FITTING_MTU)?;
    let back_at = Instant::now();
    let new_index = attached::ifindex(ns, &name)?;
    ensure!(
        new_index != old_index,
        "the new device reused index {old_index}"
    );
    let entry = agent.poll(
        "/api/v1/interfaces",
        CHURN,
        "the new tunnel, watched",
        |r| {
            listed(r, &name)
                .filter(|i| {
                    i["watched"] == true
                        && i["index"] == new_index
                        && i["hooks"]["ingress"].is_string()
                        && i["kind"] == "wireguard"
                        && i["mtu"] == FITTING_MTU
                        && i["up"] == true
                })
                .cloned()
        },
    )?;
    println!(
        "{name} watched again {:?} after it came back",
        back_at.elapsed()
    );
    ensure!(entry["name"] == name.as_str(), "new tunnel entry: {entry}");

    // The agent still serves, and counts traffic through the new tunnel.
    traffic::wait_for_ping(ns, wg.b.ip(), Duration::from_secs(10))?;
    let path = format!("/api/v1/interfaces/{name}");
    let before = agent.poll(&path, SETTLE, "counters of the new tunnel", |r| {
        (r.status == 200 && r.json["index"] == new_index && r.json["facts"].is_object())
            .then(|| r.json["counters"].clone())
    })?;
    let count = |c: &Value, dir: &str| c[dir]["packets"].as_u64().unwrap_or(0);
    let opts = PingOpts {
        count: 20,
        interval_secs: 0.05,
        ..PingOpts::default()
    };
    let ping = traffic::ping(ns, wg.b.ip(), &opts)?;
    ensure!(
        ping.received > 0,
        "no ping through the new tunnel: {}",
        ping.output
    );
    agent.poll(&path, SETTLE, "ping counted on the new tunnel", |r| {
        let c = &r.json["counters"];
        (count(c, "egress") >= count(&before, "egress") + u64::from(ping.transmitted)
            && count(c, "ingress") >= count(&before, "ingress") + u64::from(ping.received))
        .then_some(())
    })?;
    let samples = agent.get_json(&format!("/api/v1/samples?interface={name}&limit=1000"))?;
    ensure!(
        samples["items"].as_array().is_some_and(|s| s
            .iter()
            .any(|s| s["ts_ms"].as_i64() > Some(now_ms() - 5000))),
        "no recent sample of the new tunnel: {samples}"
    );
    ensure!(
        agent.get("/healthz")?.status == 200,
        "agent stopped serving"
    );
    Ok(())
}

// ---------------------------------------------------------------------------
// 4. kill -9: nothing attached, the history intact, served after a restart.
// ---------------------------------------------------------------------------

fn open_store(path: &Path) -> Result<Store> {
    Store::open(path, ::netdoctor::daemon::store::Retention::default())
        .with_context(|| format!("opening {} after the agent died", path.display()))
}

#[test]
fn agent_killed_with_sigkill_leaves_nothing_attached_and_its_history_intact() -> Result<()> {
    if !ci::lab_ready(&["ping", "wireguard-go", "wg", "tc"]) {
        return Ok(());
    }
    let (pair, wg) = mtu_lab(OVERSIZED_MTU)?;
    let ns = &pair.a;
    let name = wg.a.ifname();
    let eth0 = PairTopology::IFNAME;
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("history").join("netdoctor.db");
    let db_arg = db.to_string_lossy().into_owned();
    let args = ["--no-probe", "--interval", "1s", "--database", &db_arg];
    let mut agent = Agent::start(ns, &args)?;

    // Traffic while it writes a sample per second and refreshes the finding.
    let (finding, samples) = std::thread::scope(|s| -> Result<(Value, Vec<i64>)> {
        let pinger = s.spawn(|| {
            let opts = PingOpts {
                count: 40,
                interval_secs: 0.1,
                size: Some(1000),
                ..PingOpts::default()
            };
            traffic::ping(ns, wg.b.ip(), &opts)
        });
        let finding = agent.poll(
            &format!("/api/v1/findings?interface={name}"),
            SETTLE,
            "the finding, evaluated 3 times",
            |r| {
                with_id(r, EXCEEDS)
                    .first()
                    .filter(|f| f["evaluations"].as_u64() >= Some(3))
                    .map(|f| (*f).clone())
            },
        );
        let samples = agent.poll(
            &format!("/api/v1/samples?interface={name}&limit=1000"),
            SETTLE,
            "4 samples with traffic",
            |r| {
                let items = r.items();
                (items.len() >= 4 && items.iter().any(|s| s["tx_bps"].as_f64() > Some(0.0)))
                    .then(|| items.iter().filter_map(|s| s["ts_ms"].as_i64()).collect())
            },
        );
        match pinger.join() {
            Ok(p) => {
                p?;
            }
            Err(_) => bail!("ping thread panicked"),
        }
        Ok((finding?, samples?))
    })?;
    let opened_ms = finding["opened_ms"].as_i64().context("opened_ms")?;

    // While it runs, its programs are on both interfaces.
    for ifname in [eth0, name] {
        let a = attached::attached(ns, ifname)?;
        ensure!(
            !a.tcx_ingress.is_empty() && !a.tcx_egress.is_empty(),
            "agent running, but nothing in the tcx chains of {ifname}: {a:?}"
        );
    }

    let status = agent.kill9()?;
    ensure!(
        !status.success() && status.code().is_none(),
        "the agent was not killed by SIGKILL: {status}"
    );
    attached::wait_nothing_attached(ns, &["lo", eth0, name], Duration::from_secs(3))?;

    // The database: intact, with what was written before the kill.
    let evaluations_at_kill;
    {
        let store = open_store(&db)?;
        let check = store.integrity_check()?;
        ensure!(check == "ok", "integrity_check after kill -9: {check}");
        let found = store.findings(&FindingQuery {
            interface: Some(name.to_owned()),
            state: StateFilter::All,
            ..FindingQuery::default()
        })?;
        let rows: Vec<_> = found.items.iter().filter(|f| f.id == EXCEEDS).collect();
        ensure!(
            rows.len() == 1 && rows[0].opened_ms == opened_ms && rows[0].evaluations >= 3,
            "{EXCEEDS} in the database after kill -9: {rows:?}"
        );
        evaluations_at_kill = rows[0].evaluations;
        let stored = store.samples(&SampleQuery {
            interface: Some(name.to_owned()),
            limit: 1000,
            ..SampleQuery::default()
        })?;
        let stored_ts: Vec<i64> = stored.items.iter().map(|s| s.ts_ms).collect();
        let missing: Vec<_> = samples.iter().filter(|t| !stored_ts.contains(t)).collect();
        ensure!(
            missing.is_empty(),
            "samples served before the kill are missing from the database: {missing:?} (stored {stored_ts:?})"
        );
    }

    // Restarted on the same database: the history is served, the finding continues.
    let agent = Agent::start(ns, &args)?;
    let served = agent.get_json(&format!("/api/v1/samples?interface={name}&limit=1000"))?;
    let served_ts: Vec<i64> = served["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s["ts_ms"].as_i64())
        .collect();
    let missing: Vec<_> = samples.iter().filter(|t| !served_ts.contains(t)).collect();
    ensure!(
        missing.is_empty(),
        "samples from before the kill not served after the restart: {missing:?} (served {served_ts:?})"
    );
    let continued = agent.poll(
        &format!("/api/v1/findings?state=all&interface={name}"),
        SETTLE,
        "the finding from before the kill, refreshed after the restart",
        |r| {
            let rows = with_id(r, EXCEEDS);
            match rows.as_slice() {
                [f] if f["evaluations"].as_u64() > Some(evaluations_at_kill) => Some((*f).clone()),
                _ => None,
            }
        },
    )?;
    ensure!(
        continued["opened_ms"] == opened_ms && continued["state"] == "active",
        "after the restart: {continued}"
    );
    Ok(())
}

// ---------------------------------------------------------------------------
// 5. SIGTERM: exit 0 within a few seconds, nothing attached.
// ---------------------------------------------------------------------------

#[test]
fn agent_exits_cleanly_on_sigterm() -> Result<()> {
    if !ci::lab_ready(&["tc"]) {
        return Ok(());
    }
    let pair = PairTopology::new(1500)?;
    let ns = &pair.a;
    let eth0 = PairTopology::IFNAME;
    let mut agent = Agent::start(ns, &["--no-probe"])?;
    agent.poll("/api/v1/interfaces", SETTLE, "eth0 watched", |r| {
        listed(r, eth0)
            .filter(|i| i["watched"] == true && i["hooks"].is_object())
            .map(drop)
    })?;
    let running = attached::attached(ns, eth0)?;
    ensure!(
        !running.tcx_ingress.is_empty() && !running.tcx_egress.is_empty(),
        "agent running, but nothing in the tcx chains of {eth0}: {running:?}"
    );
    let db = agent.database().to_owned();

    let started = Instant::now();
    let status = agent.terminate(Duration::from_secs(10))?;
    let took = started.elapsed();
    ensure!(
        status.success(),
        "SIGTERM: expected exit 0, got {status}; stderr:\n{}",
        agent.stderr()
    );
    ensure!(
        took <= Duration::from_secs(5),
        "SIGTERM took {took:?} to stop the agent"
    );
    attached::wait_nothing_attached(ns, &["lo", eth0], Duration::from_secs(3))?;
    let store = open_store(&db)?;
    ensure!(store.integrity_check()? == "ok");
    Ok(())
}

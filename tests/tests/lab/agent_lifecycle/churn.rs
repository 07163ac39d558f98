//! 3. Interface churn: a tunnel deleted and recreated under the same name.

use std::io::Write;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use netdoctor_lab::agent::Agent;
use netdoctor_lab::attached;
use netdoctor_lab::{lab_guard, traffic, BgProcess, Netns, PairTopology, PingOpts, WgInterface};
use serde_json::Value;

use crate::agent_lifecycle::helpers::{listed, now_ms};
use crate::agent_lifecycle::lab::{mtu_lab, CHURN, FITTING_MTU, SETTLE};

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
    lab_guard!("ping", "wireguard-go", "wg");
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

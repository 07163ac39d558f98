//! The container image (`.ci/image`) run the way the chart's DaemonSet runs it
//! (`deploy/kubernetes/`, the chart rendered), under podman, in a lab namespace standing
//! in for the node's network (see `netdoctor_lab::podman` for what is emulated and how):
//! it attaches to the lab's interfaces, answers `/healthz` the way the kubelet probes
//! it, requires the token and the node's names, a real Prometheus scrapes `/metrics` with
//! the monitor's settings and loads the alert rules from the PrometheusRule, and
//! `podman stop` (SIGTERM) detaches everything. It also prints the agent's RSS and CPU,
//! what the chart's resource requests are based on.
//!
//! Needs root, podman and runc, wireguard-go, prometheus, and the image: `bash .ci/image`
//! (NETDOCTOR_IMAGE names another one).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use netdoctor_lab::agent::request_url;
use netdoctor_lab::chart::{self, Manifests};
use netdoctor_lab::podman::{self, PodRun};
use netdoctor_lab::prometheus::{self, Prometheus, PrometheusConfig, ScrapeJob};
use netdoctor_lab::wait::eventually;
use netdoctor_lab::{attached, ci, wg_over_pair, Netns, PairTopology};
use serde_json::Value;

const NODE: &str = "node-a";
/// The scrape interval of the test's Prometheus: the monitor's 30 s would make the test
/// wait minutes for what 2 s shows.
const SCRAPE_INTERVAL: Duration = Duration::from_secs(2);

fn image() -> String {
    std::env::var("NETDOCTOR_IMAGE")
        .unwrap_or_else(|_| format!("localhost/netdoctor:{}", env!("CARGO_PKG_VERSION")))
}

fn require_image_or_skip() -> bool {
    if !ci::require_root_or_skip()
        || !ci::require_bpf_or_skip()
        || !ci::require_tools_or_skip(&["podman", "runc", "wireguard-go", "wg"])
    {
        return false;
    }
    if !podman::image_exists(&image()) {
        return ci::skip(&format!("no image {} (run `bash .ci/image`)", image()));
    }
    true
}

/// The test thread inside a namespace until dropped; then back in its own, so that the
/// lab's teardown commands do not run inside the namespace they tear down.
struct Entered(std::fs::File);

fn enter(ns: &Netns) -> Result<Entered> {
    let home = std::fs::File::open("/proc/thread-self/ns/net")?;
    let file = std::fs::File::open(ns.path())?;
    nix::sched::setns(&file, nix::sched::CloneFlags::CLONE_NEWNET).context("setns")?;
    Ok(Entered(home))
}

impl Drop for Entered {
    fn drop(&mut self) {
        if let Err(e) = nix::sched::setns(&self.0, nix::sched::CloneFlags::CLONE_NEWNET) {
            eprintln!("leaving the lab namespace: {e}");
        }
    }
}

/// utime + stime of `pid`, in clock ticks.
fn cpu_ticks(pid: u32) -> Result<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .context("stat")?
        .1
        .split_whitespace()
        .collect();
    Ok(fields[11].parse::<u64>()? + fields[12].parse::<u64>()?)
}

fn status_kb(pid: u32, key: &str) -> Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let line = status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .with_context(|| format!("no {key}"))?;
    Ok(line.trim().trim_end_matches("kB").trim().parse()?)
}

/// The alert names of `groups` (a rule file's or a PrometheusRule's).
fn alert_names(groups: &Value) -> BTreeSet<String> {
    groups
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|g| g["rules"].as_array().into_iter().flatten())
        .filter_map(|r| r["alert"].as_str().map(str::to_owned))
        .collect()
}

#[test]
fn the_image_runs_as_the_daemonset_and_prometheus_scrapes_it() -> Result<()> {
    if !require_image_or_skip() || !prometheus::require_prometheus_or_skip() {
        return Ok(());
    }
    let manifests = Manifests::load_default()?;
    let daemonset = manifests.one("DaemonSet")?;
    let monitor = manifests.one("ServiceMonitor")?;
    let rule = manifests.one("PrometheusRule")?;
    let (pair, tunnel) = wg_over_pair(1500, 1480)?;
    let wg = tunnel.a.ifname().to_owned();
    let veth = PairTopology::IFNAME;

    // An MSS clamping rule (written with the lab's `nft`), which the agent reads over
    // netlink: the image has no `nft`.
    pair.a.run(&["nft", "add table inet ndclamp"])?;
    pair.a.run(&[
        "nft",
        "add chain inet ndclamp clamp { type filter hook forward priority 0; }",
    ])?;
    pair.a.run(&[
        "nft",
        "add rule inet ndclamp clamp tcp flags syn tcp option maxseg size set rt mtu",
    ])?;

    let pod = PodRun::start(daemonset, &image(), &pair.a, PairTopology::A_IP, NODE)?;
    println!("agent: netdoctor {}", pod.args.join(" "));
    if !pod.missing_caps.is_empty() {
        println!(
            "capabilities this machine cannot give a container, left out: {:?}",
            pod.missing_caps
        );
    }
    let listen = pod
        .args
        .iter()
        .find_map(|a| a.strip_prefix("--listen="))
        .context("no --listen")?
        .to_owned();
    ensure!(
        listen == format!("{}:9469", PairTopology::A_IP),
        "the agent must listen on the node's address: {listen}"
    );
    let base = format!("http://{listen}");
    let bearer = format!("Bearer {}", pod.token);
    let auth = [("Authorization", bearer.as_str())];
    let _inside = enter(&pair.a)?;

    // The kubelet's probes: GET /healthz on the pod's (the node's) address, no token.
    let probe = &daemonset["spec"]["template"]["spec"]["containers"][0]["livenessProbe"];
    let path = chart::str_at(probe, "/httpGet/path")?;
    eventually(Duration::from_secs(90), || {
        if !pod.running() {
            return Ok(Err(anyhow::anyhow!("the container exited")));
        }
        let r = request_url("GET", &format!("{base}{path}"), &[])?;
        ensure!(r.status == 200, "{}", r.describe());
        Ok(Ok(()))
    })
    .and_then(|exited| exited)
    .with_context(|| format!("the agent's log:\n{}", pod.logs()))?;
    // Ready after its first evaluation: attached to the lab's interfaces.
    let ready = eventually(Duration::from_secs(60), || {
        let r = request_url("GET", &format!("{base}/readyz"), &auth)?;
        ensure!(r.status == 200, "{}", r.describe());
        Ok(r.json)
    })?;
    println!("readyz: {ready}");
    for ifname in [veth, wg.as_str()] {
        let state = attached::attached(&pair.a, ifname)?;
        ensure!(
            !state.tcx_ingress.is_empty() && !state.tcx_egress.is_empty(),
            "nothing attached to {ifname}: {state:?}"
        );
    }
    // The token and the Host check hold: no token, no data; a foreign name, nothing.
    let r = request_url("GET", &format!("{base}/metrics"), &[])?;
    ensure!(r.status == 401, "without the token: {}", r.describe());
    let r = request_url(
        "GET",
        &format!("{base}/healthz"),
        &[("Host", "evil.example:9469")],
    )?;
    ensure!(r.status == 403, "a foreign Host: {}", r.describe());
    let r = request_url(
        "GET",
        &format!("{base}/api/v1/interfaces/{wg}"),
        &[("Host", &format!("{NODE}:9469")), auth[0]],
    )?;
    ensure!(r.status == 200, "the node's name: {}", r.describe());
    // The tunnel's peers come through the mounted UAPI socket directory.
    eventually(Duration::from_secs(30), || {
        let r = request_url("GET", &format!("{base}/api/v1/interfaces/{wg}"), &auth)?;
        ensure!(
            r.json["facts"]["peers"]
                .as_array()
                .is_some_and(|p| !p.is_empty()),
            "no WireGuard peers in {}",
            r.describe()
        );
        Ok(())
    })?;

    let r = request_url("GET", &format!("{base}/api/v1/interfaces/{veth}"), &auth)?;
    ensure!(
        r.json["facts"]["host"]["mss_clamping"] == true,
        "the clamping rule unseen (nftables over netlink): {}",
        r.describe()
    );

    // Prometheus with the monitor's settings, the rules from the PrometheusRule.
    let endpoint = &monitor["spec"]["endpoints"][0];
    let service = manifests.one("Service")?;
    let job_label = chart::str_at(monitor, "/spec/jobLabel")?;
    let job = service["metadata"]["labels"][job_label]
        .as_str()
        .context("the Service lacks the jobLabel")?;
    let mut scrape = ScrapeJob::new(job, &listen).with_bearer_token_file(&pod.token_file);
    scrape.metrics_path = chart::str_at(endpoint, "/path")?.to_owned();
    scrape.scheme = Some(chart::str_at(endpoint, "/scheme")?.to_owned());
    let relabel = &endpoint["relabelings"][0];
    ensure!(
        relabel["sourceLabels"][0] == "__meta_kubernetes_pod_node_name"
            && relabel["targetLabel"] == "instance",
        "the monitor labels instances by node: {relabel}"
    );
    scrape.labels.insert("instance".into(), NODE.into());
    let rules_dir = tempfile::tempdir()?;
    let rules_file = rules_dir.path().join("prometheusrule.json");
    std::fs::write(&rules_file, serde_json::to_vec(&rule["spec"])?)?;
    let prom = Prometheus::start(&PrometheusConfig {
        jobs: vec![scrape],
        rule_files: vec![rules_file],
        scrape_interval: SCRAPE_INTERVAL,
        ..PrometheusConfig::default()
    })?;
    prom.wait_for_scrape(job, Duration::from_secs(30))?;
    let mtu = prom.wait_for_series(
        &format!("netdoctor_interface_mtu_bytes{{instance=\"{NODE}\",interface=\"{wg}\"}}"),
        Duration::from_secs(30),
    )?;
    ensure!(mtu.first().map(|s| s.value) == Some(1480.0), "{mtu:?}");
    prom.wait_for_series(
        &format!("netdoctor_bpf_programs_attached{{instance=\"{NODE}\",job=\"{job}\"}} >= 4"),
        Duration::from_secs(30),
    )?;

    // Every alert of rules/prometheus is loaded from the PrometheusRule and evaluates.
    let file: Value = chart::parse_documents(&std::fs::read_to_string(prometheus::rules_path())?)?
        .into_iter()
        .next()
        .context("empty rules file")?;
    let want = alert_names(&file["groups"]);
    let loaded = eventually(Duration::from_secs(20), || {
        let rules = prom.alerting_rules()?;
        let bad: Vec<String> = rules
            .iter()
            .filter(|r| r.health != "ok")
            .map(|r| format!("{}: {} {}", r.name, r.health, r.last_error))
            .collect();
        ensure!(bad.is_empty(), "rules not evaluated cleanly: {bad:?}");
        Ok(rules.into_iter().map(|r| r.name).collect::<BTreeSet<_>>())
    })?;
    ensure!(
        loaded == want,
        "loaded {loaded:?}, rules/prometheus has {want:?}"
    );
    // The lab's tunnel MTU ignores WireGuard's overhead: its alert goes pending, labelled
    // by node and interface.
    eventually(Duration::from_secs(40), || {
        let alerts = prom.alerts()?;
        ensure!(
            alerts
                .iter()
                .any(|a| a.name() == "NetdoctorMTUMisconfigured"
                    && a.labels.get("instance").map(String::as_str) == Some(NODE)
                    && a.labels.get("interface") == Some(&wg)),
            "alerts: {alerts:#?}"
        );
        Ok(())
    })?;

    // What the agent costs in the container, with the chart's interval.
    let pid = pod.pid()?;
    let hz = 100.0;
    let (t0, c0) = (Instant::now(), cpu_ticks(pid)?);
    std::thread::sleep(Duration::from_secs(30));
    let cpu = (cpu_ticks(pid)? - c0) as f64 / hz / t0.elapsed().as_secs_f64() * 100.0;
    println!(
        "agent in the container: RSS {:.1} MB (peak {:.1} MB), CPU {cpu:.2} % of a core over 30 s, interval {}",
        status_kb(pid, "VmRSS:")? as f64 / 1024.0,
        status_kb(pid, "VmHWM:")? as f64 / 1024.0,
        pod.args
            .iter()
            .find_map(|a| a.strip_prefix("--interval="))
            .unwrap_or("?")
    );

    match pod.memory_cgroup() {
        Ok((now, peak)) => println!(
            "the container's memory cgroup (with the BPF maps): {:.1} MB, peak {}",
            now as f64 / 1e6,
            peak.map_or("unknown".to_owned(), |p| format!(
                "{:.1} MB",
                p as f64 / 1e6
            ))
        ),
        Err(e) => println!("the container's memory cgroup: not readable here ({e:#})"),
    }

    // SIGTERM (podman stop): a clean exit that detaches everything.
    let code = pod.stop()?;
    ensure!(code == 0, "exit code {code}; log:\n{}", pod.logs());
    attached::wait_nothing_attached(&pair.a, &[veth, &wg], Duration::from_secs(5))?;
    drop(prom);
    drop(tunnel);
    Ok(())
}

#[test]
fn the_image_has_no_shell_and_runs_netdoctor_by_default() -> Result<()> {
    if !require_image_or_skip() {
        return Ok(());
    }
    let image = image();
    let config = podman::podman(&[
        "image",
        "inspect",
        "--format",
        "{{json .Config.Entrypoint}} {{json .Config.Cmd}} {{.Config.User}}",
        &image,
    ])?;
    ensure!(
        config.trim() == r#"["/usr/bin/netdoctor"] ["agent"] 0:0"#,
        "entrypoint, command and user: {config}"
    );
    // No shell, no firewall tool and no `wg`: netdoctor reads the rules and WireGuard
    // itself, over netlink and getsockopt.
    for shell in [
        "/bin/sh",
        "/bin/bash",
        "/usr/bin/busybox",
        "/usr/sbin/nft",
        "/usr/sbin/iptables-legacy-save",
        "/usr/bin/wg",
    ] {
        let run = podman::podman(&[
            "run",
            "--rm",
            "--network=none",
            "--ulimit=nofile=4096:4096",
            "--ulimit=nproc=4096:4096",
            "--entrypoint",
            shell,
            &image,
            "-c",
            "true",
        ]);
        ensure!(run.is_err(), "{shell} runs in the image");
    }
    // The one program in the image runs, with its libraries.
    let out = podman::podman(&[
        "run",
        "--rm",
        "--network=none",
        "--ulimit=nofile=4096:4096",
        "--ulimit=nproc=4096:4096",
        &image,
        "--version",
    ])?;
    println!("/usr/bin/netdoctor: {}", out.trim());
    Ok(())
}

//! Load any local user can put on the agent's HTTP side (issue 36): idle connections,
//! request heads sent slowly, diagnoses whose clients give up. The real binary in a lab
//! namespace under the open-file limit of the shipped systemd unit (and the 256),
//! raw TCP from inside the namespace. The API must keep answering, the monitor keep
//! evaluating, and idle or slow connections be closed after the header-read timeout.
//!
//! Needs root and BPF; skips elsewhere, fails under CI=true.

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use netdoctor_lab::agent::{
    exchange, find_metric, is_closed, parse_metrics, raise_open_files, tail, Agent,
};
use netdoctor_lab::{lab_guard, PairTopology};

/// The agent's header-read (and keep-alive idle) timeout (`daemon::server`).
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// How long past a timeout the agent may take to act on it on a busy test machine.
const SLACK: Duration = Duration::from_secs(5);
/// How long one request may take to be answered under load.
const ANSWER: Duration = Duration::from_secs(5);

fn unit_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../agent/netdoctor-agent.service")
}

/// The value of directive `key` in the unit.
fn unit_directive(key: &str) -> Result<String> {
    let text = std::fs::read_to_string(unit_path()).context("reading the unit")?;
    let prefix = format!("{key}=");
    text.lines()
        .find_map(|l| l.trim().strip_prefix(&prefix).map(str::to_owned))
        .with_context(|| format!("the unit sets no {key}="))
}

/// `netdoctor_last_evaluation_timestamp_seconds`, asked on a connection of its own.
fn last_evaluation(agent: &Agent) -> Result<f64> {
    let mut s = agent.connect()?;
    let r = exchange(&mut s, "GET", "/metrics", &[], ANSWER)?;
    ensure!(r.status == 200, "/metrics: {} {}", r.status, r.body);
    let samples = parse_metrics(&r.body)?;
    find_metric(&samples, "netdoctor_last_evaluation_timestamp_seconds", &[])
        .first()
        .map(|m| m.value)
        .context("no netdoctor_last_evaluation_timestamp_seconds")
}

/// The monitor finishes evaluations (interval 1 s) without failing, and the API answers a
/// new client, while `what` is held.
fn still_serving_and_evaluating(agent: &Agent, what: &str) -> Result<()> {
    std::thread::sleep(Duration::from_secs(3));
    let failed = |stderr: &str| stderr.contains("evaluation failed");
    let stderr = agent.stderr();
    ensure!(
        !failed(&stderr),
        "evaluations failed while {what}; agent stderr (end):\n{}",
        tail(&stderr, 3000)
    );
    let mut s = agent.connect()?;
    let r = exchange(&mut s, "GET", "/api/v1/interfaces", &[], ANSWER)
        .with_context(|| format!("a new client while {what}"))?;
    ensure!(
        r.status == 200 && r.body.contains("\"interfaces\""),
        "while {what}: {} {}",
        r.status,
        r.body
    );
    let before = last_evaluation(agent).with_context(|| format!("while {what}"))?;
    std::thread::sleep(Duration::from_millis(3500));
    let after = last_evaluation(agent).with_context(|| format!("while {what}"))?;
    let stderr = agent.stderr();
    ensure!(
        after - before >= 2.0 && !failed(&stderr),
        "the monitor stopped evaluating while {what} (last evaluation {before} then {after}); \
         agent stderr (end):\n{}",
        tail(&stderr, 3000)
    );
    Ok(())
}

/// How many of `streams` the agent has closed.
fn closed(streams: &mut [TcpStream]) -> usize {
    streams.iter_mut().map(is_closed).filter(|c| *c).count()
}

/// A thread sending one header line to each of `streams` every `every`, never the end of
/// the head, for `total`; returns the streams.
fn drip(
    mut streams: Vec<TcpStream>,
    every: Duration,
    total: Duration,
) -> std::thread::JoinHandle<Vec<TcpStream>> {
    std::thread::spawn(move || {
        let started = Instant::now();
        for s in &mut streams {
            let _ = std::io::Write::write_all(s, b"GET /api/v1/interfaces HTTP/1.1\r\n");
        }
        let mut line = 0;
        while started.elapsed() < total {
            std::thread::sleep(every);
            line += 1;
            for s in &mut streams {
                let _ = std::io::Write::write_all(s, format!("X-Slow-{line}: 1\r\n").as_bytes());
            }
        }
        streams
    })
}

#[test]
fn the_api_and_the_monitor_outlast_1000_idle_connections_under_the_units_limits() -> Result<()> {
    lab_guard!("prlimit");
    let nofile = unit_directive("LimitNOFILE")?;
    let n: u64 = nofile
        .parse()
        .with_context(|| format!("LimitNOFILE={nofile}"))?;
    raise_open_files()?;
    let pair = PairTopology::new(1500)?;
    let limit = format!("--nofile={n}:{n}");
    let agent = Agent::start_wrapped(&pair.a, &["prlimit", &limit], &["--no-probe"])?;

    let opened = Instant::now();
    let mut idle = agent.connect_many(1000)?;
    let slow = drip(
        agent.connect_many(50)?,
        Duration::from_secs(2),
        HEADER_READ_TIMEOUT + SLACK,
    );
    // Healthy twin: a client asking every 3 s on one kept-alive connection, for longer
    // than the timeout.
    println!("1,050 connections opened in {:?}", opened.elapsed());
    let mut kept = agent.connect()?;
    let keeper = std::thread::spawn(move || -> Result<usize> {
        let mut answered = 0;
        let since = Instant::now();
        while since.elapsed() < HEADER_READ_TIMEOUT + Duration::from_secs(2) {
            let r = exchange(&mut kept, "GET", "/api/v1/interfaces", &[], ANSWER)
                .with_context(|| format!("kept-alive connection after {answered} answers"))?;
            ensure!(
                r.status == 200,
                "kept-alive connection: {} {}",
                r.status,
                r.body
            );
            answered += 1;
            std::thread::sleep(Duration::from_secs(3));
        }
        Ok(answered)
    });

    still_serving_and_evaluating(&agent, "1,000 idle and 50 slow connections are open")?;
    // Below the cap nothing is closed before its time.
    let early = opened.elapsed();
    if early < HEADER_READ_TIMEOUT - Duration::from_secs(1) {
        let gone = closed(&mut idle);
        ensure!(
            gone == 0,
            "{gone} idle connections closed after only {early:?}"
        );
    }
    // A real diagnosis runs too.
    let report = agent.post(&format!(
        "/api/v1/diagnose/{}?duration=1&probe=false",
        PairTopology::IFNAME
    ))?;
    ensure!(
        report.status == 200 && report.json["interface"] == PairTopology::IFNAME,
        "a diagnosis under load: {}",
        report.describe()
    );
    let status = std::fs::read_to_string(format!("/proc/{}/status", agent.pid()))?;
    let rss_kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .context("no VmRSS")?;
    println!(
        "agent VmRSS with 1,051 connections: {rss_kib} KiB (the unit's MemoryMax={})",
        unit_directive("MemoryMax")?
    );

    // Past the header-read timeout, every idle and slow connection is closed; the
    // kept-alive one never was.
    let answered = keeper
        .join()
        .map_err(|_| anyhow::anyhow!("the kept-alive client panicked"))??;
    ensure!(
        answered >= 4,
        "only {answered} answers on the kept-alive connection"
    );
    let left = (HEADER_READ_TIMEOUT + SLACK).saturating_sub(opened.elapsed());
    std::thread::sleep(left);
    let gone = closed(&mut idle);
    ensure!(
        gone == idle.len(),
        "{} of {} idle connections still open {:?} after they were opened",
        idle.len() - gone,
        idle.len(),
        opened.elapsed()
    );
    let mut slow = slow
        .join()
        .map_err(|_| anyhow::anyhow!("the slow writer panicked"))?;
    let gone = closed(&mut slow);
    ensure!(
        gone == slow.len(),
        "{} of {} connections sending a header line every 2 s still open after {:?}",
        slow.len() - gone,
        slow.len(),
        opened.elapsed()
    );
    still_serving_and_evaluating(&agent, "the load is gone")?;
    Ok(())
}

#[test]
fn at_256_descriptors_idle_connections_never_blind_the_monitor() -> Result<()> {
    lab_guard!("prlimit");
    let pair = PairTopology::new(1500)?;
    // A soft limit below the hard one: the agent raises it to 256 at start.
    let agent = Agent::start_wrapped(&pair.a, &["prlimit", "--nofile=200:256"], &["--no-probe"])?;
    let idle = agent.connect_many(200)?;
    still_serving_and_evaluating(&agent, "200 idle connections are open at 256 descriptors")?;
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", agent.pid()))?;
    let open_files = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .context("no open-file limit")?;
    ensure!(
        open_files.split_whitespace().nth(3) == Some("256"),
        "the soft open-file limit was not raised to the hard one: {open_files}"
    );
    drop(idle);
    Ok(())
}

#[test]
fn an_abandoned_diagnosis_holds_the_slot_until_it_ends() -> Result<()> {
    lab_guard!();
    let pair = PairTopology::new(1500)?;
    let agent = Agent::start(&pair.a, &["--no-probe"])?;
    let path = format!(
        "/api/v1/diagnose/{}?duration=10&probe=false",
        PairTopology::IFNAME
    );
    let started = Instant::now();
    // Four clients, 0.5 s apart, each giving up after a second (what it got by then, if
    // anything: the status).
    let clients: Vec<_> = (0..4u32)
        .map(|i| {
            let mut s = agent.connect()?;
            let path = path.clone();
            Ok(std::thread::spawn(move || -> Result<Option<u16>> {
                std::thread::sleep(Duration::from_millis(500) * i);
                let r = exchange(&mut s, "POST", &path, &[], Duration::from_secs(1));
                Ok(r.ok().map(|r| r.status))
            }))
        })
        .collect::<Result<_>>()?;
    let answers = clients
        .into_iter()
        .map(|c| c.join().map_err(|_| anyhow::anyhow!("a client panicked"))?)
        .collect::<Result<Vec<_>>>()?;
    ensure!(
        answers[0].is_none() && answers[1..].iter().all(|a| *a == Some(429)),
        "expected the first diagnosis to run and the other three to get 429 at once, got \
         {answers:?} (None: no answer within the second)"
    );
    // The first client is long gone; its diagnosis still holds the slot.
    let fifth = agent.post(&path)?;
    ensure!(
        fifth.status == 429 && fifth.retry_after.parse::<u64>().is_ok_and(|s| s > 0),
        "a fifth diagnosis {:?} after the first started, while it runs: {}",
        started.elapsed(),
        fifth.describe()
    );
    // Healthy twin: once it has ended, the next one runs.
    let twin = format!(
        "/api/v1/diagnose/{}?duration=1&probe=false",
        PairTopology::IFNAME
    );
    let report = loop {
        let r = agent.post(&twin)?;
        if r.status != 429 || started.elapsed() > Duration::from_secs(40) {
            break r;
        }
        std::thread::sleep(Duration::from_millis(250));
    };
    ensure!(
        started.elapsed() >= Duration::from_secs(10),
        "a diagnosis ran {:?} after the abandoned one started, before it could end",
        started.elapsed()
    );
    ensure!(
        report.status == 200 && report.json["interface"] == PairTopology::IFNAME,
        "{}",
        report.describe()
    );
    Ok(())
}

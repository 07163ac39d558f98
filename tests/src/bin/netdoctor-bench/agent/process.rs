//! The measured `netdoctor agent`: started in the watched namespace, ready once `/readyz`
//! answers 200, asked for `/metrics`, stopped with SIGTERM.

use std::io;
use std::net::{Ipv4Addr, TcpListener};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use netdoctor_lab::{BgProcess, Netns};
use nix::sys::signal::Signal;

use crate::agent::metrics::{parse_metrics, AgentMetrics};
use crate::agent::{AGENT_INTERVAL, AGENT_READY_GRACE, AGENT_STOP_TIMEOUT};
use crate::lab::Lab;
use crate::STOP;

/// GET `path` from the agent on `port` of `ns`'s loopback (from a thread inside `ns`).
/// Returns the status and the body; any status is a success here.
pub(crate) fn agent_get(ns: &Netns, port: u16, path: &str) -> Result<(u16, String)> {
    let url = format!("http://127.0.0.1:{port}{path}");
    ns.run_in(move || -> Result<(u16, String)> {
        let config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .proxy(None)
            .timeout_global(Some(Duration::from_secs(5)))
            .build();
        let client = ureq::Agent::new_with_config(config);
        let mut resp = client
            .get(&url)
            .call()
            .with_context(|| format!("GET {url}"))?;
        let status = resp.status().as_u16();
        let body = resp
            .body_mut()
            .read_to_string()
            .with_context(|| format!("reading the body of GET {url}"))?;
        Ok((status, body))
    })?
}

/// A free TCP port on `ns`'s loopback (the namespace is the lab's own: nothing else
/// competes for it).
pub(crate) fn free_port(ns: &Netns) -> Result<u16> {
    ns.run_in(|| -> io::Result<u16> {
        Ok(TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?
            .local_addr()?
            .port())
    })?
    .context("finding a free port for the agent")
}

/// A running `netdoctor agent`.
#[derive(Debug)]
pub(crate) struct AgentProc {
    pub(crate) nd: BgProcess,
    pub(crate) pid: u32,
    pub(crate) port: u16,
    pub(crate) started: Instant,
    /// When `/readyz` first answered 200: just after the first evaluation. Evaluations
    /// then follow every interval.
    pub(crate) ready_at: Instant,
}

impl AgentProc {
    pub(crate) fn start(
        lab: &Lab,
        netdoctor: &str,
        db: &std::path::Path,
        port: u16,
    ) -> Result<AgentProc> {
        let ns = lab.watched();
        let db = db.to_string_lossy();
        let listen = format!("127.0.0.1:{port}");
        let interval = format!("{}s", AGENT_INTERVAL.as_secs());
        let argv = [
            netdoctor,
            "agent",
            "--interval",
            &interval,
            "--no-probe",
            "--database",
            &db,
            "--listen",
            &listen,
        ];
        let started = Instant::now();
        let mut nd = ns.spawn(&argv)?;
        let pid = nd.pid();
        let deadline = started + AGENT_INTERVAL + AGENT_READY_GRACE;
        let mut last = String::from("no answer yet");
        loop {
            ensure!(!STOP.load(Ordering::SeqCst), "interrupted");
            if let Some(status) = nd.try_status()? {
                bail!(
                    "`{}` exited ({status}) before /readyz answered 200 (last: {last}); stderr: {}",
                    argv.join(" "),
                    nd.stderr().unwrap_or_default().trim()
                );
            }
            match agent_get(ns, port, "/readyz") {
                Ok((200, _)) => break,
                Ok((code, body)) => last = format!("{code} {}", body.trim()),
                Err(e) => last = format!("{e:#}"),
            }
            if Instant::now() >= deadline {
                bail!(
                    "`{}`: /readyz did not answer 200 within {:?} (last: {last}); stderr: {}",
                    argv.join(" "),
                    deadline.duration_since(started),
                    nd.stderr().unwrap_or_default().trim()
                );
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        Ok(AgentProc {
            nd,
            pid,
            port,
            started,
            ready_at: Instant::now(),
        })
    }

    pub(crate) fn metrics(&self, ns: &Netns) -> Result<AgentMetrics> {
        let (status, body) = agent_get(ns, self.port, "/metrics")?;
        ensure!(status == 200, "GET /metrics: {status} {}", body.trim());
        Ok(parse_metrics(&body))
    }

    /// The first middle of an evaluation interval at or after `t` (evaluations end just
    /// before `ready_at + k × interval`).
    pub(crate) fn midpoint_after(&self, t: Instant) -> Instant {
        let half = AGENT_INTERVAL / 2;
        let mut m = self.ready_at + half;
        while m < t {
            m += AGENT_INTERVAL;
        }
        m
    }

    /// SIGTERM; returns how long the agent took to exit, which must be with status 0.
    pub(crate) fn stop(mut self) -> Result<f64> {
        let t = Instant::now();
        self.nd.signal(Signal::SIGTERM)?;
        let status = self.nd.wait_timeout(AGENT_STOP_TIMEOUT)?;
        ensure!(
            status.success(),
            "netdoctor agent exited with {status} after SIGTERM (0 expected); stderr: {}",
            self.nd.stderr().unwrap_or_default().trim()
        );
        Ok(t.elapsed().as_secs_f64())
    }
}

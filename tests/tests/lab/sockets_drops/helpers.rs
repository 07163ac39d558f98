//! Helpers every subject uses: addresses, threads moved into a namespace, typed fields
//! of the JSON reports (beside the lab crate's `str_field` / `u64_field`), and the iperf3
//! client options and answer of the data connections.

use std::fs::File;
use std::net::IpAddr;

use anyhow::{bail, Context, Result};
use netdoctor_lab::{Iperf3Opts, Iperf3Report, Netns};
use serde_json::Value;

pub(crate) fn ip(s: &str) -> Result<IpAddr> {
    s.parse().with_context(|| format!("bad address {s}"))
}

/// Moves the *calling thread* into `ns` (only call it on a thread of its own, e.g. a
/// scoped thread that ends with the test). Child processes started from this thread
/// (`ss`) inherit the namespace; BPF loaded here records it as the loading namespace.
pub(crate) fn enter(ns: &Netns) -> Result<()> {
    let file = File::open(ns.path()).with_context(|| format!("opening {}", ns.path().display()))?;
    nix::sched::setns(&file, nix::sched::CloneFlags::CLONE_NEWNET)
        .with_context(|| format!("setns into {}", ns.name()))
}

/// Joins a scoped thread, turning a panic into an error.
pub(crate) fn join<T>(
    handle: std::thread::ScopedJoinHandle<'_, Result<T>>,
    what: &str,
) -> Result<T> {
    match handle.join() {
        Ok(result) => result.with_context(|| what.to_owned()),
        Err(_) => bail!("thread {what} panicked"),
    }
}

pub(crate) fn f64_field(v: &Value, key: &str) -> Result<f64> {
    v.get(key)
        .with_context(|| format!("key {key:?} missing in {v}"))?
        .as_f64()
        .with_context(|| format!("{key:?} is not a number in {v}"))
}

pub(crate) fn bool_field(v: &Value, key: &str) -> Result<bool> {
    v.get(key)
        .with_context(|| format!("key {key:?} missing in {v}"))?
        .as_bool()
        .with_context(|| format!("{key:?} is not a boolean in {v}"))
}

pub(crate) fn iperf3_local_port(r: &Iperf3Report) -> Result<u16> {
    r.json
        .pointer("/start/connected/0/local_port")
        .and_then(Value::as_u64)
        .and_then(|p| u16::try_from(p).ok())
        .context("iperf3 JSON has no start.connected[0].local_port")
}

pub(crate) fn iperf3_opts(server: &str, port: u16, cc: &str, cport: u16, secs: u32) -> Iperf3Opts {
    let mut opts = Iperf3Opts::new(server);
    opts.port = port;
    opts.congestion = Some(cc.to_owned());
    opts.duration_secs = secs;
    opts.extra_args = vec!["--cport".into(), cport.to_string()];
    opts
}

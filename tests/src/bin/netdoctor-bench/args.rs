//! The command line (clap): what to measure, for how long, and which end of the link
//! netdoctor watches; the packet configurations under test.

use std::path::PathBuf;

use anyhow::{bail, ensure, Context, Result};
use libbpf_rs::libbpf_sys;

use crate::{AGENT, TRACING};

/// Which end of the link netdoctor watches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Side {
    /// `b/eth0`: ingress carries the data (GSO super-packets), egress the ACKs.
    Receiver,
    /// `a/eth0`: egress carries the data, ingress the ACKs.
    Sender,
}

impl Side {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Side::Receiver => "receiver",
            Side::Sender => "sender",
        }
    }
}

/// A netdoctor configuration under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Config {
    Tc,
    XdpGeneric,
    XdpNative,
}

impl Config {
    pub(crate) const ALL: [Config; 3] = [Config::Tc, Config::XdpGeneric, Config::XdpNative];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Config::Tc => "tc",
            Config::XdpGeneric => "xdp-generic",
            Config::XdpNative => "xdp-native",
        }
    }

    pub(crate) fn parse(s: &str) -> Result<Config> {
        Config::ALL
            .into_iter()
            .find(|c| c.name() == s)
            .with_context(|| {
                format!("unknown configuration {s:?} (tc, xdp-generic, xdp-native, tracing, agent)")
            })
    }

    /// netdoctor's flags for this configuration (`tc` uses the default, which must pick tc
    /// on veth; the run checks the hooks netdoctor reports).
    pub(crate) fn netdoctor_args(self) -> &'static [&'static str] {
        match self {
            Config::Tc => &[],
            Config::XdpGeneric => &["--ingress", "xdp", "--xdp-mode", "generic"],
            Config::XdpNative => &["--ingress", "xdp", "--xdp-mode", "native"],
        }
    }

    /// The ingress hook netdoctor must report (`hooks.ingress`).
    pub(crate) fn expected_ingress(self) -> &'static str {
        match self {
            Config::Tc => "tc",
            Config::XdpGeneric => "xdp-generic",
            Config::XdpNative => "xdp-native",
        }
    }

    /// XDP attach flags of the empty XDP program standing in for netdoctor's.
    pub(crate) fn xdp_flags(self) -> Option<u32> {
        match self {
            Config::Tc => None,
            Config::XdpGeneric => Some(libbpf_sys::XDP_FLAGS_SKB_MODE),
            Config::XdpNative => Some(libbpf_sys::XDP_FLAGS_DRV_MODE),
        }
    }

    pub(crate) fn describe(self) -> &'static str {
        match self {
            Config::Tc => "netdoctor tc in+out (default)",
            Config::XdpGeneric => "netdoctor xdp-generic in + tc out",
            Config::XdpNative => "netdoctor xdp-native in + tc out",
        }
    }

    pub(crate) fn describe_floor(self) -> &'static str {
        match self {
            Config::Tc => "empty tc in+out",
            Config::XdpGeneric => "empty xdp-generic in + tc out",
            Config::XdpNative => "empty xdp-native in + tc out",
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Args {
    pub(crate) duration: u32,
    pub(crate) rounds: u32,
    pub(crate) parallel: u32,
    pub(crate) parallel_duration: u32,
    pub(crate) json: bool,
    pub(crate) netdoctor: PathBuf,
    pub(crate) side: Side,
    /// Packet configurations (the `tracing` and `agent` entries of --configs are the
    /// booleans below).
    pub(crate) configs: Vec<Config>,
    /// Measure the tracing programs (`tracing` in --configs).
    pub(crate) tracing: bool,
    pub(crate) tracing_duration: u32,
    pub(crate) tracing_loss: u8,
    /// Measure the agent process (`agent` in --configs).
    pub(crate) agent: bool,
    pub(crate) agent_idle: u32,
}

const USAGE: &str = "\
netdoctor-bench: throughput and per-packet cost of netdoctor's data plane on a veth pair

USAGE: netdoctor-bench [OPTIONS]   (root; build first: cargo build --release -p netdoctor)

OPTIONS:
  --duration SECS           iperf3 time per run (default 5)
  --rounds N                alternations of baseline and attached runs (default 3)
  --parallel N              streams of the extra many-flows tc run, 0 skips it (default 8)
  --parallel-duration SECS  iperf3 time of that run (default 3)
  --side receiver|sender    end netdoctor watches: b/eth0 (receiver, default: ingress sees
                            the data, so XDP handles GSO super-packets) or a/eth0 (sender)
  --configs LIST            comma-separated subset of tc,xdp-generic,xdp-native,tracing,agent
                            (default all); tracing = per-event cost of the socket probes
                            (netdoctor flows) and the kfree_skb program (netdoctor drops);
                            agent = RSS and CPU of `netdoctor agent`, idle and under iperf3
                            (--rounds runs of --duration s against baselines; ~2.5 min)
  --tracing-duration SECS   load window per tracing command (default 6; plus 2 s idle each)
  --tracing-loss PCT        random loss on the receiver's ingress during it (default 3)
  --agent-idle SECS         the agent's idle window (default 30: three evaluations)
  --netdoctor PATH          netdoctor binary (default: next to this binary)
  --json                    print one JSON document instead of the text report
  -h, --help                this text
";

pub(crate) fn parse_args() -> Result<Option<Args>> {
    let exe_dir = std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("."));
    let mut args = Args {
        duration: 5,
        rounds: 3,
        parallel: 8,
        parallel_duration: 3,
        json: false,
        netdoctor: exe_dir.join("netdoctor"),
        side: Side::Receiver,
        configs: Config::ALL.to_vec(),
        tracing: true,
        tracing_duration: 6,
        tracing_loss: 3,
        agent: true,
        agent_idle: 30,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_owned(), Some(v.to_owned())),
            _ => (arg.clone(), None),
        };
        let mut value = || -> Result<String> {
            match &inline {
                Some(v) => Ok(v.clone()),
                None => it.next().with_context(|| format!("{flag} needs a value")),
            }
        };
        let number = |v: String| -> Result<u32> {
            v.parse::<u32>()
                .with_context(|| format!("{flag}: {v:?} is not a whole number"))
        };
        match flag.as_str() {
            "-h" | "--help" => {
                print!("{USAGE}");
                return Ok(None);
            }
            "--duration" => args.duration = number(value()?)?,
            "--rounds" => args.rounds = number(value()?)?,
            "--parallel" => args.parallel = number(value()?)?,
            "--parallel-duration" => args.parallel_duration = number(value()?)?,
            "--json" => args.json = true,
            "--netdoctor" => args.netdoctor = PathBuf::from(value()?),
            "--side" => {
                args.side = match value()?.as_str() {
                    "receiver" => Side::Receiver,
                    "sender" => Side::Sender,
                    other => bail!("--side: {other:?} is neither receiver nor sender"),
                }
            }
            "--configs" => {
                let list = value()?;
                let items: Vec<&str> = list.split(',').filter(|s| !s.is_empty()).collect();
                args.tracing = items.contains(&TRACING);
                args.agent = items.contains(&AGENT);
                args.configs = items
                    .into_iter()
                    .filter(|s| *s != TRACING && *s != AGENT)
                    .map(Config::parse)
                    .collect::<Result<_>>()?;
            }
            "--tracing-duration" => args.tracing_duration = number(value()?)?,
            "--tracing-loss" => {
                args.tracing_loss = u8::try_from(number(value()?)?)
                    .ok()
                    .filter(|p| *p <= 100)
                    .context("--tracing-loss must be a percentage (0-100)")?;
            }
            "--agent-idle" => args.agent_idle = number(value()?)?,
            other => bail!("unknown argument {other:?}; see --help"),
        }
    }
    ensure!(args.duration >= 1, "--duration must be at least 1 s");
    ensure!(args.rounds >= 1, "--rounds must be at least 1");
    ensure!(
        args.tracing_duration >= 1,
        "--tracing-duration must be at least 1 s"
    );
    ensure!(args.agent_idle >= 1, "--agent-idle must be at least 1 s");
    ensure!(
        args.tracing || args.agent || !args.configs.is_empty(),
        "--configs selects nothing to measure"
    );
    ensure!(
        args.parallel == 0 || args.parallel_duration >= 1,
        "--parallel-duration must be at least 1 s"
    );
    Ok(Some(args))
}

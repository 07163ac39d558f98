//! The command line (clap): what to measure, for how long, and which end of the link
//! netdoctor watches; the packet configurations under test.

use std::path::PathBuf;

use anyhow::{ensure, Result};
use clap::{Parser, ValueEnum};
use libbpf_rs::libbpf_sys;

use crate::lab::{NetPath, Paths};
use crate::packet::run::Hook;
use crate::{AGENT, TRACING};

/// netdoctor's option choosing how this host's own TCP is accounted (`sockets` or
/// `packets`).
pub(crate) const LOCAL_TCP: &str = "--local-tcp";

/// Which end of the link netdoctor watches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
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

    /// The namespace of the watched end: `b` or `a`.
    pub(crate) fn namespace(self) -> &'static str {
        match self {
            Side::Receiver => "b",
            Side::Sender => "a",
        }
    }
}

/// A netdoctor configuration under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Config {
    /// The default: tc in + out, this host's own TCP on the minimal path (`--local-tcp
    /// sockets`: interface counters only, the connection is described by socket telemetry).
    Tc,
    /// tc in + out with `--local-tcp packets`: this host's TCP accounted per flow in the
    /// flow table like forwarded traffic.
    TcPackets,
    XdpGeneric,
    XdpNative,
}

impl Config {
    pub(crate) const ALL: [Config; 4] = [
        Config::Tc,
        Config::TcPackets,
        Config::XdpGeneric,
        Config::XdpNative,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Config::Tc => "tc",
            Config::TcPackets => "tc-packets",
            Config::XdpGeneric => "xdp-generic",
            Config::XdpNative => "xdp-native",
        }
    }

    pub(crate) fn parse(s: &str) -> Result<Config, String> {
        Config::ALL
            .into_iter()
            .find(|c| c.name() == s)
            .ok_or_else(|| {
                format!(
                    "unknown configuration {s:?} (tc, tc-packets, xdp-generic, xdp-native, tracing, agent)"
                )
            })
    }

    /// Whether netdoctor runs on tc at both ends (the configurations NetObserv is measured
    /// beside, with the floor in the same runs).
    pub(crate) fn is_tc(self) -> bool {
        matches!(self, Config::Tc | Config::TcPackets)
    }

    /// The hooks netdoctor attaches to in this configuration.
    pub(crate) fn hooks(self) -> &'static [Hook] {
        if self.is_tc() {
            &[Hook::TcIn, Hook::TcOut]
        } else {
            &[Hook::Xdp, Hook::TcOut]
        }
    }

    /// netdoctor's flags for this configuration (`tc` uses the default, which must pick tc
    /// on veth; the run checks the hooks netdoctor reports).
    pub(crate) fn netdoctor_args(self) -> &'static [&'static str] {
        match self {
            Config::Tc => &[],
            Config::TcPackets => &[LOCAL_TCP, "packets"],
            Config::XdpGeneric => &["--ingress", "xdp", "--xdp-mode", "generic"],
            Config::XdpNative => &["--ingress", "xdp", "--xdp-mode", "native"],
        }
    }

    /// The ingress hook netdoctor must report (`hooks.ingress`).
    pub(crate) fn expected_ingress(self) -> &'static str {
        match self {
            Config::Tc | Config::TcPackets => "tc",
            Config::XdpGeneric => "xdp-generic",
            Config::XdpNative => "xdp-native",
        }
    }

    /// XDP attach flags of the empty XDP program standing in for netdoctor's.
    pub(crate) fn xdp_flags(self) -> Option<u32> {
        match self {
            Config::Tc | Config::TcPackets => None,
            Config::XdpGeneric => Some(libbpf_sys::XDP_FLAGS_SKB_MODE),
            Config::XdpNative => Some(libbpf_sys::XDP_FLAGS_DRV_MODE),
        }
    }

    pub(crate) fn describe(self) -> &'static str {
        match self {
            Config::Tc => "netdoctor tc in+out (default)",
            Config::TcPackets => "netdoctor tc, --local-tcp packets",
            Config::XdpGeneric => "netdoctor xdp-generic in + tc out",
            Config::XdpNative => "netdoctor xdp-native in + tc out",
        }
    }

    pub(crate) fn describe_floor(self) -> &'static str {
        match self {
            Config::Tc | Config::TcPackets => "empty tc in+out",
            Config::XdpGeneric => "empty xdp-generic in + tc out",
            Config::XdpNative => "empty xdp-native in + tc out",
        }
    }
}

/// What `--configs` selects: packet configurations and the other sections.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Selection {
    /// Packet configurations, in the order given.
    pub(crate) packet: Vec<Config>,
    /// Measure the tracing programs (`tracing`).
    pub(crate) tracing: bool,
    /// Measure the agent process (`agent`).
    pub(crate) agent: bool,
}

impl Selection {
    /// A comma-separated list of tc, tc-packets, xdp-generic, xdp-native, tracing, agent
    /// (empty entries are skipped).
    fn parse(list: &str) -> Result<Selection, String> {
        let items: Vec<&str> = list.split(',').filter(|s| !s.is_empty()).collect();
        Ok(Selection {
            tracing: items.contains(&TRACING),
            agent: items.contains(&AGENT),
            packet: items
                .into_iter()
                .filter(|s| *s != TRACING && *s != AGENT)
                .map(Config::parse)
                .collect::<Result<_, _>>()?,
        })
    }

    /// The selected configurations on tc (measured beside NetObserv).
    pub(crate) fn tc(&self) -> Vec<Config> {
        self.packet.iter().copied().filter(|c| c.is_tc()).collect()
    }

    /// The configurations of the many-flows runs: the selected tc ones, or the default tc
    /// when only XDP ones are; none when the packet section measures nothing.
    pub(crate) fn many_flows(&self) -> Vec<Config> {
        match self.tc() {
            tc if tc.is_empty() && !self.packet.is_empty() => vec![Config::Tc],
            tc => tc,
        }
    }

    /// The names, as --configs takes them.
    pub(crate) fn names(&self) -> Vec<&'static str> {
        self.packet
            .iter()
            .map(|c| c.name())
            .chain(self.tracing.then_some(TRACING))
            .chain(self.agent.then_some(AGENT))
            .collect()
    }
}

/// A percentage, 0 to 100.
fn percentage(s: &str) -> Result<u8, String> {
    s.parse::<u8>()
        .ok()
        .filter(|p| *p <= 100)
        .ok_or_else(|| "must be a percentage (0-100)".to_owned())
}

/// `netdoctor` next to this binary.
fn netdoctor_next_to_me() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("."))
        .join("netdoctor")
}

/// netdoctor-bench: throughput and per-packet cost of netdoctor's data plane on a veth pair
#[derive(Debug, Clone, Parser)]
#[command(
    name = "netdoctor-bench",
    after_help = "Run as root. Build first: cargo build --release -p netdoctor \
                  (bash .ci/bench builds the release binaries and runs this one).",
    args_override_self = true
)]
pub(crate) struct Args {
    /// iperf3 time per run
    #[arg(long, value_name = "SECS", default_value_t = 3)]
    pub(crate) duration: u32,
    /// alternations of baseline and attached runs (a target verdict needs 5)
    #[arg(long, value_name = "N", default_value_t = 5)]
    pub(crate) rounds: u32,
    /// comma-separated subset of local,forwarded,wireguard (default all): the paths
    /// measured side by side with NetObserv, interleaved in every round; local runs the
    /// packet configurations of --configs, forwarded (a router's veth) and wireguard
    /// (wireguard-go's underlay veth) run netdoctor's default tc configuration
    #[arg(
        long,
        value_name = "LIST",
        default_value = "local,forwarded,wireguard",
        hide_default_value = true,
        value_parser = NetPath::parse_list
    )]
    pub(crate) paths: Paths,
    /// streams of the extra many-flows tc run, 0 skips it
    #[arg(long, value_name = "N", default_value_t = 8)]
    pub(crate) parallel: u32,
    /// iperf3 time of that run
    #[arg(long, value_name = "SECS", default_value_t = 3)]
    pub(crate) parallel_duration: u32,
    /// end netdoctor watches: b/eth0 (receiver: ingress sees the data, so XDP handles GSO
    /// super-packets) or a/eth0 (sender)
    #[arg(
        long,
        value_enum,
        value_name = "receiver|sender",
        default_value_t = Side::Receiver,
        hide_possible_values = true
    )]
    pub(crate) side: Side,
    /// comma-separated subset of tc,tc-packets,xdp-generic,xdp-native,tracing,agent (default
    /// all); tc-packets = tc with `--local-tcp packets` (this host's TCP per flow), in the
    /// same rounds as tc and beside the same floor and NetObserv; tracing = per-event cost
    /// of the socket probes (netdoctor flows) and the kfree_skb program (netdoctor drops);
    /// agent = RSS and CPU of `netdoctor agent`, idle and under iperf3 (--rounds runs of
    /// --duration s against baselines; ~2.5 min)
    #[arg(
        long,
        value_name = "LIST",
        default_value = "tc,tc-packets,xdp-generic,xdp-native,tracing,agent",
        hide_default_value = true,
        value_parser = Selection::parse
    )]
    pub(crate) configs: Selection,
    /// load window per tracing command (plus 2 s idle each)
    #[arg(long, value_name = "SECS", default_value_t = 6)]
    pub(crate) tracing_duration: u32,
    /// random loss on the receiver's ingress during it
    #[arg(long, value_name = "PCT", default_value_t = 3, value_parser = percentage)]
    pub(crate) tracing_loss: u8,
    /// the agent's idle window (three evaluations by default)
    #[arg(long, value_name = "SECS", default_value_t = 30)]
    pub(crate) agent_idle: u32,
    /// netdoctor binary (default: next to this binary)
    #[arg(
        long,
        value_name = "PATH",
        default_value_os_t = netdoctor_next_to_me(),
        hide_default_value = true
    )]
    pub(crate) netdoctor: PathBuf,
    /// directory holding NetObserv's tc object (netobserv-tc.o), measured side by side with
    /// netdoctor in the tc runs; skipped, said so, when it is not there
    #[arg(long, value_name = "DIR", default_value = "../shared/peer")]
    pub(crate) peer: PathBuf,
    /// print one JSON document instead of the text report
    #[arg(long)]
    pub(crate) json: bool,
}

impl Args {
    /// The command line, checked: clap prints help or a usage error itself and exits (0 or
    /// 2); the checks across options come back as an error.
    pub(crate) fn from_command_line() -> Result<Args> {
        let args = Args::parse();
        ensure!(args.duration >= 1, "--duration must be at least 1 s");
        ensure!(args.rounds >= 1, "--rounds must be at least 1");
        ensure!(
            args.tracing_duration >= 1,
            "--tracing-duration must be at least 1 s"
        );
        ensure!(args.agent_idle >= 1, "--agent-idle must be at least 1 s");
        ensure!(
            !args.paths.0.is_empty(),
            "--paths selects no path (local, forwarded, wireguard)"
        );
        ensure!(
            args.configs.tracing
                || args.configs.agent
                || (!args.configs.packet.is_empty() && args.paths.contains(NetPath::Local))
                || !args.paths.remote().is_empty(),
            "--configs selects nothing to measure"
        );
        ensure!(
            args.parallel == 0 || args.parallel_duration >= 1,
            "--parallel-duration must be at least 1 s"
        );
        Ok(args)
    }
}

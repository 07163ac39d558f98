//! The command line: flags defined once here, turned into `--help` by clap.

mod diagnose;
mod diagnose_cmd;
mod diagnose_many;
mod drops;
mod flows;
mod flows_report;
mod limits;
pub(crate) mod logging;
mod output;
mod path_output;
mod probe;
mod rules;
mod rules_eval;
mod run;
mod shutdown;
mod table;
mod wireguard;

pub use run::main;

use flows::observe;

use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::duration::{AtMost, DAY, MINUTE};
use crate::kernel::attach::{AttachMethod, XdpMode};
use crate::kernel::packet::{
    flow_table, IngressHook, LocalTcp, Options, TunnelPort, MAX_TUNNEL_PORTS,
};
use crate::kernel::views::Encap;

/// Exit code when netdoctor could not do its job (Nagios "UNKNOWN"): usage errors, unknown
/// interfaces, missing privileges, kernels without BTF.
pub const EXIT_UNKNOWN: u8 = 3;

/// netdoctor: see why traffic through tunnels, overlays and gateways is slow or hangs.
///
/// netdoctor attaches small eBPF programs (XDP and tc) to interfaces, counts what crosses
/// them (per interface and per flow, tunnel encapsulations on the underlay, ICMP
/// "too big" messages, TCP retransmissions of forwarded traffic) and reports it. It needs
/// root, or CAP_BPF + CAP_NET_ADMIN + CAP_PERFMON. Programs are attached through BPF links:
/// nothing stays attached after netdoctor exits, even if it is killed.
#[derive(Debug, Parser)]
#[command(
    name = "netdoctor",
    version,
    propagate_version = true,
    max_term_width = 100
)]
pub struct Cli {
    /// More log output on stderr (-v info, -vv debug); RUST_LOG overrides.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Diagnose interfaces: what is wrong with their paths, and the exact fix.
    ///
    /// With no IFACE (or --all), diagnoses every tunnel and overlay interface that is up,
    /// the bridges carrying them and the default-route interfaces (IPv4 and IPv6) in one
    /// observation window; several IFACEs likewise. For each: reads the interface's
    /// configuration (kind, MTU, tunnel peers and underlay, sysctls, MSS clamping), watches
    /// its traffic for --duration with the data plane and socket telemetry, probes the path
    /// MTU toward the tunnel's endpoints, then evaluates the rules (built-in, plus --rules
    /// DIR). Findings are printed most severe first, each with evidence and a fix; with
    /// several interfaces, a line per interface first, then its findings under it. The
    /// exit code is the worst interface's.
    ///
    /// Exit codes (Nagios plugin convention): 0 nothing above info, 1 warning,
    /// 2 critical, 3 could not diagnose; 130 / 143 stopped by SIGINT / SIGTERM (everything
    /// attached is detached first). The first Ctrl-C during the observation ends it early
    /// and reports what it saw; a second one stops.
    ///
    /// Examples:
    ///   netdoctor diagnose
    ///   netdoctor diagnose wg0
    ///   netdoctor diagnose wg0 wg1 eth0 --json | jq '.reports[].findings[].id'
    ///   netdoctor diagnose eth0 --duration 15s --json | jq '.findings[].id'
    ///   netdoctor diagnose tap0 --no-probe --rules /etc/netdoctor/rules
    #[command(verbatim_doc_comment)]
    Diagnose(DiagnoseArgs),
    /// List the diagnostic rules, or check a directory of rules without running them.
    Rules(RulesArgs),
    /// Watch an interface for a while and print its busiest flows and counters.
    ///
    /// Examples:
    ///   netdoctor flows eth0
    ///   netdoctor flows wg0 --duration 30s --top 50
    ///   netdoctor flows eth0 --json | jq '.tunnels'
    ///   netdoctor flows eth0 --tunnel-port 10000=fastd
    #[command(verbatim_doc_comment)]
    Flows(FlowsArgs),
    /// Count the packets the kernel drops, by interface and reason, for a while.
    ///
    /// Reasons are the kernel's own (enum skb_drop_reason, e.g. IP_INADDRERRORS when a
    /// gateway does not forward, IP_RPFILTER for reverse-path filtering, NETFILTER_DROP for
    /// firewall rules), read from this kernel's BTF.
    ///
    /// Examples:
    ///   netdoctor drops
    ///   netdoctor drops --interface wg0 --duration 30s --json
    #[command(verbatim_doc_comment)]
    Drops(DropsArgs),
    /// Find the path MTU toward a host, like tracepath: DF-set ICMP echo probes of
    /// bisected sizes. Reports the largest packet that gets through, the routers that
    /// said "too big" and their MTU, and whether larger packets vanish silently (a PMTU
    /// blackhole).
    ///
    /// Examples:
    ///   netdoctor probe 192.0.2.10
    ///   netdoctor probe 2001:db8::1 --max-size 9000 --json
    #[command(verbatim_doc_comment)]
    Probe(ProbeArgs),
    /// Print what netdoctor reads of a WireGuard interface, as JSON: listen port, and per
    /// peer its endpoint, allowed IPs, latest handshake, byte counters and keepalive.
    /// Kernel WireGuard is read over generic netlink (as `wg show` does), userspace
    /// implementations from their UAPI socket, tailscaled from its LocalAPI; nothing is run.
    ///
    /// Examples:
    ///   netdoctor wireguard wg0
    ///   netdoctor wireguard wg0 | jq '.peers[].endpoint'
    #[command(verbatim_doc_comment)]
    Wireguard(WireguardArgs),
    /// Run the always-on agent: watch interfaces, evaluate the rules every interval, keep
    /// findings history, serve an HTTP API, Prometheus /metrics and a dashboard.
    ///
    /// It attaches to every non-loopback physical, veth, bond, WireGuard, TUN/TAP, VXLAN
    /// and GENEVE interface (or those matching --interfaces), follows interfaces as they
    /// come and go, and evaluates each one every --interval with the same collectors and
    /// rules as `diagnose`. Findings are kept in SQLite as a lifecycle: opened, still
    /// active, resolved. SIGTERM or SIGINT detach everything and close the database.
    ///
    /// The API listens on 127.0.0.1:9469; any other address needs --token-file. Every
    /// flag can also come from the --config file or a NETDOCTOR_* variable.
    ///
    /// Examples:
    ///   netdoctor agent
    ///   netdoctor agent --interfaces 'wg*,eth0' --interval 30s
    ///   netdoctor agent --listen 0.0.0.0:9469 --token-file /etc/netdoctor/token
    ///   netdoctor agent --config /etc/netdoctor/agent.toml
    #[command(verbatim_doc_comment)]
    Agent(Box<AgentArgs>),
}

/// Options for `netdoctor agent`.
#[derive(Debug, Args)]
pub struct AgentArgs {
    #[command(flatten)]
    pub settings: crate::daemon::config::Overrides,
    #[command(flatten)]
    pub dataplane: DataplaneArgs,
}

/// Options for `netdoctor wireguard`.
#[derive(Debug, Args)]
pub struct WireguardArgs {
    /// The WireGuard interface.
    pub interface: String,
}

/// Options for `netdoctor probe`.
#[derive(Debug, Args)]
pub struct ProbeArgs {
    /// Host to probe (IPv4 or IPv6 address of another host: not one of this host's own,
    /// nor a broadcast or multicast address).
    pub target: std::net::IpAddr,
    /// Largest IP packet to try [default: the MTU of the route's interface].
    #[arg(long)]
    pub max_size: Option<u32>,
    /// How long to wait for each answer (a bare number is seconds).
    #[arg(
        long,
        default_value = "400ms",
        value_parser = AtMost(MINUTE),
        allow_hyphen_values = true,
    )]
    pub timeout: Duration,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Options for `netdoctor diagnose`.
#[derive(Debug, Args)]
pub struct DiagnoseArgs {
    /// Interfaces to diagnose (wg0, tun0, tap0, vxlan0, eth0, ...), in one observation
    /// window. None: every tunnel and overlay interface that is up, the bridges carrying
    /// them and the default-route interfaces.
    #[arg(value_name = "IFACE")]
    pub interfaces: Vec<String>,
    /// Diagnose every tunnel and overlay interface, the bridges carrying them and the
    /// default-route interfaces (what no IFACE does).
    #[arg(long, conflicts_with = "interfaces")]
    pub all: bool,
    /// How long to observe traffic: 5 or 5s, 500ms, 1m30s (a bare number is seconds; at
    /// most a day). Ctrl-C ends the observation early and still reports.
    #[arg(
        short,
        long,
        default_value = "5s",
        value_parser = AtMost(DAY),
        allow_hyphen_values = true,
    )]
    pub duration: Duration,
    /// Print the report as JSON (schema in docs/json.md).
    #[arg(long)]
    pub json: bool,
    /// Skip the active path-MTU probe (it sends at most a few dozen ICMP echo requests to
    /// the tunnel's endpoints and to hosts of stalled connections).
    #[arg(long)]
    pub no_probe: bool,
    /// Directory of extra rules (*.toml); a rule with a built-in's id replaces it.
    #[arg(long, value_name = "DIR", env = "NETDOCTOR_RULES")]
    pub rules: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub dataplane: DataplaneArgs,
}

/// Options for `netdoctor rules`.
#[derive(Debug, Args)]
pub struct RulesArgs {
    #[command(subcommand)]
    pub command: RulesCommand,
}

/// `netdoctor rules` subcommands.
#[derive(Debug, Subcommand)]
pub enum RulesCommand {
    /// List rules: id, severity, scope, origin and description.
    List {
        /// Also load this directory of rules.
        #[arg(long, value_name = "DIR")]
        rules: Option<std::path::PathBuf>,
    },
    /// Validate rules: syntax, unknown fields, bad expressions, unknown facts. Without DIR,
    /// checks the built-in rules. Exit 0 if all are valid, 3 otherwise.
    Check {
        /// Directory of *.toml rules.
        dir: Option<std::path::PathBuf>,
    },
    /// Evaluate the rules against a saved report, with no observation: the facts of a
    /// `netdoctor diagnose --json` report (or a facts document alone), e.g. to try a new
    /// rule on a case captured on another host. Facts the report lacked stay missing (its
    /// rules are not evaluated again). Exit code as diagnose's: the worst finding.
    ///
    /// Example: netdoctor diagnose wg0 --json > wg0.json; netdoctor rules eval wg0.json
    /// --rules ./my-rules --rule my.rule
    Eval {
        /// The report: a `diagnose --json` document or its `facts` object; `-` reads stdin.
        report: std::path::PathBuf,
        /// Also load this directory of rules.
        #[arg(long, value_name = "DIR", env = "NETDOCTOR_RULES")]
        rules: Option<std::path::PathBuf>,
        /// Only the rule with this id (repeatable); by default every rule.
        #[arg(long = "rule", value_name = "ID")]
        only: Vec<String>,
        /// Print the findings as JSON (the `findings` and `not_evaluated` of a report).
        #[arg(long)]
        json: bool,
    },
}

/// Options for `netdoctor drops`.
#[derive(Debug, Args)]
pub struct DropsArgs {
    /// Only this interface.
    #[arg(short, long)]
    pub interface: Option<String>,
    /// How long to count, e.g. 5 (seconds), 1m. Ctrl-C stops early and still reports.
    #[arg(
        short,
        long,
        default_value = "5s",
        value_parser = AtMost(DAY),
        allow_hyphen_values = true,
    )]
    pub duration: Duration,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Options for `netdoctor flows`.
#[derive(Debug, Args)]
pub struct FlowsArgs {
    /// Interface to watch (physical, veth, wg*, tun/tap, vxlan, bond, ...).
    pub interface: String,
    /// How long to observe, e.g. 5 (seconds), 1m, 500ms. Ctrl-C stops early and still
    /// reports.
    #[arg(
        short,
        long,
        default_value = "5s",
        value_parser = AtMost(DAY),
        allow_hyphen_values = true,
    )]
    pub duration: Duration,
    /// Print JSON instead of tables (schema in docs/json.md).
    #[arg(long)]
    pub json: bool,
    /// How many flows to show, busiest (by bytes) first.
    #[arg(long, default_value_t = 20)]
    pub top: usize,
    #[command(flatten)]
    pub dataplane: DataplaneArgs,
}

/// Data-plane options shared by every command that attaches programs.
#[derive(Debug, Args)]
pub struct DataplaneArgs {
    /// Hook that counts received packets. tc (default) never disturbs traffic; attaching
    /// native XDP makes many NIC drivers reset their rings (a brief link drop) and generic
    /// XDP copies every GSO super-packet.
    #[arg(long, value_enum, default_value_t = IngressHook::Tc)]
    pub ingress: IngressHook,
    /// XDP attach mode, when XDP is used.
    #[arg(long, value_enum, default_value_t = XdpMode::Auto)]
    pub xdp_mode: XdpMode,
    /// Attach with BPF links (nothing survives netdoctor) or legacy netlink (Linux < 6.6;
    /// detached, with the clsact qdisc netdoctor created, on exit, SIGINT and SIGTERM;
    /// leftovers of a killed netdoctor are removed at its next start).
    #[arg(long, value_enum, default_value_t = AttachMethod::Link)]
    pub attach: AttachMethod,
    /// A UDP port of a port-identified tunnel, as PORT=KIND (KIND: fastd, tinc, other, or
    /// vxlan/geneve for non-standard ports). Repeatable, at most 8. WireGuard needs no port:
    /// it is recognised by its message format.
    #[arg(long = "tunnel-port", value_name = "PORT=KIND", value_parser = parse_tunnel_port)]
    pub tunnel_ports: Vec<TunnelPort>,
    /// Flows the flow table holds, 1024 to 16777216 [default: 65536, the largest power of
    /// two within 24 MiB]. Each takes 264 bytes of kernel memory; when the table is full
    /// the least recently used flow is evicted, and evictions are counted and reported.
    #[arg(long, value_name = "N", value_parser = parse_max_flows, env = "NETDOCTOR_MAX_FLOWS")]
    pub max_flows: Option<u32>,
    /// How TCP segments of this host's own connections are accounted. sockets: counted per
    /// interface (packets, segments, sizes, retransmissions) at a fraction of the cost,
    /// each connection described by socket telemetry (`netdoctor flows` lists them under
    /// sockets); received segments only while the host does not forward. packets: each
    /// gets its flow record, like forwarded traffic. SYNs always get one (their MSS), and
    /// without socket telemetry netdoctor falls back to packets.
    #[arg(long, value_enum, default_value_t = LocalTcp::Sockets, env = "NETDOCTOR_LOCAL_TCP")]
    pub local_tcp: LocalTcp,
}

impl DataplaneArgs {
    /// The data-plane options these flags describe.
    pub fn options(&self) -> anyhow::Result<Options> {
        anyhow::ensure!(
            self.tunnel_ports.len() <= MAX_TUNNEL_PORTS,
            "--tunnel-port given {} times; at most {MAX_TUNNEL_PORTS} are supported",
            self.tunnel_ports.len()
        );
        Ok(Options {
            ingress: self.ingress,
            xdp_mode: self.xdp_mode,
            method: self.attach,
            tunnel_ports: self.tunnel_ports.clone(),
            max_flows: self.max_flows.unwrap_or(flow_table::DEFAULT_MAX_FLOWS),
            local_tcp: self.local_tcp,
            load_all_programs: false,
            ..Options::default()
        })
    }
}

fn parse_max_flows(s: &str) -> Result<u32, String> {
    let n: u32 = s
        .trim()
        .replace('_', "")
        .parse()
        .map_err(|_| format!("{s:?} is not a number of flows"))?;
    flow_table::check_max_flows(n)
}

fn parse_tunnel_port(s: &str) -> Result<TunnelPort, String> {
    let (port, kind) = s
        .split_once('=')
        .ok_or_else(|| format!("expected PORT=KIND, e.g. 10000=fastd, got {s:?}"))?;
    let port: u16 = port
        .trim()
        .parse()
        .ok()
        .filter(|p| *p != 0)
        .ok_or_else(|| format!("{port:?} is not a UDP port (1-65535)"))?;
    let encap = <Encap as clap::ValueEnum>::from_str(kind.trim(), true)
        .ok()
        .filter(|e| *e != Encap::None && *e != Encap::Wireguard && !e.is_ip_protocol())
        .ok_or_else(|| {
            format!("unknown tunnel kind {kind:?}: use fastd, tinc, vxlan, geneve or other")
        })?;
    Ok(TunnelPort { port, encap })
}

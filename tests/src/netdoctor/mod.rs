//! Running the real `netdoctor` binary inside lab namespaces and reading its
//! `--json` report.
//!
//! ```no_run
//! use netdoctor_lab::{netdoctor, PairTopology};
//! # fn main() -> anyhow::Result<()> {
//! let pair = PairTopology::new(1500)?;
//! let watch = netdoctor::Watch::start(&pair.a, &["flows", "eth0", "--duration", "60s", "--json"])?;
//! // ... traffic ...
//! let report = watch.interrupt()?; // Ctrl-C: netdoctor still reports
//! println!("{} packets in", report.counters("ingress")?.packets);
//! # Ok(())
//! # }
//! ```
//!
//! The report is read field by field with errors that name the missing or
//! mistyped key, so every test that reads a report also checks its schema.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use nix::sys::signal::Signal;
use serde_json::Value;

use crate::cmd::{self, BgProcess};
use crate::netns::Netns;

/// What netdoctor prints on stderr once its programs are attached.
pub const WATCHING: &str = "netdoctor: watching";

/// How long [`Watch::start`] waits for [`WATCHING`]. Loading runs the verifier
/// over three programs (≈ 3 s for a debug build on an idle 2-core VM); tests
/// running in parallel slow it down further.
pub const START_TIMEOUT: Duration = Duration::from_secs(45);

/// Exit code of netdoctor for usage errors, unknown interfaces and other
/// failures (Nagios "UNKNOWN").
pub const EXIT_UNKNOWN: i32 = 3;

/// The `netdoctor` binary: `$NETDOCTOR_BIN` if set, otherwise `netdoctor`
/// in the `target/<profile>/` directory the running test executable lives
/// under (test binaries are in `target/<profile>/deps/`).
///
/// Errors (telling to run `cargo build -p netdoctor`) when it does not exist.
pub fn binary() -> Result<PathBuf> {
    if let Some(path) = std::env::var_os("NETDOCTOR_BIN") {
        let path = PathBuf::from(path);
        if !path.is_file() {
            bail!(
                "NETDOCTOR_BIN={} does not name a file; build it with `cargo build -p netdoctor`",
                path.display()
            );
        }
        return Ok(path);
    }
    let exe = std::env::current_exe().context("locating the running test executable")?;
    let mut searched = Vec::new();
    for dir in exe.ancestors().skip(1) {
        let candidate = dir.join("netdoctor");
        if candidate.is_file() {
            return Ok(candidate);
        }
        searched.push(candidate);
        // Stop at `target/<profile>`: its parent is the target directory.
        if dir.parent().and_then(Path::file_name) == Some("target".as_ref()) {
            break;
        }
    }
    bail!(
        "netdoctor binary not found (looked at {}); run `cargo build -p netdoctor` first, \
         or point NETDOCTOR_BIN at it",
        searched
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// Runs netdoctor with `args` to completion inside `ns` (or in the host
/// namespace when `ns` is `None`) and returns its output, whatever the exit
/// status.
pub fn run(ns: Option<&Netns>, args: &[&str], timeout: Duration) -> Result<Output> {
    let bin = binary()?;
    let mut command = match ns {
        Some(ns) => ns.command(&bin.to_string_lossy(), args),
        None => {
            let mut c = std::process::Command::new(&bin);
            c.args(args);
            c
        }
    };
    cmd::output_timeout(&mut command, timeout)
}

/// A netdoctor running in the background inside a namespace.
#[derive(Debug)]
pub struct Watch {
    process: BgProcess,
}

impl Watch {
    /// Starts `netdoctor ARGS...` inside `ns` and waits until it printed
    /// [`WATCHING`], i.e. its programs are attached.
    pub fn start(ns: &Netns, args: &[&str]) -> Result<Watch> {
        let bin = binary()?;
        let label = format!("netdoctor {}", args.join(" "));
        let command = ns.command(&bin.to_string_lossy(), args);
        let mut process = ns.spawn_command(&label, command)?;
        process.wait_for_output(WATCHING, START_TIMEOUT)?;
        Ok(Watch { process })
    }

    /// The process (e.g. to send SIGKILL).
    pub fn process_mut(&mut self) -> &mut BgProcess {
        &mut self.process
    }

    /// Everything netdoctor wrote to stderr so far.
    pub fn stderr(&self) -> Result<String> {
        self.process.stderr()
    }

    /// Waits up to `timeout` for netdoctor to finish by itself (its
    /// `--duration` elapsed), requires exit status 0 and parses its JSON.
    pub fn wait_report(mut self, timeout: Duration) -> Result<Report> {
        let status = self.process.wait_timeout(timeout)?;
        self.report(status)
    }

    /// Sends SIGINT (Ctrl-C), which makes netdoctor report what it has seen
    /// so far, then waits for the report like [`Watch::wait_report`].
    pub fn interrupt(mut self) -> Result<Report> {
        self.process.signal(Signal::SIGINT)?;
        let status = self.process.wait_timeout(Duration::from_secs(20))?;
        self.report(status)
    }

    fn report(&self, status: std::process::ExitStatus) -> Result<Report> {
        let stdout = self.process.stdout()?;
        let stderr = self.process.stderr()?;
        if !status.success() {
            bail!(
                "`{}` exited with {status}; stderr: {} stdout: {}",
                self.process.label(),
                stderr.trim(),
                stdout.trim()
            );
        }
        Report::parse(&stdout)
            .with_context(|| format!("report of `{}`; stderr: {}", self.process.label(), stderr))
    }
}

/// Looks up `key` in a JSON object, naming it in the error.
fn field<'a>(v: &'a Value, key: &str) -> Result<&'a Value> {
    v.get(key)
        .with_context(|| format!("key {key:?} missing in {}", short(v)))
}

fn short(v: &Value) -> String {
    let s = v.to_string();
    match s.char_indices().nth(300) {
        Some((i, _)) => format!("{}...", &s[..i]),
        None => s,
    }
}

/// An unsigned integer field.
pub fn u64_field(v: &Value, key: &str) -> Result<u64> {
    field(v, key)?
        .as_u64()
        .with_context(|| format!("{key:?} is not an unsigned integer in {}", short(v)))
}

/// A string field.
pub fn str_field<'a>(v: &'a Value, key: &str) -> Result<&'a str> {
    field(v, key)?
        .as_str()
        .with_context(|| format!("{key:?} is not a string in {}", short(v)))
}

fn ip_field(v: &Value, key: &str) -> Result<IpAddr> {
    str_field(v, key)?
        .parse()
        .with_context(|| format!("{key:?} is not an IP address in {}", short(v)))
}

fn u16_field(v: &Value, key: &str) -> Result<u16> {
    u16::try_from(u64_field(v, key)?).with_context(|| format!("{key:?} exceeds u16"))
}

fn array_field<'a>(v: &'a Value, key: &str) -> Result<&'a Vec<Value>> {
    field(v, key)?
        .as_array()
        .with_context(|| format!("{key:?} is not an array in {}", short(v)))
}

/// One direction's interface counters (`counters.ingress` / `counters.egress`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirCounters {
    /// skbs/frames the hook saw.
    pub packets: u64,
    /// Wire segments (GSO-aware).
    pub segments: u64,
    /// Bytes, L2 header included.
    pub bytes: u64,
    /// Segments per size bucket.
    pub size_buckets: Vec<u64>,
    /// Non-IP frames.
    pub non_ip: u64,
    /// Frames with short headers.
    pub truncated: u64,
    /// GSO super-packets.
    pub gso_packets: u64,
    /// First fragments.
    pub fragments_first: u64,
    /// Later fragments.
    pub fragments_later: u64,
    /// DF segments above the MTU.
    pub df_over_mtu: u64,
    /// ICMP 3/4 messages.
    pub icmp_frag_needed: u64,
    /// ICMPv6 type 2 messages.
    pub icmp6_packet_too_big: u64,
    /// TCP segments of local connections that took the local path; of those, the
    /// retransmitted ones; their largest segment (0: unknown) and its packets.
    pub local_tcp_segments: u64,
    /// See `local_tcp_segments`.
    pub local_tcp_retransmits: u64,
    /// See `local_tcp_segments`.
    pub local_tcp_max_segment: u64,
    /// See `local_tcp_segments`.
    pub local_tcp_max_segment_hits: u64,
}

impl DirCounters {
    fn from_json(v: &Value) -> Result<Self> {
        Ok(DirCounters {
            packets: u64_field(v, "packets")?,
            segments: u64_field(v, "segments")?,
            bytes: u64_field(v, "bytes")?,
            size_buckets: array_field(v, "size_buckets")?
                .iter()
                .map(|b| b.as_u64().context("size bucket is not an integer"))
                .collect::<Result<_>>()?,
            non_ip: u64_field(v, "non_ip")?,
            truncated: u64_field(v, "truncated")?,
            gso_packets: u64_field(v, "gso_packets")?,
            fragments_first: u64_field(v, "fragments_first")?,
            fragments_later: u64_field(v, "fragments_later")?,
            df_over_mtu: u64_field(v, "df_over_mtu")?,
            icmp_frag_needed: u64_field(v, "icmp_frag_needed")?,
            icmp6_packet_too_big: u64_field(v, "icmp6_packet_too_big")?,
            local_tcp_segments: u64_field(v, "local_tcp_segments")?,
            local_tcp_retransmits: u64_field(v, "local_tcp_retransmits")?,
            local_tcp_max_segment: u64_field(v, "local_tcp_max_segment")?,
            local_tcp_max_segment_hits: u64_field(v, "local_tcp_max_segment_hits")?,
        })
    }
}

/// WireGuard message counts of a flow or tunnel.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WgMessages {
    /// Handshake initiations (type 1).
    pub initiation: u64,
    /// Handshake responses (type 2).
    pub response: u64,
    /// Cookie replies (type 3).
    pub cookie: u64,
    /// Transport data (type 4).
    pub data: u64,
}

impl WgMessages {
    fn from_json(v: &Value) -> Result<Self> {
        Ok(WgMessages {
            initiation: u64_field(v, "initiation")?,
            response: u64_field(v, "response")?,
            cookie: u64_field(v, "cookie")?,
            data: u64_field(v, "data")?,
        })
    }
}

/// One entry of `flows`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Flow {
    /// Interface index.
    pub ifindex: u64,
    /// "ingress" or "egress".
    pub direction: String,
    /// IP protocol number.
    pub protocol: u64,
    /// Source address.
    pub src: IpAddr,
    /// Source port.
    pub src_port: u16,
    /// Destination address.
    pub dst: IpAddr,
    /// Destination port.
    pub dst_port: u16,
    /// skbs/frames.
    pub packets: u64,
    /// Wire segments.
    pub segments: u64,
    /// Bytes, L2 header included.
    pub bytes: u64,
    /// First packet, ms since the epoch.
    pub first_seen_ms: u64,
    /// Last packet, ms since the epoch.
    pub last_seen_ms: u64,
    /// OR of the TCP flags seen.
    pub tcp_flags: u64,
    /// MSS option of the last SYN (`null` when none).
    pub syn_mss: Option<u64>,
    /// Largest IP length of one segment.
    pub max_segment: u64,
    /// TCP segments with already-seen data.
    pub retransmits: u64,
    /// Encapsulation name ("none", "wireguard", ...).
    pub encap: String,
    /// WireGuard message counts.
    pub wireguard: WgMessages,
}

impl Flow {
    fn from_json(v: &Value) -> Result<Self> {
        let syn_mss = field(v, "syn_mss")?;
        Ok(Flow {
            ifindex: u64_field(v, "ifindex")?,
            direction: str_field(v, "direction")?.to_owned(),
            protocol: u64_field(v, "protocol")?,
            src: ip_field(v, "src")?,
            src_port: u16_field(v, "src_port")?,
            dst: ip_field(v, "dst")?,
            dst_port: u16_field(v, "dst_port")?,
            packets: u64_field(v, "packets")?,
            segments: u64_field(v, "segments")?,
            bytes: u64_field(v, "bytes")?,
            first_seen_ms: u64_field(v, "first_seen_ms")?,
            last_seen_ms: u64_field(v, "last_seen_ms")?,
            tcp_flags: u64_field(v, "tcp_flags")?,
            syn_mss: if syn_mss.is_null() {
                None
            } else {
                Some(
                    syn_mss
                        .as_u64()
                        .context("syn_mss is neither null nor a number")?,
                )
            },
            max_segment: u64_field(v, "max_segment")?,
            retransmits: u64_field(v, "retransmits")?,
            encap: str_field(v, "encap")?.to_owned(),
            wireguard: WgMessages::from_json(field(v, "wireguard")?)?,
        })
    }

    /// Retransmitted share of the segments, 0.0 to 1.0.
    pub fn retransmit_ratio(&self) -> f64 {
        if self.segments == 0 {
            0.0
        } else {
            self.retransmits as f64 / self.segments as f64
        }
    }

    /// One line for test output.
    pub fn describe(&self) -> String {
        format!(
            "{} proto {} {}:{} -> {}:{} pkts {} segs {} bytes {} mss {:?} maxseg {} retrans {} encap {} wg {:?}",
            self.direction,
            self.protocol,
            self.src,
            self.src_port,
            self.dst,
            self.dst_port,
            self.packets,
            self.segments,
            self.bytes,
            self.syn_mss,
            self.max_segment,
            self.retransmits,
            self.encap,
            self.wireguard
        )
    }
}

/// One entry of `tunnels`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tunnel {
    /// "ingress" or "egress".
    pub direction: String,
    /// Encapsulation name.
    pub encap: String,
    /// Outer source.
    pub src: IpAddr,
    /// Outer source port.
    pub src_port: u16,
    /// Outer destination.
    pub dst: IpAddr,
    /// Outer destination port.
    pub dst_port: u16,
    /// Outer packets.
    pub packets: u64,
    /// Outer bytes.
    pub bytes: u64,
    /// WireGuard message counts.
    pub wireguard: WgMessages,
}

impl Tunnel {
    fn from_json(v: &Value) -> Result<Self> {
        Ok(Tunnel {
            direction: str_field(v, "direction")?.to_owned(),
            encap: str_field(v, "encap")?.to_owned(),
            src: ip_field(v, "src")?,
            src_port: u16_field(v, "src_port")?,
            dst: ip_field(v, "dst")?,
            dst_port: u16_field(v, "dst_port")?,
            packets: u64_field(v, "packets")?,
            bytes: u64_field(v, "bytes")?,
            wireguard: WgMessages::from_json(field(v, "wireguard")?)?,
        })
    }
}

/// One entry of `too_big`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TooBig {
    /// "ingress" or "egress".
    pub direction: String,
    /// Who sent the ICMP message.
    pub from: IpAddr,
    /// Announced MTU.
    pub mtu: u64,
    /// Messages seen.
    pub count: u64,
    /// Protocol of the quoted packet.
    pub protocol: u64,
    /// Quoted source.
    pub src: IpAddr,
    /// Quoted destination.
    pub dst: IpAddr,
}

impl TooBig {
    fn from_json(v: &Value) -> Result<Self> {
        u64_field(v, "last_seen_ms")?;
        u16_field(v, "src_port")?;
        u16_field(v, "dst_port")?;
        Ok(TooBig {
            direction: str_field(v, "direction")?.to_owned(),
            from: ip_field(v, "from")?,
            mtu: u64_field(v, "mtu")?,
            count: u64_field(v, "count")?,
            protocol: u64_field(v, "protocol")?,
            src: ip_field(v, "src")?,
            dst: ip_field(v, "dst")?,
        })
    }
}

/// A parsed `netdoctor flows --json` document. Parsing checks every
/// documented key and type.
#[derive(Debug, Clone)]
pub struct Report {
    /// The raw document.
    pub json: Value,
    /// `counters.ingress`.
    pub ingress: DirCounters,
    /// `counters.egress`.
    pub egress: DirCounters,
    /// `flows`.
    pub flows: Vec<Flow>,
    /// `flows_total`.
    pub flows_total: u64,
    /// `tunnels`.
    pub tunnels: Vec<Tunnel>,
    /// `too_big`.
    pub too_big: Vec<TooBig>,
    /// `duration_s`.
    pub duration_s: f64,
}

impl Report {
    /// Parses and schema-checks netdoctor's JSON output.
    pub fn parse(stdout: &str) -> Result<Report> {
        let json: Value = serde_json::from_str(stdout)
            .with_context(|| format!("netdoctor output is not one JSON document: {stdout}"))?;
        let iface = field(&json, "interface")?;
        str_field(iface, "name")?;
        u64_field(iface, "index")?;
        u64_field(iface, "mtu")?;
        str_field(iface, "kind")?;
        str_field(iface, "link")?;
        field(iface, "up")?
            .as_bool()
            .context("interface.up is not a boolean")?;
        let hooks = field(&json, "hooks")?;
        for key in ["ingress", "egress", "method", "local_tcp"] {
            str_field(hooks, key)?;
        }
        let buckets = array_field(&json, "size_buckets")?;
        let counters = field(&json, "counters")?;
        let ingress = DirCounters::from_json(field(counters, "ingress")?)?;
        let egress = DirCounters::from_json(field(counters, "egress")?)?;
        for (dir, c) in [("ingress", &ingress), ("egress", &egress)] {
            if c.size_buckets.len() != buckets.len() {
                bail!(
                    "counters.{dir}.size_buckets has {} entries, size_buckets {} labels",
                    c.size_buckets.len(),
                    buckets.len()
                );
            }
        }
        let report = Report {
            ingress,
            egress,
            flows: array_field(&json, "flows")?
                .iter()
                .map(Flow::from_json)
                .collect::<Result<_>>()?,
            flows_total: u64_field(&json, "flows_total")?,
            tunnels: array_field(&json, "tunnels")?
                .iter()
                .map(Tunnel::from_json)
                .collect::<Result<_>>()?,
            too_big: array_field(&json, "too_big")?
                .iter()
                .map(TooBig::from_json)
                .collect::<Result<_>>()?,
            duration_s: field(&json, "duration_s")?
                .as_f64()
                .context("duration_s is not a number")?,
            json,
        };
        Ok(report)
    }

    /// `interface.<key>` as a string (name, kind, link).
    pub fn interface_str(&self, key: &str) -> Result<&str> {
        str_field(field(&self.json, "interface")?, key)
    }

    /// `interface.<key>` as a number (index, mtu).
    pub fn interface_u64(&self, key: &str) -> Result<u64> {
        u64_field(field(&self.json, "interface")?, key)
    }

    /// `hooks.<key>`.
    pub fn hook(&self, key: &str) -> Result<&str> {
        str_field(field(&self.json, "hooks")?, key)
    }

    /// The counters of `direction` ("ingress" or "egress").
    pub fn counters(&self, direction: &str) -> Result<&DirCounters> {
        match direction {
            "ingress" => Ok(&self.ingress),
            "egress" => Ok(&self.egress),
            other => bail!("no direction {other:?}"),
        }
    }

    /// All flows, one per line, for assertion messages.
    pub fn describe_flows(&self) -> String {
        self.flows
            .iter()
            .map(Flow::describe)
            .collect::<Vec<_>>()
            .join("\n")
    }
}

//! `iperf3` in a namespace: a background server, a client whose JSON report is parsed.

use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde_json::Value;

use crate::cmd::{self, BgProcess};
use crate::netns::Netns;

/// A background `iperf3 -s` in a namespace; stopped on `Drop`.
///
/// One iperf3 server serves one client test at a time ("server is busy"
/// otherwise): use one server (port) per concurrent client.
#[derive(Debug)]
pub struct Iperf3Server {
    port: u16,
    process: BgProcess,
}

impl Iperf3Server {
    /// Starts `iperf3 -s -p PORT` (serves consecutive tests until dropped)
    /// and waits until the port listens.
    pub fn start(ns: &Netns, port: u16) -> Result<Iperf3Server> {
        Self::start_with(ns, port, false)
    }

    /// Starts `iperf3 -s -1 -p PORT`: exits after one test.
    pub fn start_one_off(ns: &Netns, port: u16) -> Result<Iperf3Server> {
        Self::start_with(ns, port, true)
    }

    fn start_with(ns: &Netns, port: u16, one_off: bool) -> Result<Iperf3Server> {
        let p = port.to_string();
        let mut argv = vec!["iperf3", "-s", "-p", &p];
        if one_off {
            argv.push("-1");
        }
        let mut server = Iperf3Server {
            port,
            process: ns.spawn(&argv)?,
        };
        let filter = format!("sport = :{port}");
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let listening = ns.run(&["ss", "-Htln", &filter])?;
            if !listening.trim().is_empty() {
                return Ok(server);
            }
            if let Some(status) = server.process.try_status()? {
                bail!(
                    "iperf3 server on port {port} in {} exited ({status}): {}",
                    ns.name(),
                    server.process.stderr().unwrap_or_default().trim()
                );
            }
            if Instant::now() >= deadline {
                bail!(
                    "iperf3 server on port {port} in {} not listening after 5 s",
                    ns.name()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Listening TCP/UDP port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server process (its stdout holds iperf3's server-side text log).
    pub fn process_mut(&mut self) -> &mut BgProcess {
        &mut self.process
    }
}

/// Options of [`iperf3_client`]. Build with [`Iperf3Opts::new`] and adjust
/// the public fields.
#[derive(Debug, Clone, PartialEq)]
pub struct Iperf3Opts {
    /// Server address (`-c`).
    pub server: String,
    /// Server port (`-p`, default 5201).
    pub port: u16,
    /// Test length in seconds (`-t`, default 2).
    pub duration_secs: u32,
    /// TCP congestion control (`-C`, e.g. `"cubic"`, `"bbr"`); default: system's.
    pub congestion: Option<String>,
    /// Server sends, client receives (`-R`).
    pub reverse: bool,
    /// Parallel streams (`-P`, default 1).
    pub parallel: u32,
    /// UDP instead of TCP (`-u`).
    pub udp: bool,
    /// Target bitrate (`-b`, e.g. `"100M"`); iperf3 defaults to 1M for UDP.
    pub bitrate: Option<String>,
    /// TCP maximum segment size (`-M`).
    pub mss: Option<u32>,
    /// Source address to bind (`-B`).
    pub bind: Option<String>,
    /// Further raw arguments appended as-is.
    pub extra_args: Vec<String>,
}

impl Iperf3Opts {
    /// Defaults: port 5201, 2 s, TCP, one stream, system congestion control.
    pub fn new(server: &str) -> Self {
        Iperf3Opts {
            server: server.to_owned(),
            port: 5201,
            duration_secs: 2,
            congestion: None,
            reverse: false,
            parallel: 1,
            udp: false,
            bitrate: None,
            mss: None,
            bind: None,
            extra_args: Vec::new(),
        }
    }

    fn args(&self) -> Vec<String> {
        let mut args: Vec<String> = [
            "-J",
            "-c",
            &self.server,
            "-p",
            &self.port.to_string(),
            "-t",
            &self.duration_secs.to_string(),
            "-P",
            &self.parallel.max(1).to_string(),
            "--connect-timeout",
            "3000",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let mut opt = |flag: &str, value: &Option<String>| {
            if let Some(v) = value {
                args.push(flag.to_owned());
                args.push(v.clone());
            }
        };
        opt("-C", &self.congestion);
        opt("-b", &self.bitrate);
        opt("-M", &self.mss.map(|m| m.to_string()));
        opt("-B", &self.bind);
        if self.reverse {
            args.push("-R".to_owned());
        }
        if self.udp {
            args.push("-u".to_owned());
        }
        args.extend(self.extra_args.iter().cloned());
        args
    }
}

/// Parsed result of an iperf3 client run (`-J`).
#[derive(Debug, Clone, PartialEq)]
pub struct Iperf3Report {
    /// Bytes sent by the sender (`end.sum_sent.bytes`; UDP: `end.sum.bytes`).
    pub sent_bytes: u64,
    /// Bytes received by the receiver (`end.sum_received.bytes`; UDP: `end.sum.bytes`).
    pub received_bytes: u64,
    /// Sender throughput in bit/s.
    pub sent_bits_per_second: f64,
    /// Receiver throughput in bit/s (the figure to compare).
    pub received_bits_per_second: f64,
    /// TCP retransmitted segments of the sender (`end.sum_sent.retransmits`);
    /// `None` for UDP or when iperf3 did not report it.
    pub retransmits: Option<u64>,
    /// UDP lost datagrams (`end.sum.lost_packets`), `None` for TCP.
    pub lost_packets: Option<u64>,
    /// Sender's congestion control (`end.sender_tcp_congestion`), TCP only.
    pub sender_congestion: Option<String>,
    /// The whole JSON document for anything else.
    pub json: Value,
}

/// Runs an iperf3 client inside `ns` and parses its JSON output. Errors if
/// iperf3 reports an error (e.g. connection refused) or exceeds the test
/// duration by more than 20 s.
pub fn iperf3_client(ns: &Netns, opts: &Iperf3Opts) -> Result<Iperf3Report> {
    let args = opts.args();
    let mut command = ns.command("iperf3", &args);
    let line = cmd::describe(&command);
    let timeout = Duration::from_secs(u64::from(opts.duration_secs) + 20);
    let out = cmd::output_timeout(&mut command, timeout)?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report = parse_iperf3(&stdout).with_context(|| {
        format!(
            "`{line}` in {} ({}); stderr: {}",
            ns.name(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )
    })?;
    if !out.status.success() {
        bail!("`{line}` in {} failed ({})", ns.name(), out.status);
    }
    Ok(report)
}

/// Parses `iperf3 -J` client output into an [`Iperf3Report`]; an `"error"`
/// member becomes an error.
pub fn parse_iperf3(json: &str) -> Result<Iperf3Report> {
    let v: Value = serde_json::from_str(json).context("iperf3 output is not JSON")?;
    if let Some(err) = v.get("error").and_then(Value::as_str) {
        bail!("iperf3 error: {err}");
    }
    let end = v.get("end").context("iperf3 JSON has no `end`")?;
    let sum = end.get("sum");
    let sent = end
        .get("sum_sent")
        .or(sum)
        .context("iperf3 JSON has no sum_sent/sum")?;
    let received = end
        .get("sum_received")
        .or(sum)
        .context("iperf3 JSON has no sum_received/sum")?;
    let u = |o: &Value, k: &str| o.get(k).and_then(Value::as_u64);
    let f = |o: &Value, k: &str| o.get(k).and_then(Value::as_f64).unwrap_or(0.0);
    Ok(Iperf3Report {
        sent_bytes: u(sent, "bytes").unwrap_or(0),
        received_bytes: u(received, "bytes").unwrap_or(0),
        sent_bits_per_second: f(sent, "bits_per_second"),
        received_bits_per_second: f(received, "bits_per_second"),
        retransmits: u(sent, "retransmits"),
        lost_packets: sum.and_then(|s| u(s, "lost_packets")),
        sender_congestion: end
            .get("sender_tcp_congestion")
            .and_then(Value::as_str)
            .map(str::to_owned),
        json: v,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iperf3_error_is_error() {
        assert!(parse_iperf3(
            r#"{"start":{},"intervals":[],"end":{},"error":"unable to connect"}"#
        )
        .is_err());
    }
}

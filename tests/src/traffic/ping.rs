//! `ping` in a namespace, its summary parsed; waiting until a destination answers.

use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::cmd;
use crate::netns::Netns;

/// Options of [`ping`].
#[derive(Debug, Clone, PartialEq)]
pub struct PingOpts {
    /// Echo requests to send (`-c`, default 3).
    pub count: u32,
    /// Seconds between requests (`-i`, default 0.2).
    pub interval_secs: f64,
    /// Payload size in bytes (`-s`; IPv4 packet = size + 28). Default: ping's 56.
    pub size: Option<u32>,
    /// Set DF / prohibit fragmentation (`-M do`), default false.
    pub dont_fragment: bool,
    /// Seconds to wait for the last reply (`-W`, default 1).
    pub reply_timeout_secs: u32,
}

impl Default for PingOpts {
    fn default() -> Self {
        PingOpts {
            count: 3,
            interval_secs: 0.2,
            size: None,
            dont_fragment: false,
            reply_timeout_secs: 1,
        }
    }
}

/// Parsed summary of a `ping` run.
#[derive(Debug, Clone, PartialEq)]
pub struct PingReport {
    /// Echo requests sent.
    pub transmitted: u32,
    /// Echo replies received.
    pub received: u32,
    /// Local/ICMP errors reported (`+N errors`), e.g. "message too long" with DF.
    pub errors: u32,
    /// Average round-trip time in ms, when any reply arrived.
    pub rtt_avg_ms: Option<f64>,
    /// Full ping output (stdout then stderr).
    pub output: String,
}

impl PingReport {
    /// True when at least one request was sent and every one was answered.
    pub fn all_received(&self) -> bool {
        self.transmitted > 0 && self.received == self.transmitted
    }

    /// Lost requests in percent (100 when nothing was sent).
    pub fn loss_percent(&self) -> f64 {
        if self.transmitted == 0 {
            100.0
        } else {
            100.0 * f64::from(self.transmitted - self.received.min(self.transmitted))
                / f64::from(self.transmitted)
        }
    }
}

/// Pings `dst` (IPv4 or IPv6) from inside `ns`. Lost replies are *not* an
/// error (inspect the report); an error means ping printed no summary (e.g.
/// "Network is unreachable") or could not run.
pub fn ping(ns: &Netns, dst: &str, opts: &PingOpts) -> Result<PingReport> {
    let count = opts.count.to_string();
    let interval = format!("{}", opts.interval_secs);
    let wait = opts.reply_timeout_secs.to_string();
    let size = opts.size.map(|s| s.to_string());
    let mut args: Vec<&str> = vec!["-n", "-c", &count, "-i", &interval, "-W", &wait];
    if let Some(size) = &size {
        args.extend(["-s", size.as_str()]);
    }
    if opts.dont_fragment {
        args.extend(["-M", "do"]);
    }
    args.push(dst);
    let budget = Duration::from_secs_f64(
        f64::from(opts.count) * opts.interval_secs.max(0.0) + f64::from(opts.reply_timeout_secs),
    ) + Duration::from_secs(10);
    let mut command = ns.command("ping", &args);
    let line = cmd::describe(&command);
    let out = cmd::output_timeout(&mut command, budget)?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    parse_ping(&text).with_context(|| format!("`{line}` in {}: {}", ns.name(), text.trim()))
}

/// Parses ping's summary lines (`N packets transmitted, M received, [+E
/// errors,] ...` and `rtt min/avg/max/mdev = a/b/c/d ms`).
pub fn parse_ping(output: &str) -> Result<PingReport> {
    let summary = output
        .lines()
        .find(|l| l.contains("packets transmitted"))
        .context("no ping summary line")?;
    let mut report = PingReport {
        transmitted: 0,
        received: 0,
        errors: 0,
        rtt_avg_ms: None,
        output: output.to_owned(),
    };
    for part in summary.split(',') {
        let mut words = part.split_whitespace();
        let (Some(num), Some(what)) = (words.next(), words.next()) else {
            continue;
        };
        let parse = |n: &str| n.trim_start_matches('+').parse::<u32>().ok();
        match what {
            "packets" => report.transmitted = parse(num).context("bad transmitted count")?,
            "received" => report.received = parse(num).context("bad received count")?,
            "errors" => report.errors = parse(num).context("bad error count")?,
            _ => {}
        }
    }
    report.rtt_avg_ms = output
        .lines()
        .find_map(|l| l.strip_prefix("rtt min/avg/max/mdev = "))
        .and_then(|v| v.split('/').nth(1))
        .and_then(|avg| avg.parse::<f64>().ok());
    Ok(report)
}

/// Pings `dst` once per attempt from `ns` until a reply arrives or `timeout`
/// expires (then errors with the last ping output).
pub fn wait_for_ping(ns: &Netns, dst: &str, timeout: Duration) -> Result<()> {
    let deadline = Instant::now() + timeout;
    let opts = PingOpts {
        count: 1,
        ..PingOpts::default()
    };
    loop {
        let last = match ping(ns, dst, &opts) {
            Ok(r) if r.received > 0 => return Ok(()),
            Ok(r) => r.output,
            Err(e) => format!("{e:#}"),
        };
        if Instant::now() >= deadline {
            bail!(
                "no reply from {dst} in {} within {timeout:?}: {}",
                ns.name(),
                last.trim()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_ping_with_errors() -> Result<()> {
        let out = "PING 10.0.0.1 (10.0.0.1) 1472(1500) bytes of data.\n\
                   ping: local error: message too long, mtu=1400\n\n\
                   --- 10.0.0.1 ping statistics ---\n\
                   3 packets transmitted, 0 received, +3 errors, 100% packet loss, time 2046ms\n";
        let r = parse_ping(out)?;
        assert_eq!((r.transmitted, r.received, r.errors), (3, 0, 3));
        assert_eq!(r.rtt_avg_ms, None);
        assert!((r.loss_percent() - 100.0).abs() < f64::EPSILON);
        Ok(())
    }

    #[test]
    fn parses_ping_ok() -> Result<()> {
        let out = "3 packets transmitted, 3 received, 0% packet loss, time 402ms\n\
                   rtt min/avg/max/mdev = 0.030/0.041/0.052/0.009 ms\n";
        let r = parse_ping(out)?;
        assert!(r.all_received());
        assert_eq!(r.rtt_avg_ms, Some(0.041));
        Ok(())
    }
}

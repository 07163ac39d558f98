//! `ss -tin`: what it says about each socket, parsed.

use std::net::SocketAddr;

use anyhow::{Context, Result};
use netdoctor_lab::Netns;

/// What `ss -tin` says about one socket.
#[derive(Debug, Clone)]
pub(crate) struct SsInfo {
    pub(crate) local: SocketAddr,
    pub(crate) words: Vec<String>,
    pub(crate) srtt_us: u64,
    pub(crate) cwnd: u64,
    /// `retrans:OUT/TOTAL` (absent means 0).
    pub(crate) total_retrans: u64,
    pub(crate) backoff: u64,
    pub(crate) bytes_acked: u64,
    pub(crate) data_segs_out: u64,
}

impl SsInfo {
    pub(crate) fn has_word(&self, w: &str) -> bool {
        self.words.iter().any(|x| x == w)
    }
}

/// Parses `ss -Htin` output: one line per socket (state, queues, local, peer) followed
/// by an indented line of `key:value` words.
pub(crate) fn parse_ss(text: &str) -> Result<Vec<SsInfo>> {
    let mut out = Vec::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        if line.trim().is_empty() || line.starts_with(char::is_whitespace) {
            continue;
        }
        let cols: Vec<&str> = line.split_whitespace().collect();
        let local: SocketAddr = cols
            .get(3)
            .and_then(|c| c.parse().ok())
            .with_context(|| format!("no local address in ss line {line:?}"))?;
        let details = match lines.peek() {
            Some(next) if next.starts_with(char::is_whitespace) => lines.next().unwrap_or(""),
            _ => "",
        };
        let words: Vec<String> = details.split_whitespace().map(str::to_owned).collect();
        let value = |key: &str| -> Option<&str> {
            words
                .iter()
                .find_map(|w| w.strip_prefix(key)?.strip_prefix(':'))
        };
        let num = |key: &str| -> u64 { value(key).and_then(|v| v.parse().ok()).unwrap_or(0) };
        let srtt_ms: f64 = value("rtt")
            .and_then(|v| v.split('/').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0);
        let total_retrans = value("retrans")
            .and_then(|v| v.split('/').nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        out.push(SsInfo {
            local,
            srtt_us: (srtt_ms * 1000.0).round() as u64,
            cwnd: num("cwnd"),
            total_retrans,
            backoff: num("backoff"),
            bytes_acked: num("bytes_acked"),
            data_segs_out: num("data_segs_out"),
            words,
        });
    }
    Ok(out)
}

/// `ss -Htin` for the socket with local port `port`, run inside `ns`.
pub(crate) fn ss_socket(ns: &Netns, port: u16) -> Result<Option<SsInfo>> {
    let text = ns.run(&["ss", "-Htin", &format!("sport = :{port}")])?;
    Ok(parse_ss(&text)?
        .into_iter()
        .find(|s| s.local.port() == port))
}

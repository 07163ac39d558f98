//! What limits each connection, as the `flows` and `diagnose` texts say it: a short cell
//! ("receiver window 91 %") and, for a window or buffer, the arithmetic behind it.

use crate::facts::FlowFacts;
use crate::kernel::sockets::rates::SocketRow;

/// One connection's limit, from a socket row (`flows`) or the flow facts (`diagnose`).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct LimitView {
    /// "local -> remote".
    pub(super) name: String,
    /// The remote host.
    pub(super) remote: String,
    pub(super) limit: String,
    pub(super) share: f64,
    pub(super) retransmits: u64,
    pub(super) srtt_ms: f64,
    pub(super) throughput_bps: f64,
    pub(super) window_bytes: i64,
    pub(super) ceiling_bps: f64,
    pub(super) path_rate_bps: f64,
    pub(super) needed_window_bytes: i64,
}

impl From<&SocketRow> for LimitView {
    fn from(r: &SocketRow) -> Self {
        let l = &r.limits;
        LimitView {
            name: format!("{} -> {}", r.socket.local, r.socket.remote),
            remote: r.socket.remote.ip().to_string(),
            limit: l.limit.to_string(),
            share: l.limit_share,
            retransmits: r.retransmits,
            srtt_ms: f64::from(r.socket.srtt_us) / 1000.0,
            throughput_bps: r.throughput_bps,
            window_bytes: l.window_bytes,
            ceiling_bps: l.ceiling_bps,
            path_rate_bps: l.path_rate_bps,
            needed_window_bytes: l.needed_window_bytes,
        }
    }
}

impl From<&FlowFacts> for LimitView {
    fn from(f: &FlowFacts) -> Self {
        LimitView {
            name: f.name.clone(),
            remote: f.remote_host.clone(),
            limit: f.limit.clone(),
            share: f.limit_share,
            retransmits: u64::try_from(f.retransmits).unwrap_or(0),
            srtt_ms: f.srtt_ms,
            throughput_bps: f.throughput_bps,
            window_bytes: f.window_bytes,
            ceiling_bps: f.ceiling_bps,
            path_rate_bps: f.path_rate_bps,
            needed_window_bytes: f.needed_window_bytes,
        }
    }
}

fn words(limit: &str) -> &str {
    match limit {
        "receiver_window" => "receiver window",
        "send_buffer" => "send buffer",
        "unknown" => "too little traffic",
        "" => "n/a",
        other => other,
    }
}

fn kib(bytes: i64) -> String {
    format!("{:.0} KiB", bytes as f64 / 1024.0)
}

fn ms(v: f64) -> String {
    if v < 1.0 {
        format!("{v:.2} ms")
    } else {
        format!("{v:.1} ms")
    }
}

fn mbit(bps: f64) -> String {
    format!("{:.1} Mbit/s", bps / 1e6)
}

impl LimitView {
    /// "receiver window 91 %", "congestion 88 % (loss)", "too little traffic".
    pub(super) fn cell(&self) -> String {
        match self.limit.as_str() {
            "unknown" | "" => words(&self.limit).to_owned(),
            l => format!(
                "{} {:.0} %{}",
                words(l),
                self.share * 100.0,
                if l == "congestion" && self.retransmits > 0 {
                    " (loss)"
                } else {
                    ""
                }
            ),
        }
    }

    /// For a window or buffer with a ceiling, what it allows against what the path carried.
    pub(super) fn detail(&self) -> Option<String> {
        if self.ceiling_bps <= 0.0 || self.window_bytes <= 0 {
            return None;
        }
        let what = if self.limit == "send_buffer" {
            "of data in the send buffer"
        } else {
            "of receive window"
        };
        let mut out = format!(
            "{} {what} per {} round trip allow at most {}; the path to {} carried {}",
            kib(self.window_bytes),
            ms(self.srtt_ms),
            mbit(self.ceiling_bps),
            self.remote,
            mbit(self.path_rate_bps)
        );
        if self.needed_window_bytes > self.window_bytes {
            out.push_str(&format!(", which needs {}", kib(self.needed_window_bytes)));
        }
        Some(out)
    }
}

/// The text of a diagnosis' connections: a count per limit, then the busiest `top`, each
/// with its limit and the arithmetic of a window.
pub(super) fn connection_lines(flows: &[FlowFacts], top: usize) -> Vec<String> {
    if flows.is_empty() {
        return Vec::new();
    }
    let mut counts: std::collections::BTreeMap<&str, usize> = Default::default();
    for f in flows {
        *counts.entry(words(&f.limit)).or_default() += 1;
    }
    let by: Vec<String> = counts.iter().map(|(l, n)| format!("{n} {l}")).collect();
    let mut out = vec![format!(
        "  connections: {} local, limited by: {}",
        flows.len(),
        by.join(", ")
    )];
    let mut busiest: Vec<&FlowFacts> = flows.iter().collect();
    busiest.sort_by(|a, b| b.throughput_bps.total_cmp(&a.throughput_bps));
    for f in busiest.into_iter().take(top) {
        let v = LimitView::from(f);
        let mut line = format!("    {}  {}  {}", v.name, mbit(v.throughput_bps), v.cell());
        if let Some(d) = v.detail() {
            line.push_str(&format!(" ({d})"));
        }
        out.push(line);
    }
    if flows.len() > top {
        out.push(format!(
            "    … and {} more (--json has them all)",
            flows.len() - top
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window() -> FlowFacts {
        FlowFacts {
            name: "10.0.0.1:40001 -> 10.0.0.2:5201".into(),
            remote_host: "10.0.0.2".into(),
            limit: "receiver_window".into(),
            limit_share: 0.914,
            srtt_ms: 40.0,
            throughput_bps: 13e6,
            window_bytes: 65_536,
            ceiling_bps: 13_107_200.0,
            path_rate_bps: 52_428_800.0,
            needed_window_bytes: 262_144,
            ..FlowFacts::default()
        }
    }

    #[test]
    fn a_window_says_what_it_allows_and_what_the_path_needs() {
        let v = LimitView::from(&window());
        assert_eq!(v.cell(), "receiver window 91 %");
        assert_eq!(
            v.detail().as_deref(),
            Some(
                "64 KiB of receive window per 40.0 ms round trip allow at most 13.1 Mbit/s; \
                 the path to 10.0.0.2 carried 52.4 Mbit/s, which needs 256 KiB"
            )
        );
        let lossy = FlowFacts {
            limit: "congestion".into(),
            retransmits: 3,
            window_bytes: -1,
            ceiling_bps: -1.0,
            ..window()
        };
        let v = LimitView::from(&lossy);
        assert_eq!(
            (v.cell(), v.detail()),
            ("congestion 91 % (loss)".into(), None)
        );
        let quiet = FlowFacts {
            limit: "unknown".into(),
            ..lossy
        };
        assert_eq!(LimitView::from(&quiet).cell(), "too little traffic");
    }

    #[test]
    fn a_diagnosis_counts_limits_and_lists_the_busiest() {
        let app = FlowFacts {
            name: "10.0.0.1:40009 -> 10.0.0.3:443".into(),
            limit: "application".into(),
            limit_share: 0.99,
            throughput_bps: 1e6,
            ..FlowFacts::default()
        };
        let lines = connection_lines(&[app.clone(), window(), window()], 2);
        assert_eq!(
            lines[0],
            "  connections: 3 local, limited by: 1 application, 2 receiver window"
        );
        assert!(lines[1].starts_with(
            "    10.0.0.1:40001 -> 10.0.0.2:5201  13.0 Mbit/s  receiver window 91 % (64 KiB"
        ));
        assert_eq!(lines.len(), 4);
        assert_eq!(lines[3], "    … and 1 more (--json has them all)");
        assert!(connection_lines(&[], 5).is_empty());
    }
}

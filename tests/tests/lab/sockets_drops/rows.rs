//! The `sockets` rows of `netdoctor flows --json`, every documented key checked, and the
//! `congestion_control` aggregates of the same report.

use std::net::SocketAddr;

use anyhow::{bail, ensure, Context, Result};
use netdoctor_lab::netdoctor::{str_field, u64_field, Report};
use serde_json::Value;

use crate::sockets_drops::helpers::{bool_field, f64_field, ip};

/// One entry of `sockets`.
#[derive(Debug, Clone)]
pub(crate) struct Row {
    pub(crate) local: SocketAddr,
    pub(crate) remote: SocketAddr,
    pub(crate) state: String,
    ifindex: u64,
    pub(crate) cc: String,
    pub(crate) ca_state: String,
    srtt_us: u64,
    cwnd: u64,
    pub(crate) total_retrans: u64,
    pub(crate) data_segs_out: u64,
    pub(crate) mss: u64,
    pub(crate) pmtu: u64,
    pub(crate) bytes_acked: u64,
    pub(crate) closed: bool,
    pub(crate) duration_ms: Option<u64>,
    pub(crate) data_segs_sent: u64,
    pub(crate) retransmits: u64,
    pub(crate) retrans_ratio: f64,
    pub(crate) full_size_retransmits: u64,
    pub(crate) small_retransmits: u64,
    pub(crate) throughput_bps: f64,
}

fn addr_field(v: &Value, key: &str) -> Result<SocketAddr> {
    str_field(v, key)?
        .parse()
        .with_context(|| format!("{key:?} is not ADDR:PORT in {v}"))
}

impl Row {
    fn from_json(v: &Value) -> Result<Row> {
        // Keys documented but not used by the assertions: present and typed.
        for key in [
            "rttvar_us",
            "min_rtt_us",
            "ssthresh",
            "lost",
            "retrans_out",
            "segs_out",
            "reordering",
            "delivery_rate_bps",
            "bytes_received",
            "bytes_sent",
            "bytes_retrans",
        ] {
            u64_field(v, key)?;
        }
        bool_field(v, "mtu_probing")?;
        f64_field(v, "retransmits_per_s")?;
        let duration = v
            .get("duration_ms")
            .context("key \"duration_ms\" missing")?;
        Ok(Row {
            local: addr_field(v, "local")?,
            remote: addr_field(v, "remote")?,
            state: str_field(v, "state")?.to_owned(),
            ifindex: u64_field(v, "ifindex")?,
            cc: str_field(v, "cc")?.to_owned(),
            ca_state: str_field(v, "ca_state")?.to_owned(),
            srtt_us: u64_field(v, "srtt_us")?,
            cwnd: u64_field(v, "cwnd")?,
            total_retrans: u64_field(v, "total_retrans")?,
            data_segs_out: u64_field(v, "data_segs_out")?,
            mss: u64_field(v, "mss")?,
            pmtu: u64_field(v, "pmtu")?,
            bytes_acked: u64_field(v, "bytes_acked")?,
            closed: bool_field(v, "closed")?,
            duration_ms: if duration.is_null() {
                None
            } else {
                Some(
                    duration
                        .as_u64()
                        .context("duration_ms neither null nor u64")?,
                )
            },
            data_segs_sent: u64_field(v, "data_segs_sent")?,
            retransmits: u64_field(v, "retransmits")?,
            retrans_ratio: f64_field(v, "retrans_ratio")?,
            full_size_retransmits: u64_field(v, "full_size_retransmits")?,
            small_retransmits: u64_field(v, "small_retransmits")?,
            throughput_bps: f64_field(v, "throughput_bps")?,
        })
    }

    pub(crate) fn describe(&self) -> String {
        format!(
            "{} -> {} {} if {} cc {} ca {} closed {} dur {:?} srtt {}us cwnd {} mss {} pmtu {} \
             total_retrans {} data_segs_out {} | window: segs {} retrans {} ratio {:.5} \
             full {} small {} acked {} B {:.1} Mbit/s",
            self.local,
            self.remote,
            self.state,
            self.ifindex,
            self.cc,
            self.ca_state,
            self.closed,
            self.duration_ms,
            self.srtt_us,
            self.cwnd,
            self.mss,
            self.pmtu,
            self.total_retrans,
            self.data_segs_out,
            self.data_segs_sent,
            self.retransmits,
            self.retrans_ratio,
            self.full_size_retransmits,
            self.small_retransmits,
            self.bytes_acked,
            self.throughput_bps / 1e6
        )
    }
}

/// `sockets` of a flows report, plus checks every row must pass: attributed to the
/// watched interface.
pub(crate) fn rows(report: &Report) -> Result<Vec<Row>> {
    let index = report.interface_u64("index")?;
    let rows: Vec<Row> = report
        .json
        .get("sockets")
        .and_then(Value::as_array)
        .context("`sockets` missing or not an array")?
        .iter()
        .map(Row::from_json)
        .collect::<Result<_>>()?;
    for r in &rows {
        ensure!(
            r.ifindex == index,
            "row not on the watched interface {index}: {}",
            r.describe()
        );
    }
    Ok(rows)
}

pub(crate) fn describe_rows(rows: &[Row]) -> String {
    rows.iter()
        .map(Row::describe)
        .collect::<Vec<_>>()
        .join("\n")
}

/// The single row whose local end is `local`.
pub(crate) fn row_for(rows: &[Row], local: SocketAddr) -> Result<&Row> {
    let matching: Vec<&Row> = rows.iter().filter(|r| r.local == local).collect();
    match matching.as_slice() {
        [r] => Ok(r),
        _ => bail!(
            "expected exactly one socket row with local {local}, found {}; rows:\n{}",
            matching.len(),
            describe_rows(rows)
        ),
    }
}

/// Sockets of another namespace (the server side) must never show up.
pub(crate) fn assert_only_local(rows: &[Row], local_ip: &str) -> Result<()> {
    let local_ip = ip(local_ip)?;
    let foreign: Vec<&Row> = rows.iter().filter(|r| r.local.ip() != local_ip).collect();
    ensure!(
        foreign.is_empty(),
        "sockets of other namespaces reported (the agent must filter on its own netns):\n{}",
        foreign
            .iter()
            .map(|r| r.describe())
            .collect::<Vec<_>>()
            .join("\n")
    );
    Ok(())
}

pub(crate) fn cc_aggregate<'a>(report: &'a Report, cc: &str) -> Result<&'a Value> {
    let index = report.interface_u64("index")?;
    let all = report
        .json
        .get("congestion_control")
        .and_then(Value::as_array)
        .context("`congestion_control` missing or not an array")?;
    let mut found = None;
    for a in all {
        for key in ["sockets", "data_segs_sent", "retransmits", "ifindex"] {
            u64_field(a, key)?;
        }
        f64_field(a, "retrans_ratio")?;
        f64_field(a, "throughput_bps")?;
        if str_field(a, "cc")? == cc && u64_field(a, "ifindex")? == index {
            ensure!(found.is_none(), "two aggregates for {cc}: {all:?}");
            found = Some(a);
        }
    }
    found.with_context(|| format!("no congestion_control aggregate for {cc} on {index}: {all:?}"))
}

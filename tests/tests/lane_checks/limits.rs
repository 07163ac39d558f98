//! What limits each connection on a 40 ms netem path, as tests/vm/limits.sh left it: a
//! receiver's small tcp_rmem with four parallel streams, the same receiver with senders the
//! application paces, and a lossy path with default buffers.

use anyhow::{ensure, Context, Result};
use netdoctor_lab::kernel_lane::Run;
use serde_json::Value;

use super::{diagnosis, Failures};

const RECEIVE_WINDOW: &str = "tcp.receive_window_limited";
const SEND_BUFFER: &str = "tcp.send_buffer_limited";
const SERVER: &str = "10.42.0.2:5411";

fn num(v: &Value, key: &str) -> Result<f64> {
    v[key].as_f64().with_context(|| format!("{key} in {v}"))
}

fn window(run: &Run) -> Result<()> {
    let d = diagnosis(run, "limits_window")?;
    d.expect_limited(SERVER, "receiver_window", 4)?;
    let f = d.expect_finding(RECEIVE_WINDOW, "warning")?;
    let e = &f["evidence"];
    // A window of at most 32 KiB (the receiver's whole buffer) at 40 ms allows at most 6.6
    // Mbit/s; the four streams together carried more than 1.25 times what one could.
    let (ceiling, path) = (num(e, "ceiling_mbps")?, num(e, "path_rate_mbps")?);
    ensure!(
        ceiling > 0.5 && ceiling < 6.6 && path >= 1.25 * ceiling && path <= 17.0,
        "ceiling {ceiling} Mbit/s, path {path} Mbit/s: {e}"
    );
    ensure!(
        num(e, "srtt_ms")? >= 38.0 && num(e, "window_kib")? <= 32.0,
        "a 40 ms path and a window of at most 32 KiB: {e}"
    );
    let needed = e["needed_tcp_rmem_max"].as_i64().unwrap_or(-1);
    let fix = f["fix"].as_str().unwrap_or_default();
    let summary = f["summary"].as_str().unwrap_or_default();
    ensure!(
        needed > 32_768
            && fix.starts_with(&format!(
                "sysctl -w net.ipv4.tcp_rmem=\"4096 131072 {needed}\"   # on the receiver, 10.42.0.2;"
            ))
            && super::says_rate(summary)
            && summary.contains("ms RTT"),
        "summary {summary:?}, fix {fix:?}"
    );
    d.assert_none_of(&[SEND_BUFFER])
}

fn paced(run: &Run) -> Result<()> {
    let d = diagnosis(run, "limits_paced")?;
    d.expect_limited(SERVER, "application", 4)?;
    d.assert_none_of(&[RECEIVE_WINDOW, SEND_BUFFER])
}

fn lossy(run: &Run) -> Result<()> {
    let d = diagnosis(run, "limits_lossy")?;
    d.expect_limited(SERVER, "congestion", 1)?;
    let f = d.data_flows_to(SERVER)[0];
    ensure!(
        f["retransmits"].as_i64() > Some(0),
        "a stream on a 3 % lossy path that never retransmitted: {f}"
    );
    d.assert_none_of(&[RECEIVE_WINDOW, SEND_BUFFER])
}

/// Every case of the suite; whether all held.
pub fn check(run: &Run, failures: &mut Failures) -> bool {
    let before = failures.0.len();
    failures.check("limits_window", run, || window(run));
    failures.check("limits_paced", run, || paced(run));
    failures.check("limits_lossy", run, || lossy(run));
    failures.0.len() == before
}

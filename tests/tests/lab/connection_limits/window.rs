//! The receiver's window: a receiver whose tcp_rmem caps it far below what the path carries,
//! and its twins.

use anyhow::{ensure, Result};
use netdoctor_lab::delay::DelayLine;
use netdoctor_lab::lab_guard;
use serde_json::Value;

use crate::connection_limits::{num, server, text, Path, B_IP, LIMITS, WINDOW_SECS};

const RECEIVE_WINDOW: &str = "tcp.receive_window_limited";
const SEND_BUFFER: &str = "tcp.send_buffer_limited";
/// The receiver's buffer: at most 64 KiB, a window of about 32 KiB, 6.5 Mbit/s at 40 ms.
const SMALL_RMEM: &str = "4096 16384 65536";

#[test]
fn a_small_receive_buffer_caps_each_stream_and_names_the_receivers_tcp_rmem() -> Result<()> {
    lab_guard!("iperf3");
    let path = Path::new(Some(SMALL_RMEM), None)?;
    let (d, report) = path.diagnose(|| path.iperf(4, &[]))?;
    d.expect_limited(&server(), "receiver_window", 4)?;
    let found = d.all(RECEIVE_WINDOW);
    ensure!(!found.is_empty(), "no {RECEIVE_WINDOW}:\n{}", d.describe());
    for f in &found {
        let subject = text(f, "subject")?;
        let flow = d
            .flows()
            .iter()
            .find(|x| x["name"] == *subject)
            .ok_or_else(|| anyhow::anyhow!("no flow {subject}"))?;
        let e = &f["evidence"];
        let (ceiling, path_rate) = (num(e, "ceiling_mbps")?, num(e, "path_rate_mbps")?);
        // 64 KiB of buffer, half of it window, at 40 ms: at most ~6.6 Mbit/s, while the four
        // streams together carried about four times that.
        ensure!(
            ceiling > 1.0 && ceiling < 10.0 && path_rate >= 1.25 * ceiling,
            "ceiling {ceiling} Mbit/s, path {path_rate} Mbit/s: {f}"
        );
        ensure!(
            (38.0..80.0).contains(&num(e, "srtt_ms")?) && num(e, "window_kib")? <= 64.0,
            "a 40 ms path and a window under 64 KiB: {e}"
        );
        // A stream moves no faster than its ceiling.
        ensure!(
            num(flow, "throughput_bps")? <= num(flow, "ceiling_bps")? * 1.1,
            "faster than its ceiling: {flow}"
        );
        // The fix: the remote receiver's tcp_rmem maximum, computed from the path's rate.
        let needed = flow["needed_buffer_bytes"].as_i64().unwrap_or(-1);
        let needed_window = flow["needed_window_bytes"].as_i64().unwrap_or(-1);
        ensure!(
            needed > 65_536 && needed % 65_536 == 0 && needed / 2 >= needed_window,
            "needed buffer {needed} for a {needed_window}-byte window: {flow}"
        );
        let fix = text(f, "fix")?;
        ensure!(
            fix.starts_with(&format!(
                "sysctl -w net.ipv4.tcp_rmem=\"4096 131072 {needed}\"   # on the receiver, {B_IP};"
            )),
            "fix {fix:?}"
        );
        ensure!(
            e["needed_tcp_rmem_max"] == needed && e["receiver"] == B_IP,
            "evidence {e}"
        );
    }
    d.assert_none_of(&[SEND_BUFFER])?;
    ensure!(report.sent_bytes > 0, "iperf3 sent nothing");
    Ok(())
}

#[test]
fn an_application_limited_sender_behind_the_same_window_is_not_blamed_on_it() -> Result<()> {
    lab_guard!("iperf3");
    let path = Path::new(Some(SMALL_RMEM), None)?;
    // 2 Mbit/s per stream in 16 KiB writes: below the window's ceiling.
    let (d, _) = path.diagnose(|| path.iperf(4, &["-b", "2M", "-l", "16K"]))?;
    d.expect_limited(&server(), "application", 4)?;
    d.assert_none_of(&[RECEIVE_WINDOW, SEND_BUFFER])?;
    Ok(())
}

#[test]
fn default_buffers_on_the_same_path_raise_no_window_finding() -> Result<()> {
    lab_guard!("iperf3");
    let path = Path::new(None, None)?;
    let (d, _) = path.diagnose(|| path.iperf(4, &[]))?;
    ensure!(d.data_flows_to(&server()).len() == 4, "{}", d.describe());
    d.assert_none_of(&[RECEIVE_WINDOW, SEND_BUFFER])?;
    Ok(())
}

/// `netdoctor flows --json` of the sender: every connection has a limit and a share.
#[test]
fn flows_json_gives_every_connection_its_limit_and_share() -> Result<()> {
    lab_guard!("iperf3");
    let path = Path::new(Some(SMALL_RMEM), None)?;
    let duration = format!("{WINDOW_SECS}");
    let (out, _) = std::thread::scope(|s| -> Result<_> {
        let flows = s.spawn(|| {
            path.pair.a.output(&[
                &netdoctor_lab::netdoctor::binary()?.to_string_lossy(),
                "flows",
                DelayLine::IFNAME,
                "--duration",
                &duration,
                "--json",
            ])
        });
        std::thread::sleep(std::time::Duration::from_secs(2));
        let load = path.iperf(2, &[]);
        let out = match flows.join() {
            Ok(r) => r?,
            Err(_) => anyhow::bail!("flows thread panicked"),
        };
        Ok((out, load?))
    })?;
    ensure!(
        out.status.success(),
        "flows: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout)?;
    let sockets = report["sockets"].as_array().cloned().unwrap_or_default();
    ensure!(
        sockets.len() >= 3,
        "control and two data connections: {report}"
    );
    for s in &sockets {
        let limit = text(s, "limit")?;
        let share = num(s, "limit_share")?;
        ensure!(
            LIMITS.contains(&limit) && (0.0..=1.0).contains(&share),
            "limit {limit:?} share {share}: {s}"
        );
        let shares: f64 = [
            "busy_share",
            "rwnd_limited_share",
            "sndbuf_limited_share",
            "idle_share",
        ]
        .iter()
        .map(|k| s[*k].as_f64().unwrap_or(-1.0))
        .sum();
        ensure!((shares - 1.0).abs() < 0.01, "shares add to {shares}: {s}");
    }
    let limited = sockets
        .iter()
        .filter(|s| s["limit"] == "receiver_window")
        .count();
    ensure!(
        limited == 2,
        "two window-limited data connections: {sockets:?}"
    );
    Ok(())
}

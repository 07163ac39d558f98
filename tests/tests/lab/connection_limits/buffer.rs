//! The send buffer: a sender whose tcp_wmem caps it far below what the path carries.

use anyhow::{ensure, Result};
use netdoctor_lab::lab_guard;

use crate::connection_limits::{num, server, text, Path};

/// The sender's buffer: at most 64 KiB of memory, under 64 KiB of data at 40 ms.
const SMALL_WMEM: &str = "4096 16384 65536";

#[test]
fn a_small_send_buffer_caps_each_stream_and_names_this_hosts_tcp_wmem() -> Result<()> {
    lab_guard!("iperf3");
    let path = Path::new(None, Some(SMALL_WMEM))?;
    let (d, _) = path.diagnose(|| path.iperf(4, &[]))?;
    d.expect_limited(&server(), "send_buffer", 4)?;
    let found = d.all("tcp.send_buffer_limited");
    ensure!(
        !found.is_empty(),
        "no tcp.send_buffer_limited:\n{}",
        d.describe()
    );
    for f in found {
        let e = &f["evidence"];
        let (ceiling, path_rate) = (num(e, "ceiling_mbps")?, num(e, "path_rate_mbps")?);
        ensure!(
            ceiling > 0.5 && ceiling < 15.0 && path_rate >= 1.25 * ceiling,
            "ceiling {ceiling} Mbit/s, path {path_rate} Mbit/s: {f}"
        );
        let needed = e["needed_tcp_wmem_max"].as_i64().unwrap_or(-1);
        ensure!(
            needed > 65_536 && needed % 65_536 == 0,
            "needed {needed}: {e}"
        );
        let fix = text(f, "fix")?;
        ensure!(
            fix.starts_with(&format!(
                "sysctl -w net.ipv4.tcp_wmem=\"4096 16384 {needed}\"   # on this host, the sender;"
            )),
            "fix {fix:?}"
        );
    }
    d.assert_none_of(&["tcp.receive_window_limited"])?;
    Ok(())
}

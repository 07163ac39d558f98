//! Congestion control per flow (cubic and bbr side by side); the live figures of the
//! library's socket snapshots agree with `ss -tin`, and the CLI reports each data
//! connection with its own algorithm, its aggregates and the namespace's sysctls.

use std::mem::MaybeUninit;
use std::net::SocketAddr;
use std::process::Command;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use ::netdoctor::kernel::sockets::{Socket, SocketProbes};
use anyhow::{ensure, Context, Result};
use netdoctor_lab::netdoctor::{self, str_field, u64_field, Watch};
use netdoctor_lab::{lab_guard, traffic, Iperf3Server, Netns, PairTopology};
use serde_json::Value;

use crate::sockets_drops::helpers::{bool_field, enter, ip, iperf3_local_port, iperf3_opts, join};
use crate::sockets_drops::rows::{assert_only_local, cc_aggregate, describe_rows, row_for, rows};
use crate::sockets_drops::ss::{parse_ss, SsInfo};

const CUBIC_PORT: u16 = 40001;
const BBR_PORT: u16 = 40002;

/// One library snapshot / `ss` / library snapshot triple for one socket.
#[derive(Debug)]
struct Sample {
    before: Socket,
    ss: SsInfo,
    after: Socket,
}

/// `value` lies in [min(a, b) - tol, max(a, b) + tol].
fn bracketed(value: u64, a: u64, b: u64, tol: u64) -> bool {
    value + tol >= a.min(b) && value <= a.max(b) + tol
}

impl Sample {
    /// Mismatches between netdoctor's view (bracketing snapshots) and `ss`.
    ///
    /// Tolerances:
    /// * bytes_acked, data_segs_out, total_retrans are monotonic counters read from the
    ///   same `struct tcp_sock` fields tcp_info uses: `ss` ran between the two snapshots,
    ///   so its value must lie exactly between them (no tolerance);
    /// * cwnd: between the snapshots ± 30 % (ss runs ≈ 1-5 ms after the first snapshot,
    ///   during which an iperf3 flow gets several ACKs; bbr's cwnd cycles with its
    ///   probing gains, cubic's stays put while application-limited);
    /// * srtt: between the snapshots ± max(50 %, 100 µs). On veth the RTT is tens of µs
    ///   and each ACK moves srtt by 1/8 of a sample that one scheduling delay on this
    ///   2-core VM can inflate by ~100 µs; a missing `>> 3` (8×) or a ms/µs mix-up
    ///   still fails.
    fn mismatches(&self) -> Vec<String> {
        let (b, a, ss) = (&self.before, &self.after, &self.ss);
        let mut bad = Vec::new();
        let mut check = |what: &str, ok: bool, nd: (u64, u64), ss: u64| {
            if !ok {
                bad.push(format!(
                    "{}: {what} netdoctor {} .. {} vs ss {ss}",
                    self.ss.local, nd.0, nd.1
                ));
            }
        };
        let pair = |f: fn(&Socket) -> u64| (f(b), f(a));
        let acked = pair(|s| s.bytes_acked);
        check(
            "bytes_acked",
            bracketed(ss.bytes_acked, acked.0, acked.1, 0),
            acked,
            ss.bytes_acked,
        );
        let segs = pair(|s| u64::from(s.data_segs_out));
        check(
            "data_segs_out",
            bracketed(ss.data_segs_out, segs.0, segs.1, 0),
            segs,
            ss.data_segs_out,
        );
        let retr = pair(|s| u64::from(s.total_retrans));
        check(
            "total_retrans",
            bracketed(ss.total_retrans, retr.0, retr.1, 0),
            retr,
            ss.total_retrans,
        );
        let cwnd = pair(|s| u64::from(s.cwnd));
        check(
            "cwnd",
            bracketed(ss.cwnd, cwnd.0, cwnd.1, ss.cwnd * 30 / 100),
            cwnd,
            ss.cwnd,
        );
        let srtt = pair(|s| u64::from(s.srtt_us));
        check(
            "srtt_us",
            bracketed(ss.srtt_us, srtt.0, srtt.1, (ss.srtt_us / 2).max(100)),
            srtt,
            ss.srtt_us,
        );
        if !ss.has_word(&a.cc) || a.cc != b.cc {
            bad.push(format!(
                "{}: cc netdoctor {:?}/{:?} not in ss words {:?}",
                ss.local, b.cc, a.cc, ss.words
            ));
        }
        bad
    }
}

/// Runs on its own thread: enters `ns`, loads the socket probes, says `ready`, waits
/// until both iperf3 data connections carry data, then takes three rounds of
/// snapshot / `ss -tin` / snapshot.
fn sample_live(ns: &Netns, ready: &mpsc::Sender<()>) -> Result<Vec<Sample>> {
    enter(ns)?;
    let mut storage = MaybeUninit::uninit();
    let probes = SocketProbes::load(&mut storage).context("loading the socket probes")?;
    ensure!(
        probes.signals().snapshots,
        "iter/tcp unavailable: {:?}",
        probes.signals()
    );
    ready.send(()).context("test thread gone")?;

    let busy = |s: &Socket| {
        [CUBIC_PORT, BBR_PORT].contains(&s.local.port())
            && s.state == "established"
            && s.data_segs_out >= 300
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let snap = probes.snapshot()?.sockets;
        if snap.iter().filter(|s| busy(s)).count() == 2 {
            break;
        }
        ensure!(
            Instant::now() < deadline,
            "the two iperf3 data connections never carried data; snapshot: {snap:#?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut samples = Vec::new();
    for _ in 0..3 {
        let before = probes.snapshot()?.sockets;
        let out = Command::new("ss")
            .args(["-Htin"])
            .output()
            .context("running ss")?;
        let after = probes.snapshot()?.sockets;
        ensure!(out.status.success(), "ss failed: {out:?}");
        let ss = parse_ss(&String::from_utf8_lossy(&out.stdout))?;
        for port in [CUBIC_PORT, BBR_PORT] {
            let find = |snap: &[Socket]| {
                snap.iter()
                    .find(|s| s.local.port() == port)
                    .cloned()
                    .with_context(|| format!("port {port} not in snapshot {snap:#?}"))
            };
            samples.push(Sample {
                before: find(&before)?,
                after: find(&after)?,
                ss: ss
                    .iter()
                    .find(|s| s.local.port() == port)
                    .cloned()
                    .with_context(|| format!("port {port} not in ss output {ss:#?}"))?,
            });
        }
        std::thread::sleep(Duration::from_millis(150));
    }
    Ok(samples)
}

#[test]
fn congestion_control_per_flow_and_live_figures_match_ss() -> Result<()> {
    lab_guard!("iperf3", "ss");
    let pair = PairTopology::new(1500)?;
    let _cubic_server = Iperf3Server::start(&pair.b, 5201)?;
    let _bbr_server = Iperf3Server::start(&pair.b, 5202)?;
    let a_ip = ip(PairTopology::A_IP)?;

    let (report, samples, cubic, bbr) = std::thread::scope(|s| -> Result<_> {
        let (ready_tx, ready_rx) = mpsc::channel();
        let a = &pair.a;
        let sampler = s.spawn(move || sample_live(a, &ready_tx));
        let watch = Watch::start(
            &pair.a,
            &["flows", PairTopology::IFNAME, "--duration", "60s", "--json"],
        )?;
        if ready_rx.recv_timeout(netdoctor::START_TIMEOUT).is_err() {
            return Err(join(sampler, "library sampler")
                .err()
                .unwrap_or_else(|| anyhow::anyhow!("sampler never became ready")));
        }
        // Rate-limited so both flows run side by side for the whole observation
        // without starving each other or the 2 CPUs.
        let mut cubic_opts = iperf3_opts(PairTopology::B_IP, 5201, "cubic", CUBIC_PORT, 5);
        cubic_opts.bitrate = Some("50M".into());
        let mut bbr_opts = iperf3_opts(PairTopology::B_IP, 5202, "bbr", BBR_PORT, 5);
        bbr_opts.bitrate = Some("50M".into());
        let cubic = s.spawn(move || traffic::iperf3_client(a, &cubic_opts));
        let bbr = s.spawn(move || traffic::iperf3_client(a, &bbr_opts));
        let samples = join(sampler, "library sampler");
        // Stop netdoctor while both flows still run: their rows are live sockets.
        let report = watch.interrupt();
        let cubic = join(cubic, "iperf3 cubic");
        let bbr = join(bbr, "iperf3 bbr");
        Ok((report?, samples?, cubic?, bbr?))
    })?;

    // iperf3 agrees on who is who.
    assert_eq!(iperf3_local_port(&cubic)?, CUBIC_PORT);
    assert_eq!(iperf3_local_port(&bbr)?, BBR_PORT);
    assert_eq!(cubic.sender_congestion.as_deref(), Some("cubic"));
    assert_eq!(bbr.sender_congestion.as_deref(), Some("bbr"));

    // (a) Library vs ss, for the same socket, ss taken between two snapshots.
    let mut mismatches = Vec::new();
    for sample in &samples {
        println!(
            "{} ({}): srtt {}..{} us vs ss {} | cwnd {}..{} vs ss {} | total_retrans {}..{} vs ss {} \
             | bytes_acked {}..{} vs ss {}",
            sample.ss.local,
            sample.after.cc,
            sample.before.srtt_us,
            sample.after.srtt_us,
            sample.ss.srtt_us,
            sample.before.cwnd,
            sample.after.cwnd,
            sample.ss.cwnd,
            sample.before.total_retrans,
            sample.after.total_retrans,
            sample.ss.total_retrans,
            sample.before.bytes_acked,
            sample.after.bytes_acked,
            sample.ss.bytes_acked
        );
        mismatches.extend(sample.mismatches());
        let expected = if sample.ss.local.port() == CUBIC_PORT {
            "cubic"
        } else {
            "bbr"
        };
        if sample.after.cc != expected {
            mismatches.push(format!(
                "{}: cc {} expected {expected}",
                sample.ss.local, sample.after.cc
            ));
        }
    }
    assert!(
        mismatches.is_empty(),
        "netdoctor's socket snapshot disagrees with ss -tin:\n{}",
        mismatches.join("\n")
    );

    // (b) The CLI: each data connection with its own algorithm.
    let rows = rows(&report)?;
    println!("sockets:\n{}", describe_rows(&rows));
    assert_only_local(&rows, PairTopology::A_IP)?;
    for (port, cc, iperf) in [(CUBIC_PORT, "cubic", &cubic), (BBR_PORT, "bbr", &bbr)] {
        let row = row_for(&rows, SocketAddr::new(a_ip, port))?;
        assert_eq!(row.cc, cc, "{}", row.describe());
        assert_eq!(
            row.remote.ip(),
            ip(PairTopology::B_IP)?,
            "{}",
            row.describe()
        );
        assert!(
            row.data_segs_sent >= 300 && row.bytes_acked > 0,
            "the data connection sent data in the window: {}",
            row.describe()
        );
        assert!(
            row.closed || row.state == "established",
            "{}",
            row.describe()
        );
        // Same tcp_sock counter as iperf3's Retr, read earlier (netdoctor stopped while
        // iperf3 still ran): never more than iperf3's total at the end.
        let theirs = iperf.retransmits.context("iperf3 reported no Retr")?;
        assert!(
            row.total_retrans <= theirs,
            "netdoctor total_retrans {} > iperf3's final {theirs}: {}",
            row.total_retrans,
            row.describe()
        );
    }
    // Aggregates: cubic is this one data connection only (iperf3's control
    // connections use the namespace default, bbr).
    let cubic_row = row_for(&rows, SocketAddr::new(a_ip, CUBIC_PORT))?;
    let agg = cc_aggregate(&report, "cubic")?;
    assert_eq!(u64_field(agg, "sockets")?, 1, "{agg}");
    assert_eq!(
        u64_field(agg, "data_segs_sent")?,
        cubic_row.data_segs_sent,
        "{agg}"
    );
    let bbr_agg = cc_aggregate(&report, "bbr")?;
    assert!(u64_field(bbr_agg, "sockets")? >= 1, "{bbr_agg}");

    // congestion_control_sysctl is the namespace's.
    let sysctl = report
        .json
        .get("congestion_control_sysctl")
        .context("congestion_control_sysctl missing")?;
    assert_eq!(
        str_field(sysctl, "default")?,
        pair.a.read_sysctl("net.ipv4.tcp_congestion_control")?
    );
    for (key, sysctl_key) in [
        ("available", "net.ipv4.tcp_available_congestion_control"),
        ("allowed", "net.ipv4.tcp_allowed_congestion_control"),
    ] {
        let listed: Vec<&str> = sysctl
            .get(key)
            .and_then(Value::as_array)
            .with_context(|| format!("{key} not an array"))?
            .iter()
            .filter_map(Value::as_str)
            .collect();
        let kernel = pair.a.read_sysctl(sysctl_key)?;
        assert_eq!(listed, kernel.split_whitespace().collect::<Vec<_>>());
    }
    let signals = report
        .json
        .get("socket_signals")
        .context("socket_signals")?;
    for key in ["snapshots", "retransmits", "lifecycle"] {
        assert!(bool_field(signals, key)?, "{signals}");
    }
    Ok(())
}

//! `ecmp.single_path_hash` end to end: two links between the same two hosts and an
//! equal-cost multipath route over both, as the site-to-site report had it (there two
//! WireGuard tunnels) to go past one link's throughput.
//!
//! ```text
//! a  lo 10.98.0.1 ── l1 10.202.0.1 ══ 10.202.0.2 l1 ── b  lo 10.99.0.1
//!                    l2 10.203.0.1 ══ 10.203.0.2 l2
//! a: ip route add 10.99.0.1/32 nexthop via 10.202.0.2 dev l1 weight 1
//!                              nexthop via 10.203.0.2 dev l2 weight 1
//! ```
//!
//! Twelve concurrent iperf3 streams from 10.98.0.1 to 10.99.0.1 during the observation.
//! With `net.ipv4.fib_multipath_hash_policy=0` (addresses only) every stream takes one
//! link: warning, with what each nexthop carried. The healthy twin, policy 1 (ports too),
//! spreads them (twelve streams all on one of two nexthops happens once in 2048).
//!
//! The links are veths rather than two wireguard-go tunnels: twelve parallel streams
//! through wireguard-go on this two-core machine are reordered and lost (iperf3 counted
//! 1,000-5,000 retransmissions of 3,300-11,000 segments at 6-25 Mbit/s, whichever the
//! hash policy), a true `tcp.high_retransmits` that a healthy twin cannot have. The rule
//! reads routes and nexthop counters, whatever the nexthops are.
//!
//! Needs root, BPF, iperf3; skips elsewhere, fails under CI=true.
//! Build the binary first: `cargo build -p netdoctor`.

use std::time::Duration;

use anyhow::{ensure, Result};
use netdoctor_lab::diagnosis::Diagnosis;
use netdoctor_lab::traffic::{self, Iperf3Opts, Iperf3Report};
use netdoctor_lab::veth::{create_veth, VethEnd};
use netdoctor_lab::{lab_guard, observe, Iperf3Server, Netns};
use serde_json::Value;

const WINDOW: Duration = Duration::from_secs(3);
const CLIENT: &str = "10.98.0.1";
const SERVER: &str = "10.99.0.1";
const LINKS: [(&str, &str); 2] = [("l1", "10.202.0"), ("l2", "10.203.0")];
const STREAMS: u32 = 12;
const STREAM_RATE: &str = "2M";
const PORT: u16 = 5201;

/// Two hosts joined by two links, a multipath route over both from `a`.
struct TwoLinks {
    a: Netns,
    b: Netns,
}

impl TwoLinks {
    fn new(hash_policy: &str) -> Result<TwoLinks> {
        let (a, b) = (Netns::new()?, Netns::new()?);
        for (name, net) in LINKS {
            create_veth(
                VethEnd::ns(&a, name).addr(&format!("{net}.1/24")),
                VethEnd::ns(&b, name).addr(&format!("{net}.2/24")),
            )?;
        }
        a.add_addr("lo", &format!("{CLIENT}/32"))?;
        b.add_addr("lo", &format!("{SERVER}/32"))?;
        let mut route = vec!["route".to_owned(), "add".into(), format!("{SERVER}/32")];
        for (name, net) in LINKS {
            route.extend(
                [
                    "nexthop",
                    "via",
                    &format!("{net}.2"),
                    "dev",
                    name,
                    "weight",
                    "1",
                ]
                .map(String::from),
            );
        }
        a.ip(&route.iter().map(String::as_str).collect::<Vec<_>>())?;
        b.add_route(&format!("{CLIENT}/32"), &format!("{}.1", LINKS[0].1))?;
        // Replies come back over the first link whichever link a request took.
        b.sysctl("net.ipv4.conf.all.rp_filter", "0")?;
        a.sysctl("net.ipv4.fib_multipath_hash_policy", hash_policy)?;
        Ok(TwoLinks { a, b })
    }

    /// Diagnoses a's first link while twelve iperf3 streams go from a to b.
    fn diagnose(&self) -> Result<(Diagnosis, Iperf3Report)> {
        let _server = Iperf3Server::start(&self.b, PORT)?;
        observe::diagnose_during(&self.a, LINKS[0].0, WINDOW, &[], || {
            let mut opts = Iperf3Opts::new(SERVER);
            opts.port = PORT;
            opts.bind = Some(CLIENT.to_owned());
            opts.parallel = STREAMS;
            opts.bitrate = Some(STREAM_RATE.to_owned());
            opts.duration_secs = 5;
            traffic::iperf3_client(&self.a, &opts)
        })
    }

    fn names(&self) -> Value {
        serde_json::json!([LINKS[0].0, LINKS[1].0])
    }
}

/// Bytes each nexthop carried, in `ecmp.measured` order.
fn carried(d: &Diagnosis) -> Vec<i64> {
    d.fact("ecmp.measured")
        .as_array()
        .map(|m| {
            m.iter()
                .map(|n| n["bytes"].as_i64().unwrap_or(-1))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn ecmp_with_layer3_hashing_puts_every_flow_on_one_link() -> Result<()> {
    lab_guard!("iperf3");
    let lab = TwoLinks::new("0")?;
    let (d, report) = lab.diagnose()?;
    ensure!(report.sent_bytes > 0, "no iperf3 traffic: {:?}", report);
    ensure!(
        d.fact("ecmp.present") == true
            && d.fact("ecmp.route") == &Value::from(format!("{SERVER}/32"))
            && d.fact("ecmp.nexthops") == &lab.names()
            && d.fact("ecmp.hash_policy") == 0
            && d.fact("ecmp.l4_hashing") == false,
        "the multipath route over both links was not recognised:\n{}",
        d.describe()
    );
    let f = d.expect_finding("ecmp.single_path_hash", "warning")?;
    let e = &f["evidence"];
    let percent = e["busiest_percent"].as_f64().unwrap_or(0.0);
    let flows = e["concurrent_flows"].as_i64().unwrap_or(0);
    ensure!(
        percent >= 90.0 && flows >= i64::from(STREAMS),
        "evidence: one link should carry nearly all of {STREAMS} flows: {e}\n{}",
        d.describe()
    );
    let bytes = carried(&d);
    ensure!(
        bytes.len() == 2 && bytes.iter().all(|b| *b >= 0) && bytes.iter().max() > Some(&1_000_000),
        "each nexthop measured: {bytes:?}"
    );
    let fix = f["fix"].as_str().unwrap_or("");
    ensure!(
        fix.contains("sysctl -w net.ipv4.fib_multipath_hash_policy=1"),
        "fix: {fix}"
    );
    ensure!(d.code == 1, "warnings only: exit 1\n{}", d.describe());
    Ok(())
}

#[test]
fn ecmp_with_layer4_hashing_spreads_the_flows() -> Result<()> {
    lab_guard!("iperf3");
    let lab = TwoLinks::new("1")?;
    let (d, _) = lab.diagnose()?;
    let bytes = carried(&d);
    ensure!(
        d.fact("ecmp.l4_hashing") == true && bytes.len() == 2 && bytes.iter().all(|b| *b > 100_000),
        "layer 4 hashing: both links should carry some of the {STREAMS} flows: {bytes:?}\n{}",
        d.describe()
    );
    ensure!(
        d.all("ecmp.single_path_hash").is_empty(),
        "ecmp.single_path_hash although the flows spread:\n{}",
        d.describe()
    );
    d.expect_healthy()
}

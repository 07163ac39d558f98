//! WireGuard over a veth pair: a tunnel MTU too big for the underlay (over IPv4 and IPv6),
//! undersized, fragmenting on the underlay under load, and the healthy twins.

use std::time::Duration;

use anyhow::{ensure, Context, Result};
use netdoctor_lab::diagnosis::Diagnosis;
use netdoctor_lab::{lab_guard, traffic, Iperf3Server, PairTopology, WgConfig, WgTunnel};
use serde_json::Value;

use crate::diagnose_mtu::report::{
    diagnose_idle, diagnose_with, expect_evidence, expect_fix, iperf3, str_or, MtuChecks, TWIN_RATE,
};

/// A WireGuard tunnel with `mtu` between the two ends of a veth pair with
/// `underlay_mtu`; over IPv6 underlay addresses when `v6`.
struct WgPair {
    // Declared first: dropped (wireguard-go stopped) before the namespaces.
    wg: WgTunnel,
    pair: PairTopology,
}

const A_IP6: &str = "fd00:201::1";
const B_IP6: &str = "fd00:201::2";

impl WgPair {
    fn new(underlay_mtu: u32, mtu: u32, v6: bool) -> Result<WgPair> {
        let pair = PairTopology::new(underlay_mtu)?;
        let (a_ip, b_ip) = if v6 {
            pair.a
                .add_addr(PairTopology::IFNAME, &format!("{A_IP6}/64"))?;
            pair.b
                .add_addr(PairTopology::IFNAME, &format!("{B_IP6}/64"))?;
            traffic::wait_for_ping(&pair.a, B_IP6, Duration::from_secs(5))
                .context("IPv6 underlay")?;
            (A_IP6, B_IP6)
        } else {
            (PairTopology::A_IP, PairTopology::B_IP)
        };
        let config = WgConfig {
            mtu,
            ..WgConfig::default()
        };
        let wg = WgTunnel::new(&pair.a, a_ip, &pair.b, b_ip, &config)?;
        Ok(WgPair { wg, pair })
    }

    /// Diagnoses side a's wg interface with the tunnel idle.
    fn diagnose_idle(&self) -> Result<Diagnosis> {
        diagnose_idle(&self.pair.a, self.wg.a.ifname())
    }

    /// Diagnoses side a's wg interface while iperf3 sends a -> b through the tunnel at
    /// `rate`.
    fn diagnose_loaded(&self, rate: &str) -> Result<Diagnosis> {
        let iface = self.wg.a.ifname();
        let _server = Iperf3Server::start(&self.pair.b, 5201)?;
        let (d, report) = diagnose_with(&self.pair.a, iface, &[], || {
            iperf3(&self.pair.a, self.wg.b.ip(), 5201, rate)
        })?;
        ensure!(
            report.received_bytes > 0,
            "iperf3 through {iface} moved nothing: {:?}",
            report.json
        );
        Ok(d)
    }
}

/// Checks the facts every WireGuard-over-veth diagnosis must get right.
fn expect_wg_facts(
    d: &Diagnosis,
    mtu: i64,
    family: &str,
    overhead: i64,
    underlay: i64,
) -> Result<()> {
    let checks: [(&str, Value); 6] = [
        ("iface.mtu", mtu.into()),
        ("tunnel.present", true.into()),
        ("tunnel.kind", "wireguard".into()),
        ("tunnel.family", family.into()),
        ("tunnel.overhead_expected", overhead.into()),
        ("tunnel.underlay_iface", PairTopology::IFNAME.into()),
    ];
    for (path, expected) in checks {
        ensure!(
            d.fact(path) == &expected,
            "facts.{path} is {}, expected {expected}\n{}",
            d.fact(path),
            d.describe()
        );
    }
    ensure!(
        d.fact_i64("tunnel.underlay_mtu")? == underlay
            && d.fact_i64("tunnel.max_mtu")? == underlay - overhead,
        "underlay MTU {underlay}: expected max_mtu {}\n{}",
        underlay - overhead,
        d.describe()
    );
    Ok(())
}

#[test]
fn wireguard_1480_on_1500_exceeds_the_underlay() -> Result<()> {
    lab_guard!("wireguard-go", "wg");
    let lab = WgPair::new(1500, 1480, false)?;
    let d = lab.diagnose_idle()?;
    expect_wg_facts(&d, 1480, "ipv4", 60, 1500)?;
    let f = d.expect("mtu.tunnel_exceeds_underlay", "critical")?;
    d.expect_code(2)?;
    expect_evidence(&d, f, "tunnel_mtu", &1480.into())?;
    expect_evidence(&d, f, "overhead_expected", &60.into())?;
    expect_evidence(&d, f, "largest_fitting_mtu", &1440.into())?;
    expect_evidence(&d, f, "underlay_route_mtu", &1500.into())?;
    // The probe toward the endpoint ran over the 1500 underlay.
    expect_evidence(&d, f, "underlay_path_mtu", &1500.into())?;
    expect_fix(
        &d,
        f,
        &format!("ip link set dev {} mtu 1440", lab.wg.a.ifname()),
    )?;
    // Too big is not too small.
    d.expect_absent("mtu.tunnel_undersized")?;
    Ok(())
}

#[test]
fn wireguard_over_ipv6_1440_exceeds_and_1420_fits() -> Result<()> {
    lab_guard!("wireguard-go", "wg", "iperf3", "ping");
    let bad = WgPair::new(1500, 1440, true)?;
    let d = bad.diagnose_loaded(TWIN_RATE)?;
    ensure!(
        d.fact("tunnel.endpoints") == &serde_json::json!([format!("[{B_IP6}]:51820")]),
        "the endpoint is the IPv6 underlay address\n{}",
        d.describe()
    );
    expect_wg_facts(&d, 1440, "ipv6", 80, 1500)?;
    let f = d.expect("mtu.tunnel_exceeds_underlay", "critical")?;
    expect_evidence(&d, f, "tunnel_mtu", &1440.into())?;
    expect_evidence(&d, f, "overhead_expected", &80.into())?;
    expect_evidence(&d, f, "largest_fitting_mtu", &1420.into())?;
    expect_fix(&d, f, "mtu 1420")?;
    ensure!(
        str_or(&f["summary"]).contains("ipv6"),
        "the summary names the IPv6 underlay\n{}",
        d.describe()
    );
    // 1440 + 80 > 1500: the outer IPv6 packets are fragmented by the sender.
    d.expect("mtu.underlay_fragmentation", "warning")?;
    drop(bad);

    let twin = WgPair::new(1500, 1420, true)?;
    let d = twin.diagnose_loaded(TWIN_RATE)?;
    expect_wg_facts(&d, 1420, "ipv6", 80, 1500)?;
    ensure!(
        d.fact_i64("tunnel.overhead_measured")? == 80
            && d.fact_i64("tunnel.underlay_fragments")? == 0,
        "full-size packets over IPv6 carry 80 bytes of overhead, unfragmented\n{}",
        d.describe()
    );
    d.expect_healthy()
}

#[test]
fn wireguard_1280_on_1500_is_undersized() -> Result<()> {
    lab_guard!("wireguard-go", "wg");
    let lab = WgPair::new(1500, 1280, false)?;
    let d = lab.diagnose_idle()?;
    expect_wg_facts(&d, 1280, "ipv4", 60, 1500)?;
    let f = d.expect("mtu.tunnel_undersized", "warning")?;
    d.expect_code(1)?;
    expect_evidence(&d, f, "tunnel_mtu", &1280.into())?;
    expect_evidence(&d, f, "largest_fitting_mtu", &1440.into())?;
    expect_evidence(&d, f, "underlay_mtu", &1500.into())?;
    expect_evidence(&d, f, "overhead_expected", &60.into())?;
    expect_fix(&d, f, "mtu 1440")?;
    d.expect_absent("mtu.tunnel_exceeds_underlay")
}

#[test]
fn wireguard_1420_on_a_9000_underlay_is_undersized() -> Result<()> {
    lab_guard!("wireguard-go", "wg");
    let lab = WgPair::new(9000, 1420, false)?;
    let d = lab.diagnose_idle()?;
    expect_wg_facts(&d, 1420, "ipv4", 60, 9000)?;
    let f = d.expect("mtu.tunnel_undersized", "warning")?;
    d.expect_code(1)?;
    expect_evidence(&d, f, "largest_fitting_mtu", &8940.into())?;
    expect_evidence(&d, f, "underlay_mtu", &9000.into())?;
    expect_fix(&d, f, "mtu 8940")?;
    d.expect_absent("mtu.tunnel_exceeds_underlay")
}

#[test]
fn wireguard_1480_on_1500_fragments_on_the_underlay_under_load() -> Result<()> {
    lab_guard!("wireguard-go", "wg", "iperf3");
    let lab = WgPair::new(1500, 1480, false)?;
    let d = lab.diagnose_loaded(TWIN_RATE)?;
    let f = d.expect("mtu.underlay_fragmentation", "warning")?;
    let fragments = f["evidence"]["underlay_fragments"].as_i64().unwrap_or(0);
    ensure!(
        fragments > 0 && d.fact_i64("tunnel.underlay_fragments")? == fragments,
        "underlay_fragments evidence {fragments} must be positive and equal the fact\n{}",
        d.describe()
    );
    expect_evidence(&d, f, "tunnel_mtu", &1480.into())?;
    expect_evidence(&d, f, "largest_fitting_mtu", &1440.into())?;
    expect_fix(&d, f, "mtu 1440")?;
    // The same misconfiguration, seen from the configuration.
    d.expect("mtu.tunnel_exceeds_underlay", "critical")?;
    Ok(())
}

/// The healthy twin of the three WireGuard scenarios above: 1440 on 1500 fits exactly,
/// and the same iperf3 load produces no fragments.
#[test]
fn wireguard_1440_on_1500_is_healthy_under_load() -> Result<()> {
    lab_guard!("wireguard-go", "wg", "iperf3");
    let lab = WgPair::new(1500, 1440, false)?;
    let d = lab.diagnose_loaded(TWIN_RATE)?;
    expect_wg_facts(&d, 1440, "ipv4", 60, 1500)?;
    ensure!(
        d.fact_i64("tunnel.underlay_fragments")? == 0
            && d.fact_i64("tunnel.overhead_measured")? == 60
            && d.fact_i64("traffic.tx_segments")? > 1000,
        "iperf3 crossed the tunnel unfragmented, with 60 bytes of measured overhead\n{}",
        d.describe()
    );
    d.expect_healthy()
}

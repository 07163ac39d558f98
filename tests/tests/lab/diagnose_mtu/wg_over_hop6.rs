//! A WireGuard tunnel whose underlay path is IPv6, across client — router — server with a
//! 1280 router→server hop: the route toward the endpoint says 1500, only the probe
//! toward the IPv6 endpoint knows better, and the largest tunnel MTU that fits leaves
//! room for WireGuard's 80 bytes over IPv6.

use anyhow::{ensure, Result};
use netdoctor_lab::diagnosis::Diagnosis;
use netdoctor_lab::{lab_guard, LineTopology, WgConfig, WgTunnel};
use serde_json::Value;

use crate::diagnose_mtu::pmtu6::{blackhole_line6, HOP_MTU6};
use crate::diagnose_mtu::report::{diagnose_idle, expect_evidence, expect_fix, MtuChecks};

/// WireGuard over IPv6: 40 bytes of IPv6, 8 of UDP, 32 of WireGuard.
const WG_V6_OVERHEAD: u32 = 80;

struct WgOverHop6 {
    // Declared first: wireguard-go stops before the namespaces go.
    wg: WgTunnel,
    line: LineTopology,
}

impl WgOverHop6 {
    fn new(mtu: u32) -> Result<WgOverHop6> {
        let line = blackhole_line6(false)?;
        let config = WgConfig {
            mtu,
            ..WgConfig::default()
        };
        let wg = WgTunnel::new(
            &line.client,
            LineTopology::CLIENT_IP6,
            &line.server,
            LineTopology::SERVER_IP6,
            &config,
        )?;
        Ok(WgOverHop6 { wg, line })
    }

    /// Diagnoses the client's wg interface, idle; requires the facts of the probed IPv6
    /// path.
    fn diagnose(&self) -> Result<Diagnosis> {
        let d = diagnose_idle(&self.line.client, self.wg.a.ifname())?;
        let endpoint = format!("[{}]:51820", LineTopology::SERVER_IP6);
        ensure!(
            d.fact("tunnel.family") == &Value::from("ipv6")
                && d.fact_i64("tunnel.underlay_mtu")? == 1500
                && d.fact_i64("tunnel.path_mtu")? == i64::from(HOP_MTU6)
                && d.fact_i64("tunnel.effective_underlay_mtu")? == i64::from(HOP_MTU6)
                && d.fact_i64("tunnel.overhead_expected")? == i64::from(WG_V6_OVERHEAD)
                && d.fact_i64("tunnel.max_mtu")? == i64::from(HOP_MTU6 - WG_V6_OVERHEAD)
                && d.fact("peers.0.endpoint") == &Value::from(endpoint)
                && d.fact("peers.0.path_mtu") == &Value::from(HOP_MTU6),
            "IPv6 route MTU 1500, probed path MTU {HOP_MTU6} toward the endpoint, largest \
             tunnel MTU {}\n{}",
            HOP_MTU6 - WG_V6_OVERHEAD,
            d.describe()
        );
        Ok(d)
    }
}

#[test]
fn wireguard_over_an_ipv6_1280_hop_exceeds_the_probed_path() -> Result<()> {
    lab_guard!("wireguard-go", "wg");
    let lab = WgOverHop6::new(1420)?;
    let d = lab.diagnose()?;
    let f = d.expect("mtu.tunnel_exceeds_underlay", "critical")?;
    expect_evidence(&d, f, "underlay_route_mtu", &1500.into())?;
    expect_evidence(&d, f, "underlay_path_mtu", &i64::from(HOP_MTU6).into())?;
    expect_evidence(&d, f, "largest_fitting_mtu", &1200.into())?;
    expect_fix(&d, f, "mtu 1200")?;
    ensure!(
        d.fact("peers.0.blackhole") == &Value::Bool(false)
            && d.fact("probe.too_big_reported") == &Value::Bool(true),
        "the router's packet-too-big arrived: no blackhole\n{}",
        d.describe()
    );
    d.expect_absent("pmtu.blackhole")
}

/// Twin: the tunnel at 1200, whose IPv6 packets are exactly the hop's 1280.
#[test]
fn wireguard_1200_over_an_ipv6_1280_hop_fits() -> Result<()> {
    lab_guard!("wireguard-go", "wg");
    let lab = WgOverHop6::new(HOP_MTU6 - WG_V6_OVERHEAD)?;
    let d = lab.diagnose()?;
    d.expect_absent("mtu.tunnel_exceeds_underlay")?;
    d.expect_absent("mtu.tunnel_undersized")?;
    d.expect_healthy()
}

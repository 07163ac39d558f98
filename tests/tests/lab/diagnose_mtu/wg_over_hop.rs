//! A WireGuard tunnel across client — router — server whose router→server hop is 1400:
//! the route says 1500, only the probe toward the endpoint knows better.

use anyhow::{ensure, Result};
use netdoctor_lab::diagnosis::Diagnosis;
use netdoctor_lab::{lab_guard, LineTopology, WgConfig, WgTunnel};
use serde_json::Value;

use crate::diagnose_mtu::hop_path::{blackhole_line, HOP_MTU};
use crate::diagnose_mtu::report::{diagnose_idle, expect_evidence, expect_fix, MtuChecks};

struct WgOverHop {
    // Declared first: wireguard-go stops before the namespaces go.
    wg: WgTunnel,
    line: LineTopology,
}

impl WgOverHop {
    fn new(filter_icmp: bool) -> Result<WgOverHop> {
        let line = blackhole_line(filter_icmp)?;
        let config = WgConfig {
            mtu: 1440,
            ..WgConfig::default()
        };
        let wg = WgTunnel::new(
            &line.client,
            LineTopology::CLIENT_IP,
            &line.server,
            LineTopology::SERVER_IP,
            &config,
        )?;
        Ok(WgOverHop { wg, line })
    }

    fn diagnose(&self) -> Result<Diagnosis> {
        let d = diagnose_idle(&self.line.client, self.wg.a.ifname())?;
        let endpoint = format!("{}:51820", LineTopology::SERVER_IP);
        ensure!(
            d.fact_i64("tunnel.underlay_mtu")? == 1500
                && d.fact_i64("tunnel.path_mtu")? == i64::from(HOP_MTU)
                && d.fact_i64("tunnel.effective_underlay_mtu")? == i64::from(HOP_MTU)
                && d.fact_i64("tunnel.max_mtu")? == i64::from(HOP_MTU) - 60
                && d.fact("peers.0.endpoint") == &Value::from(endpoint)
                && d.fact("peers.0.path_mtu") == &Value::from(HOP_MTU),
            "route MTU 1500, probed path MTU {HOP_MTU} toward the endpoint, largest tunnel MTU {}\n{}",
            HOP_MTU - 60,
            d.describe()
        );
        Ok(d)
    }
}

#[test]
fn wireguard_over_a_1400_hop_exceeds_the_probed_path() -> Result<()> {
    lab_guard!("wireguard-go", "wg");
    let lab = WgOverHop::new(false)?;
    let d = lab.diagnose()?;
    let f = d.expect("mtu.tunnel_exceeds_underlay", "critical")?;
    d.expect_code(2)?;
    expect_evidence(&d, f, "underlay_route_mtu", &1500.into())?;
    expect_evidence(&d, f, "underlay_path_mtu", &i64::from(HOP_MTU).into())?;
    expect_evidence(&d, f, "largest_fitting_mtu", &1340.into())?;
    expect_fix(&d, f, "mtu 1340")?;
    ensure!(
        d.fact("peers.0.blackhole") == &Value::Bool(false)
            && d.fact("probe.too_big_reported") == &Value::Bool(true),
        "the router reported its MTU: no blackhole\n{}",
        d.describe()
    );
    d.expect_absent("pmtu.blackhole")
}

#[test]
fn wireguard_over_a_blackholed_hop() -> Result<()> {
    lab_guard!("wireguard-go", "wg", "nft");
    let lab = WgOverHop::new(true)?;
    let d = lab.diagnose()?;
    let f = d.expect("pmtu.blackhole", "critical")?;
    expect_evidence(&d, f, "probe_blackhole", &true.into())?;
    expect_evidence(&d, f, "probe_path_mtu", &i64::from(HOP_MTU).into())?;
    expect_evidence(&d, f, "probe_target", &LineTopology::SERVER_IP.into())?;
    ensure!(
        d.fact("peers.0.blackhole") == &Value::Bool(true),
        "the peer's path is the blackholed one\n{}",
        d.describe()
    );
    d.expect("mtu.tunnel_exceeds_underlay", "critical")?;
    // The probe measured the underlay path (1400); the tunnel interface must leave room
    // for WireGuard's 60 bytes: 1340, as mtu.tunnel_exceeds_underlay says. Setting the
    // tunnel to 1400 would keep the outer packets at 1460 and the blackhole.
    expect_fix(
        &d,
        f,
        &format!("ip link set dev {} mtu 1340", lab.wg.a.ifname()),
    )
}

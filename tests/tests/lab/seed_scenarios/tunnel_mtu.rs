//! Seed 1: a WireGuard MTU that ignores the encapsulation overhead.

use anyhow::{ensure, Result};
use netdoctor_lab::{lab_guard, PairTopology, WgConfig, WgTunnel};
use serde_json::Value;

use crate::common_mesh::{diagnose, join, mtu_fix, Diagnosis, MTU_FINDINGS};

/// A WireGuard tunnel over a pair; the tunnel drops before the namespaces.
#[derive(Debug)]
struct WgOverPair {
    wg: WgTunnel,
    pair: PairTopology,
}

impl WgOverPair {
    fn new(mtu: u32) -> Result<WgOverPair> {
        let pair = PairTopology::new(1500)?;
        let config = WgConfig {
            mtu,
            ..WgConfig::default()
        };
        let wg = WgTunnel::new(
            &pair.a,
            PairTopology::A_IP,
            &pair.b,
            PairTopology::B_IP,
            &config,
        )?;
        Ok(WgOverPair { wg, pair })
    }
}

fn wg_mtu_scenario(mtu: u32) -> Result<Diagnosis> {
    let t = WgOverPair::new(mtu)?;
    diagnose(&t.pair.a, t.wg.a.ifname(), "3s", &[])
}

#[test]
fn seed_1_tunnel_mtu_ignores_overhead() -> Result<()> {
    lab_guard!("wireguard-go", "wg", "ping");
    // WireGuard over IPv4 adds 60 bytes: 1440 is the largest MTU a 1500 underlay carries.
    let (broken, healthy) = std::thread::scope(|s| -> Result<(Diagnosis, Diagnosis)> {
        let broken = s.spawn(|| wg_mtu_scenario(1500));
        let healthy = s.spawn(|| wg_mtu_scenario(1440));
        Ok((join(broken, "wg MTU 1500")?, join(healthy, "wg MTU 1440")?))
    })?;

    let f = broken.finding("mtu.tunnel_exceeds_underlay")?;
    ensure!(
        f.get("severity").and_then(Value::as_str) == Some("critical"),
        "severity: {f}"
    );
    ensure!(
        broken.str("/facts/tunnel/kind")? == "wireguard"
            && broken.i64("/facts/tunnel/overhead_expected")? == 60
            && broken.str("/facts/tunnel/underlay_iface")? == PairTopology::IFNAME
            && broken.i64("/facts/tunnel/max_mtu")? == 1440,
        "tunnel facts: {}",
        broken.describe()
    );
    let iface = broken.str("/interface")?;
    let fix = f.get("fix").and_then(Value::as_str).unwrap_or_default();
    ensure!(
        fix.contains(&mtu_fix(iface, 1440)),
        "fix {fix:?} does not set {iface} to 1440"
    );
    let endpoint = format!("{}:{}", PairTopology::B_IP, WgConfig::default().listen_port);
    ensure!(
        broken
            .at("/facts/tunnel/endpoints")?
            .as_array()
            .is_some_and(|e| e.iter().any(|x| x.as_str() == Some(&endpoint))),
        "endpoint {endpoint} missing: {}",
        broken.describe()
    );

    healthy.assert_none_of(MTU_FINDINGS)?;
    ensure!(
        healthy.i64("/facts/tunnel/max_mtu")? == 1440 && healthy.i64("/facts/iface/mtu")? == 1440,
        "healthy twin: {}",
        healthy.describe()
    );
    Ok(())
}

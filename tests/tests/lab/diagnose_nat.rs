//! `nat.masquerade_missing` end to end: a road-warrior gateway that forwards its WireGuard
//! clients out of its uplink without translating their private tunnel addresses.
//!
//! ```text
//! client ── eth0 (10.200.1.0/24, WireGuard 10.250.0.0/24 over it) ── gateway ── eth1 ── server
//!                                                                     uplink, default route
//! ```
//!
//! The client (road warrior) routes the server's network through the tunnel; the server has
//! no route back to 10.250.0.0/24 (as the Internet has none to private addresses). Without a
//! masquerade rule the client's pings leave the gateway's uplink with source 10.250.0.2 and
//! are never answered: critical finding naming the uplink, with the nft and iptables fixes.
//! The healthy twin has the fix's masquerade rule: the pings are answered, nothing leaves
//! untranslated, no finding. A masquerade on another interface than the uplink does not
//! count. The gateways clamp the MSS (a rule for the tunnel), so that the twin is healthy in
//! every other respect.
//!
//! The uplink is where the clients' traffic is routed, not only the default route's
//! interface: a gateway with no default route that reaches the far side by a static route
//! (198.51.100.0/24 via the server), and one whose far side is a connected network while
//! its default route leaves by another interface (`up9`, a decoy nothing is sent through),
//! get the finding naming eth1; their twins with the masquerade on eth1, none.
//!
//! Needs root, BPF, wireguard-go, wg, nft, ping; skips elsewhere, fails under CI=true.
//! Build the binary first: `cargo build -p netdoctor`.

use std::time::Duration;

use anyhow::{ensure, Context, Result};
use netdoctor_lab::diagnosis::Diagnosis;
use netdoctor_lab::traffic::{self, PingOpts, PingReport};
use netdoctor_lab::{lab_guard, observe, LineConfig, LineTopology, WgConfig, WgTunnel};
use serde_json::Value;

const WINDOW: Duration = Duration::from_secs(3);
const TUNNEL_RANGE: &str = "10.250.0.0/24";
const SERVER_NET: &str = "10.200.2.0/24";

/// The road-warrior lab: the gateway is the line's router, WireGuard runs between client
/// and gateway over the client link, the uplink is the router's eth1.
struct RoadWarrior {
    // Declared first: wireguard-go stops before the namespaces go.
    wg: WgTunnel,
    line: LineTopology,
}

/// How the gateway reaches the far side (the server's networks, out of eth1).
#[derive(Clone, Copy, PartialEq, Eq)]
enum FarSide {
    /// Its default route, via the server.
    Default,
    /// A static route to [`FAR_NET`] via the server; no default route.
    Static,
    /// The connected server network, with the default route out of the decoy `up9`.
    Connected,
}

/// The far network of [`FarSide::Static`], and the server's address in it.
const FAR_NET: &str = "198.51.100.0/24";
const FAR_IP: &str = "198.51.100.7";

impl RoadWarrior {
    fn new() -> Result<RoadWarrior> {
        Self::reaching(FarSide::Default)
    }

    /// The lab with the far side reached `how`; the client sends the server's networks
    /// (and [`FAR_NET`]) into the tunnel.
    fn reaching(how: FarSide) -> Result<RoadWarrior> {
        let line = LineTopology::new(&LineConfig::default())?;
        // The "Internet" has no route back to private tunnel addresses.
        line.server.ip(&["route", "del", "default"])?;
        let gw = &line.router;
        match how {
            // The gateway's uplink is its default route.
            FarSide::Default => {
                gw.ip(&["route", "add", "default", "via", LineTopology::SERVER_IP])?
            }
            FarSide::Static => {
                line.server
                    .add_addr(LineTopology::SERVER_IF, &format!("{FAR_IP}/32"))?;
                gw.ip(&[
                    "route",
                    "add",
                    FAR_NET,
                    "via",
                    LineTopology::SERVER_IP,
                    "dev",
                    "eth1",
                ])?
            }
            FarSide::Connected => {
                gw.ip(&["link", "add", "up9", "type", "veth", "peer", "name", "up9p"])?;
                gw.ip(&["link", "set", "up9p", "up"])?;
                gw.ip(&["link", "set", "up9", "up"])?;
                gw.ip(&["addr", "add", "192.0.2.1/24", "dev", "up9"])?;
                gw.ip(&[
                    "route",
                    "add",
                    "default",
                    "via",
                    "192.0.2.254",
                    "dev",
                    "up9",
                ])?
            }
        };
        let wg = WgTunnel::new(
            &line.router,
            LineTopology::ROUTER_CLIENT_SIDE_IP,
            &line.client,
            LineTopology::CLIENT_IP,
            &WgConfig::default(),
        )?;
        // The client sends the server's network into the tunnel.
        wg.b.add_peer(
            wg.a.public_key(),
            Some(&format!(
                "{}:{}",
                LineTopology::ROUTER_CLIENT_SIDE_IP,
                wg.a.listen_port()
            )),
            &format!("{}/32,{SERVER_NET},{FAR_NET}", wg.a.ip()),
            None,
        )?;
        for net in [SERVER_NET, FAR_NET] {
            line.client
                .ip(&["route", "replace", net, "dev", wg.b.ifname()])?;
        }
        for rule in [
            "add table inet mssfix",
            "add chain inet mssfix forward { type filter hook forward priority mangle; }",
        ] {
            gw.run(&["nft", rule])?;
        }
        gw.run(&[
            "nft",
            "add",
            "rule",
            "inet",
            "mssfix",
            "forward",
            "oifname",
            wg.a.ifname(),
            "tcp",
            "flags",
            "syn",
            "tcp",
            "option",
            "maxseg",
            "size",
            "set",
            "rt",
            "mtu",
        ])?;
        Ok(RoadWarrior { wg, line })
    }

    /// The fix's masquerade rule on the gateway, for packets leaving through `oifname`
    /// (the uplink, [`LineTopology::ROUTER_SERVER_IF`], in the fix).
    fn masquerade(&self, oifname: &str) -> Result<()> {
        let gw = &self.line.router;
        gw.run(&["nft", "add table ip nat"])?;
        gw.run(&[
            "nft",
            "add chain ip nat postrouting { type nat hook postrouting priority srcnat; }",
        ])?;
        gw.run(&[
            "nft",
            "add",
            "rule",
            "ip",
            "nat",
            "postrouting",
            "ip",
            "saddr",
            TUNNEL_RANGE,
            "oifname",
            oifname,
            "masquerade",
        ])?;
        Ok(())
    }

    /// Diagnoses the gateway's WireGuard interface while the client pings the server
    /// through the tunnel.
    fn diagnose(&self) -> Result<(Diagnosis, PingReport)> {
        self.diagnose_pinging(LineTopology::SERVER_IP)
    }

    /// The same, the client pinging `target`.
    fn diagnose_pinging(&self, target: &str) -> Result<(Diagnosis, PingReport)> {
        observe::diagnose_during(&self.line.router, self.wg.a.ifname(), WINDOW, &[], || {
            let opts = PingOpts {
                count: 15,
                interval_secs: 0.2,
                ..PingOpts::default()
            };
            traffic::ping(&self.line.client, target, &opts)
        })
    }
}

fn fact<'a>(d: &'a Diagnosis, path: &str) -> &'a Value {
    d.fact(path)
}

#[test]
fn road_warrior_gateway_without_masquerade_is_critical_and_names_the_uplink() -> Result<()> {
    lab_guard!("wireguard-go", "wg", "nft", "ping");
    let lab = RoadWarrior::new()?;
    let (d, ping) = lab.diagnose()?;
    ensure!(
        ping.transmitted > 0 && ping.received == 0,
        "without translation nothing may come back: {}",
        ping.output
    );
    let uplink = LineTopology::ROUTER_SERVER_IF;
    ensure!(
        fact(&d, "nat.uplink") == uplink
            && fact(&d, "nat.private_sources") == &serde_json::json!([TUNNEL_RANGE])
            && fact(&d, "nat.masquerade") == false
            && fact(&d, "nat.answered_flows") == 0,
        "the NAT facts do not show the untranslated uplink:\n{}",
        d.describe()
    );
    let f = d.expect_finding("nat.masquerade_missing", "critical")?;
    let leaked = f["evidence"]["leaked_packets"].as_i64().unwrap_or(0);
    ensure!(
        leaked > 0 && f["evidence"]["uplink"] == uplink,
        "evidence: {}\n{}",
        f["evidence"],
        d.describe()
    );
    let summary = f["summary"].as_str().unwrap_or("");
    ensure!(
        summary.contains(&format!("uplink {uplink}")),
        "the summary must name the uplink: {summary}"
    );
    let fix = f["fix"].as_str().unwrap_or("");
    for line in [
        format!("nft add rule ip nat postrouting ip saddr {TUNNEL_RANGE} oifname \"{uplink}\" masquerade"),
        format!("iptables -t nat -A POSTROUTING -s {TUNNEL_RANGE} -o {uplink} -j MASQUERADE"),
    ] {
        ensure!(fix.contains(&line), "the fix lacks `{line}`: {fix}");
    }
    ensure!(d.code == 2, "a critical finding exits 2:\n{}", d.describe());
    Ok(())
}

#[test]
fn road_warrior_gateway_with_masquerade_is_healthy() -> Result<()> {
    lab_guard!("wireguard-go", "wg", "nft", "ping");
    let lab = RoadWarrior::new()?;
    lab.masquerade(LineTopology::ROUTER_SERVER_IF)?;
    let (d, ping) = lab.diagnose()?;
    ensure!(
        ping.received * 10 >= ping.transmitted * 8,
        "the masquerade must let the replies back: {}",
        ping.output
    );
    let rule = fact(&d, "nat.rule").as_str().context("nat.rule")?;
    ensure!(
        fact(&d, "nat.masquerade") == true
            && rule.contains("masquerade")
            && fact(&d, "nat.leaked_flows") == 0,
        "the masquerade unseen, or packets left untranslated:\n{}",
        d.describe()
    );
    ensure!(
        d.all("nat.masquerade_missing").is_empty(),
        "nat.masquerade_missing with the masquerade in place:\n{}",
        d.describe()
    );
    d.expect_healthy()
}

/// A masquerade that covers the tunnel's range leaving through another interface (the
/// client side) translates nothing on the uplink: it does not count, and the finding stays.
#[test]
fn a_masquerade_on_another_interface_does_not_count() -> Result<()> {
    lab_guard!("wireguard-go", "wg", "nft", "ping");
    let lab = RoadWarrior::new()?;
    lab.masquerade(LineTopology::ROUTER_CLIENT_IF)?;
    let (d, ping) = lab.diagnose()?;
    ensure!(
        ping.transmitted > 0 && ping.received == 0,
        "a masquerade on the client side cannot let replies back: {}",
        ping.output
    );
    ensure!(
        fact(&d, "nat.masquerade") == false
            && fact(&d, "nat.rule") == ""
            && fact(&d, "nat.uncovered_source") == TUNNEL_RANGE,
        "the masquerade on {} was taken as covering the uplink:\n{}",
        LineTopology::ROUTER_CLIENT_IF,
        d.describe()
    );
    d.expect_finding("nat.masquerade_missing", "critical")?;
    Ok(())
}

/// The far side reached `how`, the client pinging `target` through the tunnel: without a
/// masquerade, the finding names eth1, where the clients' traffic is routed out; with one
/// there (the twin), the pings are answered and nothing is found.
fn uplink_found_by_routing(how: FarSide, target: &str) -> Result<()> {
    lab_guard!("wireguard-go", "wg", "nft", "ping");
    let uplink = LineTopology::ROUTER_SERVER_IF;
    let lab = RoadWarrior::reaching(how)?;
    let (d, ping) = lab.diagnose_pinging(target)?;
    let ctx = || format!("nat: {}\n{}", d.fact("nat"), d.describe());
    ensure!(
        ping.transmitted > 0 && ping.received == 0,
        "without translation nothing may come back: {}",
        ping.output
    );
    ensure!(
        fact(&d, "nat.uplink") == uplink
            && fact(&d, "nat.uplinks") == &serde_json::json!([uplink])
            && fact(&d, "nat.masquerade") == false
            && fact(&d, "nat.leaked_flows").as_i64().unwrap_or(0) > 0,
        "the clients' uplink is not {uplink}, or nothing left it untranslated: {}",
        ctx()
    );
    let f = d.expect_finding("nat.masquerade_missing", "critical")?;
    let fix = f["fix"].as_str().unwrap_or("");
    ensure!(
        f["evidence"]["uplink"] == uplink
            && fix.contains(&format!("oifname \"{uplink}\" masquerade"))
            && fix.contains(&format!("-o {uplink} -j MASQUERADE")),
        "the finding does not name {uplink}: {f}"
    );

    let twin = RoadWarrior::reaching(how)?;
    twin.masquerade(uplink)?;
    let (d, ping) = twin.diagnose_pinging(target)?;
    ensure!(
        ping.received * 10 >= ping.transmitted * 8,
        "the masquerade must let the replies back: {}",
        ping.output
    );
    ensure!(
        fact(&d, "nat.uplink") == uplink
            && fact(&d, "nat.masquerade") == true
            && fact(&d, "nat.leaked_flows") == 0,
        "the twin's uplink or masquerade unseen: nat: {}\n{}",
        d.fact("nat"),
        d.describe()
    );
    d.expect_healthy()
}

/// No default route: the far network is reached by a static route out of eth1.
#[test]
fn a_gateway_reaching_the_far_side_by_a_static_route_is_checked() -> Result<()> {
    uplink_found_by_routing(FarSide::Static, FAR_IP)
}

/// The far side is eth1's connected network; the default route leaves by `up9`, which the
/// clients' traffic never takes.
#[test]
fn a_gateway_reaching_the_far_side_by_a_connected_route_is_checked() -> Result<()> {
    uplink_found_by_routing(FarSide::Connected, LineTopology::SERVER_IP)
}

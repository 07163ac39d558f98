//! Kernel WireGuard read over generic netlink (`netdoctor wireguard IFACE`) against
//! `wg show IFACE dump` on the same tunnel: listen port, and per peer the endpoint, allowed
//! IPs, latest handshake, byte counters and keepalive; with an IPv4 endpoint, then an IPv6 one.

use std::collections::BTreeSet;

use anyhow::{ensure, Context, Result};
use netdoctor_lab::kernel_lane::Run;
use serde_json::{json, Value};

/// `wg show dump`: the device line, then one line per peer, tab-separated.
fn from_dump(text: &str) -> Result<Value> {
    let mut lines = text.lines();
    let dev: Vec<&str> = lines.next().context("empty dump")?.split('\t').collect();
    let mut peers = Vec::new();
    for line in lines {
        let c: Vec<&str> = line.split('\t').collect();
        ensure!(c.len() == 8, "peer line with {} fields: {line}", c.len());
        let num = |s: &str| s.parse::<u64>().unwrap_or(0);
        let allowed: BTreeSet<&str> = c[3].split(',').filter(|s| *s != "(none)").collect();
        peers.push(json!({
            "public_key": c[0],
            "endpoint": if c[2] == "(none)" { Value::Null } else { json!(c[2]) },
            "allowed_ips": allowed,
            "last_handshake_unix": num(c[4]),
            "rx_bytes": num(c[5]),
            "tx_bytes": num(c[6]),
            "persistent_keepalive": num(c[7]),
        }));
    }
    Ok(
        json!({ "listen_port": dev.get(2).map_or(0, |p| p.parse::<u64>().unwrap_or(0)), "peers": peers }),
    )
}

/// netdoctor's JSON in the dump's shape (allowed IPs as a set).
fn from_netdoctor(v: &Value) -> Value {
    let peers: Vec<Value> = v["peers"]
        .as_array()
        .map_or(&[][..], Vec::as_slice)
        .iter()
        .map(|p| {
            let allowed: BTreeSet<&str> = p["allowed_ips"]
                .as_array()
                .map_or(&[][..], Vec::as_slice)
                .iter()
                .filter_map(Value::as_str)
                .collect();
            json!({
                "public_key": p["public_key"],
                "endpoint": p["endpoint"],
                "allowed_ips": allowed,
                "last_handshake_unix": p["last_handshake_unix"],
                "rx_bytes": p["rx_bytes"],
                "tx_bytes": p["tx_bytes"],
                "persistent_keepalive": p["persistent_keepalive"],
            })
        })
        .collect();
    json!({ "listen_port": v["listen_port"], "peers": peers })
}

/// The counters a packet crossing the tunnel moves (a keepalive may, between two reads).
const MOVING: [&str; 3] = ["last_handshake_unix", "rx_bytes", "tx_bytes"];

/// `ours` equals `before` and `after` field by field, except that each of [`MOVING`] may lie
/// anywhere from its value in `before` to its value in `after`.
fn between(before: &Value, ours: &Value, after: &Value) -> bool {
    let still = |v: &Value| {
        let mut v = v.clone();
        for p in v["peers"].as_array_mut().into_iter().flatten() {
            for k in MOVING {
                p[k] = Value::Null;
            }
        }
        v
    };
    let peers = |v: &Value| v["peers"].as_array().cloned().unwrap_or_default();
    still(before) == still(ours)
        && still(after) == still(ours)
        && peers(ours)
            .iter()
            .zip(peers(before).iter().zip(peers(after).iter()))
            .all(|(o, (b, a))| {
                MOVING
                    .iter()
                    .all(|k| (b[*k].as_u64()..=a[*k].as_u64()).contains(&o[*k].as_u64()))
            })
}

/// Both families: netdoctor equals `wg show`, field by field, the moving counters between
/// the two reads of `wg show` around it.
pub fn check(run: &Run) -> Result<()> {
    for fam in ["4", "6"] {
        let case = format!("wgshow{fam}");
        ensure!(
            run.rc(&case) == 0,
            "{case}: netdoctor wireguard exited {}",
            run.rc(&case)
        );
        let before = from_dump(&run.text(&format!("{case}.before")))?;
        let after = from_dump(&run.text(&format!("{case}.after")))?;
        let ours = from_netdoctor(&run.json(&format!("{case}.out"))?);
        ensure!(
            between(&before, &ours, &after),
            "{case}: netdoctor read\n{ours}\nwg show read before it\n{before}\nand after it\n{after}"
        );
        let peer = &before["peers"][0];
        let endpoint = peer["endpoint"].as_str().unwrap_or_default();
        ensure!(
            (fam == "6") == endpoint.starts_with('['),
            "{case}: endpoint {endpoint} is not IPv{fam}"
        );
        ensure!(
            peer["persistent_keepalive"] == 25
                && peer["allowed_ips"].as_array().map(Vec::len) == Some(2)
                && peer["last_handshake_unix"].as_u64() > Some(0)
                && peer["rx_bytes"].as_u64() > Some(0),
            "{case}: the tunnel is not the one set up (keepalive 25, two allowed IPs, a handshake, traffic): {peer}"
        );
    }
    Ok(())
}

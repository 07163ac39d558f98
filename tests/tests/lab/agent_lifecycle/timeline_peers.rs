//! The timeline's kinds compared each window, on a real tunnel and a real firewall: a
//! WireGuard peer added to the running tunnel, its endpoint and its allowed IPs changed,
//! the peer removed; a masquerade rule out of the tunnel added to nftables and removed.
//! Each is in `/api/v1/events` within one interval, on its interface, with its old and new
//! values, and counted by kind in the metrics. (The no-change control is in `timeline`.)

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{ensure, Context, Result};
use netdoctor_lab::agent::Agent;
use netdoctor_lab::lab_guard;

use crate::agent_lifecycle::lab::{mtu_lab, FITTING_MTU, SETTLE};
use crate::agent_lifecycle::timeline::{expect_counted, within_one_interval, INTERVAL};

/// nftables table the test adds its NAT rule in (inside the lab's namespace).
const TABLE: &str = "ndtimeline";

/// A fresh WireGuard public key (`wg genkey | wg pubkey`).
fn public_key() -> Result<String> {
    let private = Command::new("wg").arg("genkey").output()?.stdout;
    let mut child = Command::new("wg")
        .arg("pubkey")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .context("running wg pubkey")?;
    child
        .stdin
        .take()
        .context("wg pubkey's stdin")?
        .write_all(&private)?;
    let out = child.wait_with_output()?;
    let key = String::from_utf8(out.stdout)?.trim().to_owned();
    ensure!(key.len() == 44, "wg pubkey printed {key:?}");
    Ok(key)
}

/// What the timeline calls a peer: the key's first 8 characters and an ellipsis.
fn short(key: &str) -> String {
    format!("{}…", &key[..8])
}

#[test]
fn agent_records_wireguard_peer_and_nat_rule_changes() -> Result<()> {
    lab_guard!("ping", "wireguard-go", "wg", "nft");
    let (pair, wg) = mtu_lab(FITTING_MTU)?;
    let ns = &pair.a;
    let name = wg.a.ifname();
    let interval = format!("{}s", INTERVAL.as_secs());
    let agent = Agent::start(ns, &["--no-probe", "--interval", &interval])?;
    agent.poll(
        &format!("/api/v1/interfaces/{name}"),
        SETTLE,
        "the tunnel's first window with its peer",
        |r| {
            r.json["facts"]["peers"]
                .as_array()
                .filter(|p| !p.is_empty())
                .map(drop)
        },
    )?;

    // A second peer: added with its endpoint and allowed IPs.
    let key = public_key()?;
    let peer = short(&key);
    let changed = Instant::now();
    wg.a.add_peer(&key, Some("10.201.0.9:51820"), "10.98.0.0/24", None)?;
    let added = within_one_interval(
        &agent,
        changed,
        "wireguard.peer",
        &format!("{name}'s WireGuard peer {peer} added"),
    )?;
    ensure!(
        added["interface"] == name && added["change"] == "added" && added["new"] == key,
        "the peer event: {added}"
    );

    // Its endpoint, then its allowed IPs, each with the old and the new value.
    let changed = Instant::now();
    wg.a.wg(&["set", name, "peer", &key, "endpoint", "10.201.0.10:51820"])?;
    within_one_interval(
        &agent,
        changed,
        "wireguard.endpoint",
        &format!("{name}'s peer {peer} endpoint changed 10.201.0.9:51820 → 10.201.0.10:51820"),
    )?;
    let changed = Instant::now();
    wg.a.wg(&[
        "set",
        name,
        "peer",
        &key,
        "allowed-ips",
        "10.98.0.0/24,10.99.0.0/24",
    ])?;
    within_one_interval(
        &agent,
        changed,
        "wireguard.allowed_ips",
        &format!(
            "{name}'s peer {peer} allowed IPs changed 10.98.0.0/24 → 10.98.0.0/24, 10.99.0.0/24"
        ),
    )?;

    // A masquerade rule out of the tunnel: on the tunnel, added; then removed.
    let changed = Instant::now();
    ns.run(&["nft", "add", "table", "ip", TABLE])?;
    ns.run(&[
        "nft",
        &format!("add chain ip {TABLE} post {{ type nat hook postrouting priority 100 ; }}"),
    ])?;
    ns.run(&[
        "nft",
        &format!("add rule ip {TABLE} post oifname \"{name}\" masquerade"),
    ])?;
    let rule = format!("nftables ip {TABLE} post (postrouting): oifname \"{name}\" -> masquerade");
    let nat = within_one_interval(&agent, changed, "firewall", &format!("{rule} added"))?;
    ensure!(
        nat["interface"] == name && nat["change"] == "added",
        "the firewall event: {nat}"
    );
    let changed = Instant::now();
    ns.run(&["nft", "delete", "table", "ip", TABLE])?;
    within_one_interval(&agent, changed, "firewall", &format!("{rule} removed"))?;

    // The peer removed.
    let changed = Instant::now();
    wg.a.wg(&["set", name, "peer", &key, "remove"])?;
    within_one_interval(
        &agent,
        changed,
        "wireguard.peer",
        &format!("{name}'s WireGuard peer {peer} removed"),
    )?;

    expect_counted(
        &agent,
        &[
            ("wireguard.peer", 2.0),
            ("wireguard.endpoint", 1.0),
            ("wireguard.allowed_ips", 1.0),
            ("firewall", 2.0),
        ],
    )
}

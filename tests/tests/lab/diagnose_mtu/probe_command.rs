//! `netdoctor probe` on a blackhole, on a path with working PMTUD and on a direct link,
//! each checked against ping.

use std::time::Duration;

use anyhow::{ensure, Context, Result};
use netdoctor_lab::netdoctor;
use netdoctor_lab::{lab_guard, LineTopology, Netns, PairTopology};
use serde_json::Value;

use crate::diagnose_mtu::hop_path::{blackhole_line, df_ping, HOP_MTU};

/// `netdoctor probe TARGET --json`, parsed, with its schema checked.
pub(crate) fn probe(ns: &Netns, target: &str) -> Result<Value> {
    let out = netdoctor::run(
        Some(ns),
        &["probe", target, "--json"],
        Duration::from_secs(60),
    )?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    ensure!(
        out.status.code() == Some(0),
        "`netdoctor probe {target}` exited with {}; stderr: {stderr}",
        out.status
    );
    let json: Value = serde_json::from_str(&stdout)
        .with_context(|| format!("`netdoctor probe {target}` printed no JSON: {stdout}"))?;
    for key in [
        "target",
        "path_mtu",
        "max_size",
        "too_big",
        "blackhole",
        "probes",
        "elapsed_ms",
    ] {
        ensure!(json.get(key).is_some(), "probe JSON lacks {key:?}: {json}");
    }
    ensure!(
        json["target"] == target && json["too_big"].is_array(),
        "probe JSON: target/too_big malformed: {json}"
    );
    println!("netdoctor probe {target}: {json}");
    Ok(json)
}

#[test]
fn probe_command_on_blackhole_working_pmtud_and_direct_link() -> Result<()> {
    lab_guard!("nft", "ping");
    // Blackhole: sizes above 1400 vanish, nobody reports them.
    let line = blackhole_line(true)?;
    let p = probe(&line.client, LineTopology::SERVER_IP)?;
    ensure!(
        p["blackhole"] == true
            && p["path_mtu"] == i64::from(HOP_MTU)
            && p["max_size"] == 1500
            && p["too_big"] == serde_json::json!([]),
        "blackhole: expected path_mtu {HOP_MTU}, blackhole, no too_big: {p}"
    );
    // Ground truth with ping: 1400 passes, 1401 is lost without an error report.
    let fits = df_ping(&line, HOP_MTU)?;
    let over = df_ping(&line, HOP_MTU + 1)?;
    ensure!(
        fits.all_received() && over.received == 0 && over.errors == 0,
        "ping disagrees about the blackhole:\n{}\n{}",
        fits.output,
        over.output
    );
    drop(line);

    // Same path, ICMP allowed: the router reports its MTU.
    let line = blackhole_line(false)?;
    let p = probe(&line.client, LineTopology::SERVER_IP)?;
    ensure!(
        p["blackhole"] == false
            && p["path_mtu"] == i64::from(HOP_MTU)
            && p["too_big"]
                == serde_json::json!([{ "from": LineTopology::ROUTER_CLIENT_SIDE_IP, "mtu": HOP_MTU }]),
        "working PMTUD: expected path_mtu {HOP_MTU}, too_big from {} with mtu {HOP_MTU}: {p}",
        LineTopology::ROUTER_CLIENT_SIDE_IP
    );
    let over = df_ping(&line, HOP_MTU + 1)?;
    ensure!(
        over.received == 0 && (over.errors > 0 || over.output.contains("mtu = 1400")),
        "ping over the hop MTU should be refused with an error: {}",
        over.output
    );
    drop(line);

    // A direct veth: the full 1500.
    let pair = PairTopology::new(1500)?;
    let p = probe(&pair.a, PairTopology::B_IP)?;
    ensure!(
        p["blackhole"] == false && p["path_mtu"] == 1500 && p["too_big"] == serde_json::json!([]),
        "direct veth: expected path_mtu 1500 and nothing else: {p}"
    );
    Ok(())
}

/// `netdoctor probe TARGET` in `ns`: requires exit code 3, nothing on stdout, and a
/// message with every one of `needles` and none of `never`; returns it.
fn refused(ns: &Netns, target: &str, needles: &[&str], never: &[&str]) -> Result<String> {
    let out = netdoctor::run(Some(ns), &["probe", target], Duration::from_secs(60))?;
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    ensure!(
        out.status.code() == Some(netdoctor::EXIT_UNKNOWN) && out.stdout.is_empty(),
        "`netdoctor probe {target}`: {}, stdout {:?}; stderr: {stderr}",
        out.status,
        String::from_utf8_lossy(&out.stdout)
    );
    for needle in needles {
        ensure!(
            stderr.contains(needle),
            "`netdoctor probe {target}` does not say {needle:?}: {stderr}"
        );
    }
    for wrong in never {
        ensure!(
            !stderr.contains(wrong),
            "`netdoctor probe {target}` says {wrong:?}: {stderr}"
        );
    }
    println!("netdoctor probe {target}: {}", stderr.trim());
    Ok(stderr)
}

#[test]
fn probe_command_says_a_local_address_has_no_path() -> Result<()> {
    lab_guard!("ping");
    let pair = PairTopology::new(1500)?;
    let ns = &pair.a;
    // Loopback and the host's own address: no path; loopback's MTU named, and no word of
    // a --max-size nobody gave.
    for local in ["127.0.0.1", PairTopology::A_IP] {
        refused(
            ns,
            local,
            &[
                "is an address of this host",
                "no path to probe",
                "MTU 65536",
            ],
            &["--max-size"],
        )?;
    }
    // Twins: a --max-size that is out of range is still refused as such, and the peer's
    // address is probed.
    let out = netdoctor::run(
        Some(ns),
        &["probe", PairTopology::B_IP, "--max-size", "70000"],
        Duration::from_secs(60),
    )?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    ensure!(
        out.status.code() == Some(netdoctor::EXIT_UNKNOWN) && stderr.contains("--max-size 70000"),
        "--max-size 70000: {}: {stderr}",
        out.status
    );
    let p = probe(ns, PairTopology::B_IP)?;
    ensure!(p["path_mtu"] == 1500, "the peer: {p}");
    Ok(())
}

#[test]
fn probe_command_names_a_broadcast_address() -> Result<()> {
    lab_guard!("ping");
    let pair = PairTopology::new(1500)?;
    let ns = &pair.a;
    // The /24's broadcast address: why the kernel refuses, and what to probe instead.
    refused(
        ns,
        "10.201.0.255",
        &[
            "broadcast address",
            "SO_BROADCAST",
            "probe one host's address",
        ],
        &["os error 13"],
    )?;
    // Twin: a host of the same /24 is probed.
    let p = probe(ns, PairTopology::B_IP)?;
    ensure!(p["path_mtu"] == 1500, "the peer: {p}");
    Ok(())
}

//! The lab's fixed figures (addresses, underlay MTU, ports, observation window, tools) and
//! the daemons' configuration files and keys.

use std::path::Path;

use anyhow::{Context, Result};
use netdoctor_lab::cmd;

/// Tunnel (overlay) addresses of the two sides.
pub(crate) const TUNNEL_A: &str = "10.250.0.1";
pub(crate) const TUNNEL_B: &str = "10.250.0.2";
/// The veth underlay's MTU.
pub(crate) const UNDERLAY_MTU: i64 = 1500;
pub(crate) const TINC_PORT: u16 = 655;
pub(crate) const FASTD_PORT: u16 = 10000;
/// VpnCloud's default port.
pub(crate) const VPNCLOUD_PORT: u16 = 3210;
/// Observation window of each diagnosis.
pub(crate) const WINDOW: &str = "4s";
/// Length of the iperf3 run that keeps the tunnel busy during a diagnosis.
pub(crate) const LOAD_SECS: u32 = 9;

/// Tools of the tinc tests, the fastd tests, and of the test using both.
pub(crate) const TINC_TOOLS: &[&str] = &["tincd", "iperf3", "nft", "ping"];
pub(crate) const FASTD_TOOLS: &[&str] = &["fastd", "iperf3", "nft", "ping"];
pub(crate) const BOTH_TOOLS: &[&str] = &["tincd", "fastd", "ping"];
/// VpnCloud is built by the lab (`netdoctor_lab::vpncloud`), not found on PATH.
pub(crate) const VPNCLOUD_TOOLS: &[&str] = &["iperf3", "nft", "ping"];

pub(crate) fn write(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

pub(crate) fn tinc_node(
    dir: &Path,
    name: &str,
    other: &str,
    underlay_ip: &str,
    ifname: &str,
) -> Result<()> {
    std::fs::create_dir_all(dir.join("hosts"))
        .with_context(|| format!("creating {}", dir.display()))?;
    write(
        &dir.join("tinc.conf"),
        &format!(
            "Name = {name}\nMode = switch\nInterface = {ifname}\nConnectTo = {other}\nAddressFamily = ipv4\n"
        ),
    )?;
    write(
        &dir.join("hosts").join(name),
        &format!("Address = {underlay_ip}\nPort = {TINC_PORT}\n"),
    )?;
    // Appends the public key to hosts/NAME; stdin is /dev/null, so no questions.
    cmd::host_run(&["tincd", "-c", &dir.to_string_lossy(), "-K2048"])
        .with_context(|| format!("generating tinc keys for {name}"))?;
    Ok(())
}

pub(crate) fn fastd_keys() -> Result<(String, String)> {
    let out = cmd::host_run(&["fastd", "--generate-key"])?;
    let get = |label: &str| {
        out.lines()
            .find_map(|l| l.strip_prefix(label))
            .map(|k| k.trim().to_owned())
            .with_context(|| format!("no {label:?} in `fastd --generate-key` output: {out}"))
    };
    Ok((get("Secret:")?, get("Public:")?))
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn fastd_config(
    ifname: &str,
    method: &str,
    mtu: u32,
    bind_ip: &str,
    secret: &str,
    peer: &str,
    peer_key: &str,
    peer_ip: &str,
) -> String {
    format!(
        "interface \"{ifname}\";\nmode tap;\nmethod \"{method}\";\nbind {bind_ip}:{FASTD_PORT};\n\
         secret \"{secret}\";\nmtu {mtu};\npeer \"{peer}\" {{\n  key \"{peer_key}\";\n  \
         remote {peer_ip}:{FASTD_PORT};\n}}\n"
    )
}

/// A VpnCloud 2.x configuration (YAML, as `vpncloud config` writes it) for a TAP device
/// `ifname` in switch mode, listening on [`VPNCLOUD_PORT`], connecting to `peer_ip`, with
/// a shared password and `algorithms` (empty: VpnCloud's defaults). No port forwarding:
/// nothing but the tunnel leaves the namespace.
pub(crate) fn vpncloud_config(ifname: &str, peer_ip: &str, algorithms: &[&str]) -> String {
    let algorithms = if algorithms.is_empty() {
        String::new()
    } else {
        format!("  algorithms: [{}]\n", algorithms.join(", "))
    };
    format!(
        "device:\n  type: tap\n  name: {ifname}\ncrypto:\n  password: ndlab-mesh\n{algorithms}\
         listen: {VPNCLOUD_PORT}\npeers:\n  - {peer_ip}:{VPNCLOUD_PORT}\nmode: switch\n\
         port-forwarding: false\n"
    )
}

//! Finding the daemon behind a TAP device: in the interface's own namespace, and by the
//! long-running agent, which learns the daemon's port while running.

use std::time::Duration;

use anyhow::{ensure, Result};
use netdoctor_lab::{lab_guard, traffic, Iperf3Opts, Iperf3Server, PairTopology};

use crate::common_mesh::{diagnose, join};
use crate::diagnose_tap_mesh::config::{BOTH_TOOLS, FASTD_PORT, FASTD_TOOLS, TINC_PORT, TUNNEL_B};
use crate::diagnose_tap_mesh::fastd::FASTD_METHOD;
use crate::diagnose_tap_mesh::mesh::{unique_ifname, Daemon, TapMesh};

// ---------------------------------------------------------------------------------------
// Identification across namespaces
// ---------------------------------------------------------------------------------------

/// Two meshes in different namespaces whose TAP devices have the same name (every
/// container may have its `tap0`): diagnosing the tinc one must report tincd, not the
/// fastd started earlier in other namespaces.
#[test]
fn tap_owner_is_looked_up_in_the_interface_namespace() -> Result<()> {
    lab_guard!(tools = BOTH_TOOLS);
    let ifname = unique_ifname();
    let other = TapMesh::new(Daemon::Fastd(FASTD_METHOD), 1400, &ifname)?;
    let mesh = TapMesh::new(Daemon::Tinc, 1400, &ifname)?;
    let d = diagnose(&mesh.pair.a, &ifname, "1s", &["--no-probe"])?;
    let (daemon, port) = (d.str("/facts/tunnel/daemon")?, d.i64("/facts/tunnel/port")?);
    ensure!(
        daemon == "tincd" && port == i64::from(TINC_PORT) && d.str("/facts/tunnel/kind")? == "tinc",
        "{ifname} in {} is served by tincd (port {TINC_PORT}), but netdoctor reports daemon \
         {daemon:?} port {port} (fastd serves another {ifname} in {}): {}",
        mesh.pair.a.name(),
        other.pair.a.name(),
        d.describe()
    );
    drop(other);
    Ok(())
}

// ---------------------------------------------------------------------------
// The agent learns a mesh daemon's port while running.
// ---------------------------------------------------------------------------

/// fastd is recognised on the wire by its UDP port only. `diagnose` tells the data plane
/// the port before loading it; the long-running agent, loaded before any mesh existed,
/// must add it when it finds the daemon, and from then on label the underlay's flows.
#[test]
fn agent_learns_a_fastd_port_while_running() -> Result<()> {
    lab_guard!(tools = FASTD_TOOLS);
    let mesh = TapMesh::new(Daemon::Fastd(FASTD_METHOD), 1400, &unique_ifname())?;
    let agent = netdoctor_lab::agent::Agent::start(&mesh.pair.a, &["--no-probe"])?;
    let _server = Iperf3Server::start(&mesh.pair.b, 5201)?;
    let mut opts = Iperf3Opts::new(TUNNEL_B);
    opts.duration_secs = 6;
    std::thread::scope(|s| -> Result<()> {
        let client = s.spawn(|| traffic::iperf3_client(&mesh.pair.a, &opts));
        agent.poll(
            &format!("/api/v1/interfaces/{}", mesh.ifname),
            Duration::from_secs(15),
            "the TAP interface identified as fastd",
            |r| (r.json["facts"]["tunnel"]["kind"] == "fastd").then_some(()),
        )?;
        let flow = agent.poll(
            &format!(
                "/api/v1/flows?interface={}&limit=1000",
                PairTopology::IFNAME
            ),
            Duration::from_secs(15),
            "an underlay flow labelled fastd",
            |r| {
                r.json["items"].as_array()?.iter().find_map(|f| {
                    (f["encap"] == "fastd" && f["packets"].as_u64() > Some(0)).then(|| f.clone())
                })
            },
        )?;
        ensure!(
            flow["src_port"] == FASTD_PORT || flow["dst_port"] == FASTD_PORT,
            "a fastd flow on another port: {flow}"
        );
        join(client, "iperf3 through the mesh")?;
        Ok(())
    })
}

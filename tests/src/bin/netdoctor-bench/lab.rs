//! The lab (veth pair, iperf3 server, watched interface) and the netdoctor processes the
//! sections start in it.

use std::collections::HashSet;
use std::time::Duration;

use anyhow::{ensure, Context, Result};
use netdoctor_lab::{
    attached, cmd, traffic, BgProcess, Iperf3Opts, Iperf3Server, Netns, PairTopology,
};
use nix::sys::signal::Signal;
use serde_json::Value;

use crate::args::{Side, LOCAL_TCP};
use crate::programs::all_programs;
use crate::IPERF_PORT;

/// The lab: topology, iperf3 server, watched interface.
pub(crate) struct Lab {
    pub(crate) topo: PairTopology,
    _server: Iperf3Server,
    pub(crate) side: Side,
    pub(crate) ifindex: u32,
}

impl std::fmt::Debug for Lab {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lab")
            .field("side", &self.side)
            .field("ifindex", &self.ifindex)
            .finish()
    }
}

impl Lab {
    pub(crate) fn new(side: Side) -> Result<Lab> {
        let topo = PairTopology::new(1500)?;
        let server = Iperf3Server::start(&topo.b, IPERF_PORT)?;
        let watched = match side {
            Side::Receiver => &topo.b,
            Side::Sender => &topo.a,
        };
        let ifindex = attached::ifindex(watched, PairTopology::IFNAME)?;
        // An end host: it does not forward, so the segments it receives for its own
        // connections take netdoctor's local path too (a forwarding host keeps their flow
        // records: it could DNAT them onward). New namespaces inherit the host's setting.
        watched.sysctl("net.ipv4.ip_forward", "0")?;
        Ok(Lab {
            topo,
            _server: server,
            side,
            ifindex,
        })
    }

    pub(crate) fn watched(&self) -> &Netns {
        match self.side {
            Side::Receiver => &self.topo.b,
            Side::Sender => &self.topo.a,
        }
    }

    pub(crate) fn iperf(&self, secs: u32, parallel: u32) -> Result<traffic::Iperf3Report> {
        let mut opts = Iperf3Opts::new(PairTopology::B_IP);
        opts.port = IPERF_PORT;
        opts.duration_secs = secs;
        opts.parallel = parallel;
        traffic::iperf3_client(&self.topo.a, &opts)
    }
}

/// `netdoctor flows` on the watched interface with a JSON report of every flow, for longer
/// than any run (each is stopped with SIGINT).
pub(crate) fn flows_argv(netdoctor: &str) -> Vec<&str> {
    vec![
        netdoctor,
        "flows",
        PairTopology::IFNAME,
        "--duration",
        "10m",
        "--json",
        "--top",
        "0",
    ]
}

/// Fails, saying why, when `netdoctor flows` has no `--local-tcp` (which `tc-packets`
/// needs): before any run rather than after the first rounds.
pub(crate) fn require_local_tcp(netdoctor: &str) -> Result<()> {
    let help = cmd::host_run(&[netdoctor, "flows", "--help"])
        .with_context(|| format!("`{netdoctor} flows --help`"))?;
    ensure!(
        help.contains(LOCAL_TCP),
        "{netdoctor} has no `flows {LOCAL_TCP}`, which tc-packets needs: rebuild netdoctor or \
         leave tc-packets out of --configs"
    );
    Ok(())
}

/// Stops netdoctor (SIGINT: it reports what it saw) and parses its JSON report.
pub(crate) fn finish_netdoctor(mut nd: BgProcess) -> Result<Value> {
    nd.signal(Signal::SIGINT)?;
    let status = nd.wait_timeout(Duration::from_secs(20))?;
    let stdout = nd.stdout()?;
    ensure!(
        status.success(),
        "netdoctor exited with {status}; stderr: {}",
        nd.stderr().unwrap_or_default().trim()
    );
    serde_json::from_str(&stdout)
        .with_context(|| format!("netdoctor's output is not JSON: {stdout}"))
}

/// Starts `argv` in the watched namespace and waits for `needle` on its stderr; also returns
/// the ids of the programs loaded before it started, to tell its own from them.
pub(crate) fn spawn_netdoctor(
    lab: &Lab,
    argv: &[&str],
    needle: &str,
) -> Result<(BgProcess, HashSet<u32>)> {
    let known: HashSet<u32> = all_programs().into_keys().collect();
    let mut nd = lab.watched().spawn(argv)?;
    nd.wait_for_output(needle, Duration::from_secs(30))
        .with_context(|| format!("`{}` did not start", argv.join(" ")))?;
    Ok((nd, known))
}

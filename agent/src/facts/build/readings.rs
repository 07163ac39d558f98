//! What the window's facts are measured between: counters and readings taken at its start
//! and at its end.

use crate::config::bond::LinkCounter;
use crate::config::cpu::{CpuError, DaemonSample, HostSample};
use crate::config::tunnel::ConfiguredTunnel;
use crate::config::wireguard::tailscale::Paths;
use crate::config::wireguard::Device;
use crate::kernel::drops::{DropCount, DropProbe};

/// WireGuard and drop counters read at the start and at the end of the window (sockets
/// have their own [`crate::kernel::sockets::rates::Baseline`]), tailscaled's paths, and
/// the CPU time of the tunnel's daemon and of the host.
#[derive(Debug)]
pub struct Readings {
    pub(super) wireguard: Option<Device>,
    pub(super) tailscale: Option<Paths>,
    pub(super) drops: Vec<DropCount>,
    pub(super) links: Vec<LinkCounter>,
    pub(super) daemon_cpu: Option<Result<DaemonSample, CpuError>>,
    pub(super) host_cpu: Option<HostSample>,
}

impl Readings {
    /// From WireGuard state and drop counts read by the caller.
    pub fn from_parts(wireguard: Option<Device>, drops: Vec<DropCount>) -> Self {
        Readings {
            wireguard,
            tailscale: None,
            drops,
            links: Vec::new(),
            daemon_cpu: None,
            host_cpu: None,
        }
    }

    /// With every link's transmit counters (see [`crate::config::bond::counters`]).
    pub fn with_links(mut self, links: Vec<LinkCounter>) -> Self {
        self.links = links;
        self
    }

    /// The peers of `tun` as last read, and drop counts read by the caller.
    pub fn of_tunnel(tun: &ConfiguredTunnel, drops: Vec<DropCount>) -> Self {
        Readings {
            wireguard: tun.wireguard.clone(),
            tailscale: tun.tailscale.as_ref().map(|t| t.paths.clone()),
            drops,
            links: Vec::new(),
            daemon_cpu: None,
            host_cpu: None,
        }
    }

    /// With the CPU time of the tunnel's daemon (`None` without one) and of the host, read
    /// by the caller (the agent keeps the last window's end for the next one's start).
    pub fn with_cpu(
        mut self,
        daemon: Option<Result<DaemonSample, CpuError>>,
        host: Option<HostSample>,
    ) -> Self {
        self.daemon_cpu = daemon;
        self.host_cpu = host;
        self
    }

    /// The drop counts read (empty without the drop probe).
    pub fn drops(&self) -> &[DropCount] {
        &self.drops
    }

    /// The daemon's CPU reading, if one was read.
    pub fn daemon_cpu(&self) -> Option<&DaemonSample> {
        self.daemon_cpu.as_ref().and_then(|r| r.as_ref().ok())
    }

    /// Reads WireGuard counters, drop counts, and the CPU time of the tunnel's daemon and
    /// of the host.
    pub fn take(
        tun: &ConfiguredTunnel,
        drops: Option<&DropProbe<'_>>,
    ) -> crate::config::Result<Self> {
        let drops = drops
            .map(DropProbe::counts)
            .transpose()?
            .unwrap_or_default();
        Ok(Readings::of_tunnel(tun, drops).with_cpu(
            tun.daemon.as_ref().map(|d| DaemonSample::read(d.pid)),
            HostSample::read().ok(),
        ))
    }
}

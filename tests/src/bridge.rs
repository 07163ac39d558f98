//! A bridge in a lab namespace joining a tunnel port with a guest: a namespace of its own
//! behind a veth (a container, or a VM's NIC), the way OpenStack, LXD and libvirt bridge
//! their guests onto a VXLAN or TAP tunnel.
//!
//! ```no_run
//! use netdoctor_lab::{bridge::GuestBridge, PairTopology};
//! # fn main() -> anyhow::Result<()> {
//! let pair = PairTopology::new(1500)?;
//! // ... a tunnel `vx0` in pair.a ...
//! let guest = GuestBridge::new(&pair.a, "vx0", "10.99.0.1/24", 1500)?;
//! // guest.guest is the guest's namespace, br0 joins vx0 and gv0 in pair.a
//! # Ok(())
//! # }
//! ```

use anyhow::{Context, Result};

use crate::netns::Netns;
use crate::traffic::{self, Iperf3Opts, Iperf3Report};
use crate::veth::{create_veth, Veth, VethEnd};

/// A bridge joining a port with a guest namespace's veth. The guest's namespace goes
/// when this is dropped (and the veth with it); the bridge goes with the host namespace.
#[derive(Debug)]
pub struct GuestBridge {
    _veth: Veth,
    /// The guest: a namespace with [`GuestBridge::GUEST_IF`] addressed and up.
    pub guest: Netns,
}

impl GuestBridge {
    /// The bridge's name in the host namespace.
    pub const BRIDGE: &'static str = "br0";
    /// The host end of the guest's veth, a port of the bridge.
    pub const GUEST_PORT: &'static str = "gv0";
    /// The guest's end of its veth.
    pub const GUEST_IF: &'static str = "eth0";

    /// Creates [`Self::BRIDGE`] in `host`, attaches `port` (a tunnel interface there) and a
    /// veth whose host end is [`Self::GUEST_PORT`] and whose other end is the guest's
    /// [`Self::GUEST_IF`] with address `guest_cidr`; both veth ends get `guest_mtu`, the
    /// bridge and its ports are brought up. The guest segments what it sends itself (no
    /// GSO: `gso_max_segs 1`), as a VM's NIC without offloads does, so its full-size
    /// segments meet the bridge as frames of that size.
    pub fn new(host: &Netns, port: &str, guest_cidr: &str, guest_mtu: u32) -> Result<Self> {
        let guest = Netns::new()?;
        let veth = create_veth(
            VethEnd::ns(host, Self::GUEST_PORT).mtu(guest_mtu),
            VethEnd::ns(&guest, Self::GUEST_IF)
                .addr(guest_cidr)
                .mtu(guest_mtu),
        )?;
        guest.ip(&["link", "set", "dev", Self::GUEST_IF, "gso_max_segs", "1"])?;
        guest.set_up("lo")?;
        host.ip(&["link", "add", Self::BRIDGE, "type", "bridge"])?;
        for p in [port, Self::GUEST_PORT] {
            host.ip(&["link", "set", "dev", p, "master", Self::BRIDGE])
                .with_context(|| format!("attaching {p} to {}", Self::BRIDGE))?;
            host.set_up(p)?;
        }
        host.set_up(Self::BRIDGE)?;
        Ok(GuestBridge { _veth: veth, guest })
    }

    /// iperf3 from the guest to the server at `server` (another guest's address), `port`,
    /// for `secs`, at `rate` if given: the sender's report. Through a bridge that drops the
    /// guest's full-size frames the transfer stalls, and iperf3 may fail.
    pub fn tcp_to(
        &self,
        server: &str,
        port: u16,
        secs: u32,
        rate: Option<&str>,
    ) -> Result<Iperf3Report> {
        let mut opts = Iperf3Opts::new(server);
        opts.port = port;
        opts.duration_secs = secs;
        opts.bitrate = rate.map(str::to_owned);
        traffic::iperf3_client(&self.guest, &opts)
    }
}

//! What the data plane is told: how to load and attach ([`Options`]), which interfaces
//! ([`Target`]), and what it reports back about its hooks ([`Hooks`]).

use serde::Serialize;

use super::local_tcp::LocalTcp;
use crate::kernel::attach::{AttachMethod, XdpMode};
use crate::kernel::views::Encap;

/// Whether packets start with an Ethernet header or directly with IP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LinkType {
    /// Ethernet framing (physical, veth, tap, bridge, vxlan).
    Ether,
    /// Raw IP (wg, tun): the network header comes first.
    RawIp,
}

/// An interface as the data plane attaches to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// Kernel interface index.
    pub index: u32,
    /// Name, for messages.
    pub name: String,
    /// MTU: packets over it are counted as such.
    pub mtu: u32,
    /// Framing of the packets the hooks see.
    pub link: LinkType,
}

/// Which hook counts received packets.
///
/// tc is the default because it never disturbs traffic: attaching native XDP makes many
/// NIC drivers (virtio_net, mlx5, i40e, ...) rebuild their rings, a visible link flap, and
/// generic XDP copies every non-linear skb. tc ingress sees the same packets after GRO and
/// counts wire segments exactly through `gso_segs`. XDP is there for those who want to see
/// frames before GRO on a driver they know.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum IngressHook {
    /// tc (tcx) ingress.
    Tc,
    /// XDP; if the interface refuses it, netdoctor fails rather than silently using tc.
    /// Where another program has the interface's XDP already (another netdoctor's, or
    /// anyone's), that one stays and received packets are counted with tc, in a note.
    Xdp,
}

/// A UDP port carrying a tunnel protocol that is recognised by port only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TunnelPort {
    /// The UDP port (source or destination).
    pub port: u16,
    /// What runs on it.
    pub encap: Encap,
}

/// The bits of `enum nd_path` in ebpf/include/packet.h (checked by the `limits` test), which
/// every watched interface's counters carry: this host's own TCP takes the local path.
pub(crate) const PATH_LOCAL_TCP: u8 = 1;
/// Every packet through the general stages ([`Options::stages_only`]).
pub(crate) const PATH_STAGES: u8 = 2;
/// Tunnel ports are configured ([`Options::tunnel_ports`]).
pub(crate) const PATH_USER_PORTS: u8 = 4;
/// Received IPv4 TCP may be this host's own ([`super::local_tcp::LocalAddrs::usable`]).
pub(crate) const PATH_LOCAL_IN4: u8 = 8;
/// The same for IPv6.
pub(crate) const PATH_LOCAL_IN6: u8 = 16;

/// Options for loading and attaching.
#[derive(Debug, Clone)]
pub struct Options {
    /// Which hook counts received packets.
    pub ingress: IngressHook,
    /// XDP attach mode when XDP is used.
    pub xdp_mode: XdpMode,
    /// Links (default) or legacy netlink attachments.
    pub method: AttachMethod,
    /// Ports of port-identified tunnels (fastd, tinc, ...), at most `MAX_TUNNEL_PORTS`.
    pub tunnel_ports: Vec<TunnelPort>,
    /// Parse every packet with the general stages, skipping the inline fast path for plain
    /// TCP and UDP (`fast_account` in ebpf/include/fast_path.bpf.h). The figures are the same,
    /// only slower: this exists so that a test can prove it by running both on the same
    /// packets.
    pub stages_only: bool,
    /// Flows the flow table holds (see [`super::flow_table`]); older flows are evicted,
    /// and counted, when it is full.
    pub max_flows: u32,
    /// The agent's windows will be counted ([`Dataplane::window_snapshot`]): sizes the ring
    /// that names each window's flows (`agent_windows`). Without, windows still work, read
    /// by streaming the table.
    ///
    /// [`Dataplane::window_snapshot`]: super::Dataplane::window_snapshot
    pub windows: bool,
    /// With [`Options::windows`], count the table's entries by walks even where the kernel
    /// keeps the count (`table_count`): for the test that proves both count alike.
    pub count_by_walk: bool,
    /// How TCP segments of local connections are accounted; the data plane's caller sets
    /// [`LocalTcp::Packets`] where socket telemetry is not loaded.
    pub local_tcp: LocalTcp,
    /// Load the XDP program even when received packets are counted with tc, so that a test
    /// or a benchmark can run every program (`BPF_PROG_TEST_RUN`). Commands turn it off:
    /// verifying a program nobody attaches costs about a fifth of a start's CPU, and many
    /// times that on a small or emulated machine.
    pub load_all_programs: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            ingress: IngressHook::Tc,
            xdp_mode: XdpMode::Auto,
            method: AttachMethod::Link,
            tunnel_ports: Vec::new(),
            stages_only: false,
            max_flows: super::flow_table::DEFAULT_MAX_FLOWS,
            windows: false,
            count_by_walk: false,
            // The command line's default is `sockets`; a library caller opts in.
            local_tcp: LocalTcp::Packets,
            load_all_programs: true,
        }
    }
}

impl Options {
    /// Whether the data plane loaded with these options takes the local path: asked for,
    /// and not the test mode that sends every packet through the stages.
    pub(crate) fn local_path(&self) -> bool {
        self.local_tcp == LocalTcp::Sockets && !self.stages_only
    }

    /// What every watched interface's packets go through (the bits of `enum nd_path` in
    /// ebpf/include/packet.h) as far as the options say; the data plane adds which families
    /// received segments can be local in (`Dataplane::path`).
    pub(crate) fn path(&self) -> u8 {
        let bit = |on: bool, bit: u8| if on { bit } else { 0 };
        bit(self.stages_only, PATH_STAGES)
            | bit(self.local_path(), PATH_LOCAL_TCP)
            | bit(!self.tunnel_ports.is_empty(), PATH_USER_PORTS)
    }
}

/// The hooks in use on one interface.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Hooks {
    /// e.g. "xdp" or "tc".
    pub ingress: String,
    /// "tc".
    pub egress: String,
    /// "link" or "netlink".
    pub method: AttachMethod,
    /// How TCP segments of local connections are accounted (after the fallback to
    /// `packets` without socket telemetry).
    pub local_tcp: LocalTcp,
    /// Why the hooks differ from those asked for (XDP taken: tc counts received packets),
    /// for the report's notes; not part of the JSON.
    #[serde(skip)]
    pub note: Option<String>,
}

/// The three programs of the data plane.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProgramKind {
    /// XDP ingress.
    XdpIngress,
    /// tc ingress.
    TcIngress,
    /// tc egress.
    TcEgress,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The test mode excludes the local path, which needs socket telemetry asked for;
    /// tunnel ports add their bit to either.
    #[test]
    fn path_follows_the_options() {
        let with = |local_tcp, stages_only, ports: &[u16]| {
            Options {
                local_tcp,
                stages_only,
                tunnel_ports: ports
                    .iter()
                    .map(|&port| TunnelPort {
                        port,
                        encap: crate::kernel::views::Encap::Fastd,
                    })
                    .collect(),
                ..Options::default()
            }
            .path()
        };
        assert_eq!(with(LocalTcp::Packets, false, &[]), 0);
        assert_eq!(with(LocalTcp::Sockets, false, &[]), PATH_LOCAL_TCP);
        assert_eq!(with(LocalTcp::Sockets, true, &[]), PATH_STAGES);
        assert_eq!(with(LocalTcp::Packets, true, &[]), PATH_STAGES);
        assert_eq!(
            with(LocalTcp::Sockets, false, &[10000]),
            PATH_LOCAL_TCP | PATH_USER_PORTS
        );
        assert_eq!(
            with(LocalTcp::Packets, true, &[655, 10000]),
            PATH_STAGES | PATH_USER_PORTS
        );
    }
}

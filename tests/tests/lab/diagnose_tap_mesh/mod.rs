//! `netdoctor diagnose` on layer-2 TAP meshes run by userspace tunnel daemons: tinc
//! (Debian's tinc 1.0, legacy protocol, `Mode = switch`), fastd (`mode tap`) and VpnCloud
//! 2.3.0 (`type: tap`, built by `tests/vpncloud/build`), each between two namespaces over
//! a veth underlay of MTU 1500.
//!
//! netdoctor has no configuration to read for these tunnels: it must find the daemon that
//! holds the TAP device (`/proc/PID/fdinfo`), take its UDP port, learn the endpoint from
//! the traffic on that port and the underlay from the busiest candidate interface. The
//! tests check that identification, the MTU verdict at an oversized and at a fitting MTU,
//! and compare netdoctor's overhead figures with the sizes seen on the wire (nft counters
//! per outer IP length on the receiving end of the underlay).
//!
//! Needs root, BPF, `tincd`, `fastd`, `iperf3`, `nft` (and cargo, for VpnCloud); skips
//! elsewhere, fails under CI=true.
//! Build the binary first: `cargo build -p netdoctor`.
//!
//! [`mesh`] builds the meshes from the fixed figures and daemon configurations of
//! [`config`], [`wire`] counts the sizes on the underlay and [`verdicts`] holds the checks
//! the tests share; one module per daemon, [`discovery`] for finding the daemon,
//! [`cpu`] for a daemon out of CPU, and [`bridged`] for guests bridged onto the mesh.

mod config;
mod mesh;
mod verdicts;
mod wire;

mod bridged;
mod cpu;
mod discovery;
mod fastd;
mod tinc;
mod vpncloud;

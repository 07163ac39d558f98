//! The MTU lab of the lifecycle tests: a veth underlay and a WireGuard tunnel that fits
//! it or not, the finding that provokes, and how long the agent may take to follow.

use std::time::Duration;

use anyhow::Result;
use netdoctor_lab::{wg_over_pair, PairTopology, WgTunnel};

/// The finding these tests provoke.
pub(crate) const EXCEEDS: &str = "mtu.tunnel_exceeds_underlay";
/// Underlay MTU of the MTU labs.
pub(crate) const UNDERLAY_MTU: u32 = 1400;
/// WireGuard MTU that fits it exactly (1400 - 60).
pub(crate) const FITTING_MTU: u32 = 1340;
/// WireGuard MTU that does not (1420 + 60 > 1400).
pub(crate) const OVERSIZED_MTU: u32 = 1420;
/// How long a change may take to show with 1 s evaluations on busy CPUs.
pub(crate) const SETTLE: Duration = Duration::from_secs(15);
/// How fast the agent must follow interfaces appearing and disappearing.
pub(crate) const CHURN: Duration = Duration::from_secs(2);

/// A pair joined by a veth of `UNDERLAY_MTU` and a wireguard-go tunnel of `wg_mtu`.
pub(crate) fn mtu_lab(wg_mtu: u32) -> Result<(PairTopology, WgTunnel)> {
    wg_over_pair(UNDERLAY_MTU, wg_mtu)
}

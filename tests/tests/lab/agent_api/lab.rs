//! The figures of the API's WireGuard lab, and how long its traffic may take to show.

use std::time::Duration;

/// Underlay (veth) MTU of the API lab: not a default, so a right answer is no accident.
pub(crate) const UNDERLAY_MTU: u32 = 1480;
/// WireGuard MTU of the API lab: fits the underlay (1416 + 60 <= 1480) and is within 32
/// bytes of the largest that fits (1420), so the lab is healthy.
pub(crate) const WG_MTU: u32 = 1416;
/// Congestion control the iperf3 client asks for.
pub(crate) const CC: &str = "cubic";
/// How long signals of running traffic may take to show (1 s windows, busy CPUs).
pub(crate) const SEEN: Duration = Duration::from_secs(20);

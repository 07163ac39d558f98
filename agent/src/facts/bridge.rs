//! A bridge and its ports, for an interface that is a bridge or a port of one (a VXLAN or
//! TAP tunnel bridged with the veths of containers, the virtio taps of VMs): every port with
//! its MTU, and what crossed them during the observation that a smaller port cannot carry.
//!
//! A bridge forwards no frame larger than the egress port's MTU (Linux
//! `br_dev_queue_push_xmit`: `is_skb_forwardable` fails, the frame is freed) and sends no
//! ICMP, so guests at 1500 bridged onto a 1450 tunnel port lose every full-size frame
//! while both ends announce MSS 1460. The evidence: segments above the smallest port's MTU
//! entering the bridge through a larger port (the data plane's size histogram and flows on
//! every port), and frames the kernel dropped on a smaller port that were larger than its
//! MTU (the drop probe: the bridge frees them without a reason, `NOT_SPECIFIED`, and no
//! link counter counts them).

use serde::Serialize;

use super::underlay::is_tunnel_kind;
use crate::config::bridge::Bridge;
use crate::config::iface::Interface;
use crate::kernel::drops::{self, DropCount};
use crate::kernel::packet::counters::SIZE_BUCKET_BOUNDS;
use crate::kernel::packet::Snapshot;
use crate::kernel::views::Direction;

/// One port of the bridge, as rules read it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PortFacts {
    /// Interface name.
    pub name: String,
    /// Interface kind (vxlan, tap, veth, physical, ...).
    pub kind: String,
    /// MTU.
    pub mtu: i64,
    /// A tunnel interface.
    pub is_tunnel: bool,
    /// Segments above the smallest port's MTU that entered the bridge through this port
    /// (0 for the smallest ports; -1 without the data plane).
    pub oversize_segments: i64,
    /// The largest segment that entered through it, IP bytes (0 if none; -1 without the
    /// data plane).
    pub max_segment: i64,
    /// Frames larger than its MTU the kernel dropped on it (-1 without the drop probe).
    pub oversize_drops: i64,
}

/// The bridge the interface is, or is a port of.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct BridgeFacts {
    /// The interface is a bridge or a port of one.
    pub present: bool,
    /// The bridge's name ("" if none).
    pub name: String,
    /// The bridge device's own MTU (what the host itself sends through it), -1 if none.
    pub mtu: i64,
    /// Its ports that are up, smallest MTU first.
    pub ports: Vec<PortFacts>,
    /// The ports as text: "vx0 (vxlan) 1450, gv0 (veth) 1500".
    pub ports_text: String,
    /// The smallest and the largest port MTU (-1 without ports).
    pub min_mtu: i64,
    /// The largest port MTU.
    pub max_mtu: i64,
    /// The ports of the smallest MTU, comma-separated.
    pub smallest_ports: String,
    /// The ports of a larger MTU, comma-separated.
    pub larger_ports: String,
    /// Segments above `min_mtu` that entered through the larger ports (-1 without the data
    /// plane).
    pub oversize_segments: i64,
    /// The largest segment that entered through a larger port (-1 without the data plane).
    pub max_segment: i64,
    /// Frames larger than the port's MTU the kernel dropped on the smaller ports (-1
    /// without the drop probe).
    pub oversize_drops: i64,
}

/// Segments of `sizes` (a size histogram, [`SIZE_BUCKET_BOUNDS`]) certainly above `mtu`:
/// those of every bucket whose lower bound is at least `mtu`.
fn above(sizes: &[u64], mtu: u32) -> u64 {
    sizes
        .iter()
        .enumerate()
        .skip(1)
        .filter(|(i, _)| SIZE_BUCKET_BOUNDS.get(i - 1).is_some_and(|low| *low >= mtu))
        .map(|(_, n)| *n)
        .sum()
}

fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// The facts of the window for `bridge`: `window` is what the data plane counted (`None`
/// without one), `drops` the drop counts at its start and end (`None` without the drop
/// probe).
pub fn facts(
    bridge: &Bridge,
    window: Option<&Snapshot>,
    drops: Option<(&[DropCount], &[DropCount])>,
) -> BridgeFacts {
    let min = bridge.ports.iter().map(|p| p.mtu).min().unwrap_or(0);
    let max = bridge.ports.iter().map(|p| p.mtu).max().unwrap_or(0);
    let dropped = drops.map(|(start, end)| drops::delta(start, end));
    let ports: Vec<PortFacts> = bridge
        .ports
        .iter()
        .map(|p| port_facts(p, min, window, dropped.as_deref()))
        .collect();
    let larger = |p: &&PortFacts| p.mtu > i64::from(min);
    let sum = |f: fn(&PortFacts) -> i64, of: &dyn Fn(&&PortFacts) -> bool| {
        ports.iter().filter(of).map(f).fold(0, |a: i64, v| {
            if a < 0 || v < 0 {
                -1
            } else {
                a.saturating_add(v)
            }
        })
    };
    let names = |of: &dyn Fn(&&PortFacts) -> bool, sep: &str| {
        let n: Vec<&str> = ports.iter().filter(of).map(|p| p.name.as_str()).collect();
        n.join(sep)
    };
    BridgeFacts {
        present: true,
        name: bridge.bridge.name.clone(),
        mtu: i64::from(bridge.bridge.mtu),
        ports_text: ports
            .iter()
            .map(|p| format!("{} ({}) {}", p.name, p.kind, p.mtu))
            .collect::<Vec<_>>()
            .join(", "),
        min_mtu: if ports.is_empty() { -1 } else { i64::from(min) },
        max_mtu: if ports.is_empty() { -1 } else { i64::from(max) },
        smallest_ports: names(&|p| !larger(p), ", "),
        larger_ports: names(&larger, ", "),
        oversize_segments: if window.is_some() {
            sum(|p| p.oversize_segments, &larger)
        } else {
            -1
        },
        max_segment: match window {
            Some(_) => ports
                .iter()
                .filter(larger)
                .map(|p| p.max_segment)
                .max()
                .unwrap_or(0),
            None => -1,
        },
        oversize_drops: sum(|p| p.oversize_drops, &|p| !larger(p)),
        ports,
    }
}

fn port_facts(
    p: &Interface,
    min: u32,
    window: Option<&Snapshot>,
    dropped: Option<&[DropCount]>,
) -> PortFacts {
    let (oversize, max_segment) = match window {
        Some(w) => {
            let sizes = &w.counters(p.index).ingress.size_buckets;
            let largest = w
                .flows
                .iter()
                .filter(|f| f.ifindex == p.index && f.direction == Direction::Ingress)
                .map(|f| i64::from(f.max_segment))
                .max()
                .unwrap_or(0);
            let over = if p.mtu > min { above(sizes, min) } else { 0 };
            (to_i64(over), largest)
        }
        None => (-1, -1),
    };
    // The frame's bytes as dropped include its Ethernet header: larger than MTU + 14 is
    // larger than the port carries (an entry's average, per reason and protocol).
    let frame = u64::from(p.mtu) + 14;
    let oversize_drops = dropped.map_or(-1, |d| {
        to_i64(
            d.iter()
                .filter(|d| d.ifindex == p.index && d.packets > 0)
                .filter(|d| d.bytes / d.packets > frame)
                .map(|d| d.packets)
                .sum(),
        )
    });
    PortFacts {
        name: p.name.clone(),
        kind: p.kind.to_string(),
        mtu: i64::from(p.mtu),
        is_tunnel: is_tunnel_kind(&p.kind),
        oversize_segments: oversize,
        max_segment,
        oversize_drops,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::bridge::ports_of;
    use crate::config::iface::IfaceKind;

    #[test]
    fn buckets_wholly_above_the_smallest_mtu() {
        // Bounds 576, 1280, 1380, 1420, 1440, 1450, 1480, 1500, 9000, then larger.
        let sizes = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10];
        // Above 1450: the buckets (1450, 1480], (1480, 1500], (1500, 9000], (9000, ...).
        assert_eq!(above(&sizes, 1450), 7 + 8 + 9 + 10);
        // fastd's 1434: (1434, 1440] cannot be told from (1420, 1434]: not counted.
        assert_eq!(above(&sizes, 1434), 6 + 7 + 8 + 9 + 10);
        assert_eq!(above(&sizes, 9000), 10);
        assert_eq!(above(&[], 1450), 0);
    }

    #[test]
    fn ports_of_the_bridge_smallest_first() {
        let mut br = Interface::test_named("br0", 5);
        br.kind = IfaceKind::Bridge;
        let mut vx = Interface::test_named("vx0", 3);
        vx.kind = IfaceKind::Vxlan;
        vx.mtu = 1450;
        let gv = Interface::test_named("gv0", 4);
        let other = Interface::test_named("eth0", 2);
        let mut down = Interface::test_named("gv1", 6);
        down.up = false;
        let all = [other, vx, gv, br.clone(), down];
        let b = ports_of(br, &[(4, 5), (3, 5), (2, 9), (6, 5)], &all);
        let names: Vec<&str> = b.ports.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["vx0", "gv0"]);
        let drops = [DropCount {
            ifindex: 3,
            reason: "NOT_SPECIFIED".into(),
            reason_code: 2,
            ethertype: 0x0800,
            protocol: 6,
            packets: 4,
            bytes: 4 * 1514,
        }];
        let f = facts(&b, None, Some((&[], &drops)));
        assert_eq!(f.ports_text, "vx0 (vxlan) 1450, gv0 (veth) 1500");
        assert_eq!((f.min_mtu, f.max_mtu), (1450, 1500));
        assert_eq!(
            (f.smallest_ports.as_str(), f.larger_ports.as_str()),
            ("vx0", "gv0")
        );
        assert_eq!(
            (f.oversize_segments, f.max_segment, f.oversize_drops),
            (-1, -1, 4)
        );
        assert_eq!(f.ports[0].oversize_drops, 4);
    }
}

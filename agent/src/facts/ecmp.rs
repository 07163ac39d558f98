//! Equal-cost multipath: a route with several nexthops spreads flows by a hash of their
//! addresses (`fib_multipath_hash_policy` 0, the default) or of addresses and ports (1).
//! With address hashing every flow between the same two hosts takes one nexthop: one
//! tunnel of a pair carries everything, the other idles. The facts: the multipath route
//! whose nexthops include the diagnosed interface (or its underlay), the hash policy of its
//! family, and what the data plane, attached to every nexthop, measured on each.

use std::collections::HashMap;

use serde::Serialize;

use crate::config::iface::Interface;
use crate::config::route_table::TableRoute;
use crate::config::sysctl;
use crate::kernel::packet::flows::{Flow, FlowKey};
use crate::kernel::sockets::rates::SocketRow;
use crate::kernel::views::{Direction, Encap};

/// `FIB_MULTIPATH_HASH_FIELD_SRC_PORT | FIB_MULTIPATH_HASH_FIELD_DST_PORT` (outer).
const PORT_FIELDS: i64 = 0x10 | 0x20;
/// A flow counts among the concurrent ones with at least this share of the bytes (ACK
/// streams, pings and control connections do not).
const FLOW_MIN_SHARE: f64 = 0.01;

/// One nexthop as measured.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct NexthopTraffic {
    /// Interface.
    pub iface: String,
    /// Relative weight.
    pub weight: i64,
    /// Bytes sent through it toward the route's destination during the observation.
    pub bytes: i64,
    /// Packets.
    pub packets: i64,
    /// Flows (address and port pairs) among them.
    pub flows: i64,
}

/// What rules read as `ecmp.*`.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct EcmpFacts {
    /// A multipath route has the interface or its underlay among its nexthops.
    pub present: bool,
    /// Its destination.
    pub route: String,
    /// "ipv4" or "ipv6".
    pub family: String,
    /// The nexthops' interfaces.
    pub nexthops: Vec<String>,
    /// The family's `fib_multipath_hash_policy` (0 layer 3, 1 layer 4, 2 inner layer 3,
    /// 3 custom fields), -1 if unread.
    pub hash_policy: i64,
    /// The hash includes ports (policy 1, or 3 with port fields).
    pub l4_hashing: bool,
    /// Each nexthop as measured.
    pub measured: Vec<NexthopTraffic>,
    /// Bytes over all nexthops.
    pub bytes: i64,
    /// Concurrent flows over all nexthops (each with at least 1 % of the bytes).
    pub flows: i64,
    /// The nexthop that carried the most bytes ("" if none).
    pub busiest: String,
    /// Its share of the bytes, percent (one decimal).
    pub busiest_percent: f64,
    /// Its share of the weights, percent: what an even spread would give it.
    pub busiest_weight_percent: f64,
}

fn int(key: &str) -> i64 {
    sysctl::read(key).and_then(|v| v.parse().ok()).unwrap_or(-1)
}

/// The multipath routes that matter: those with `me` or the underlay among their
/// nexthops, the one with `me` first.
pub fn routes<'a>(
    routes: &'a [TableRoute],
    me: &Interface,
    underlay: Option<&Interface>,
) -> Vec<&'a TableRoute> {
    let has = |r: &TableRoute, i: u32| r.nexthops.iter().any(|h| h.ifindex == i);
    let mut out: Vec<&TableRoute> = routes
        .iter()
        .filter(|r| r.is_multipath() && has(r, me.index))
        .collect();
    if let Some(u) = underlay {
        out.extend(
            routes
                .iter()
                .filter(|r| r.is_multipath() && has(r, u.index) && !has(r, me.index)),
        );
    }
    out
}

fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

fn percent(part: i64, whole: i64) -> f64 {
    if whole <= 0 {
        0.0
    } else {
        (part as f64 * 1000.0 / whole as f64).round() / 10.0
    }
}

/// The facts of the first route in `routes` (see [`routes`]), its nexthops measured from
/// `flows` and the local connections among `sockets` (the window's; see [`toward`]), hash
/// policies read from the sysctls.
pub fn facts(
    routes: &[&TableRoute],
    all: &[Interface],
    flows: &[Flow],
    sockets: &[SocketRow],
) -> EcmpFacts {
    let Some(route) = routes.first() else {
        return EcmpFacts {
            hash_policy: int("net.ipv4.fib_multipath_hash_policy"),
            ..EcmpFacts::default()
        };
    };
    let v4 = route.destination.is_ipv4();
    let family = if v4 { "ipv4" } else { "ipv6" };
    let policy = int(&format!("net.{family}.fib_multipath_hash_policy"));
    let fields = int(&format!("net.{family}.fib_multipath_hash_fields"));
    measure(route, all, &toward(route, flows, sockets), policy, fields)
}

/// Whether `f` leaves through one of `route`'s nexthops toward its destination.
fn goes(route: &TableRoute, f: &Flow) -> bool {
    f.direction == Direction::Egress
        && route.destination.contains(f.dst)
        && route.nexthops.iter().any(|h| h.ifindex == f.ifindex)
}

/// The flows among `flows` that leave through `route`'s nexthops, with the local
/// connections among `sockets` that do: their segments took the data plane's local path
/// (counted per interface; only the SYN has a flow record), and each is described by its
/// socket, whose egress interface is the nexthop the route's hash gave it. A connection's
/// figures are the larger of its flow record's and its socket's (bytes acknowledged during
/// the window), so that with `--local-tcp packets`, where the flow record has them all,
/// nothing counts twice.
fn toward(route: &TableRoute, flows: &[Flow], sockets: &[SocketRow]) -> Vec<Flow> {
    let mut out: Vec<Flow> = flows.iter().filter(|f| goes(route, f)).cloned().collect();
    let mut index: HashMap<FlowKey, usize> =
        out.iter().enumerate().map(|(i, f)| (f.key(), i)).collect();
    for r in sockets.iter().filter(|r| r.socket.ifindex != 0) {
        let s = &r.socket;
        let flow = Flow {
            ifindex: s.ifindex,
            direction: Direction::Egress,
            protocol: 6,
            src: s.local.ip(),
            src_port: s.local.port(),
            dst: s.remote.ip(),
            dst_port: s.remote.port(),
            packets: r.data_segs_sent,
            segments: r.data_segs_sent,
            bytes: r.window_bytes_acked,
            first_seen_ms: 0,
            last_seen_ms: 0,
            tcp_flags: 0,
            syn_mss: None,
            max_segment: 0,
            retransmits: u32::try_from(r.retransmits).unwrap_or(u32::MAX),
            encap: Encap::None,
            wireguard: Default::default(),
        };
        if !goes(route, &flow) {
            continue;
        }
        match index.get(&flow.key()).and_then(|&i| out.get_mut(i)) {
            Some(f) => {
                f.bytes = f.bytes.max(flow.bytes);
                f.packets = f.packets.max(flow.packets);
                f.segments = f.segments.max(flow.segments);
            }
            None => {
                index.insert(flow.key(), out.len());
                out.push(flow);
            }
        }
    }
    out
}

/// [`facts`] with the sysctls given.
fn measure(
    route: &TableRoute,
    all: &[Interface],
    flows: &[Flow],
    policy: i64,
    fields: i64,
) -> EcmpFacts {
    let name = |i: u32| {
        all.iter()
            .find(|x| x.index == i)
            .map_or_else(|| format!("ifindex {i}"), |x| x.name.clone())
    };
    let toward: Vec<&Flow> = flows.iter().filter(|f| goes(route, f)).collect();
    let total: u64 = toward.iter().map(|f| f.bytes).sum();
    let concurrent = |f: &Flow| f.bytes as f64 >= total as f64 * FLOW_MIN_SHARE;
    let measured: Vec<NexthopTraffic> = route
        .nexthops
        .iter()
        .map(|h| {
            let mine: Vec<&&Flow> = toward.iter().filter(|f| f.ifindex == h.ifindex).collect();
            NexthopTraffic {
                iface: name(h.ifindex),
                weight: i64::from(h.weight),
                bytes: to_i64(mine.iter().map(|f| f.bytes).sum()),
                packets: to_i64(mine.iter().map(|f| f.packets).sum()),
                flows: mine.iter().filter(|f| concurrent(f)).count() as i64,
            }
        })
        .collect();
    let bytes = to_i64(total);
    let weights: i64 = measured.iter().map(|n| n.weight).sum();
    let busiest = measured
        .iter()
        .filter(|n| n.bytes > 0)
        .max_by_key(|n| n.bytes);
    EcmpFacts {
        present: true,
        route: route.destination.to_string(),
        family: if route.destination.is_ipv4() {
            "ipv4"
        } else {
            "ipv6"
        }
        .into(),
        nexthops: measured.iter().map(|n| n.iface.clone()).collect(),
        hash_policy: policy,
        l4_hashing: policy == 1 || (policy == 3 && fields > 0 && fields & PORT_FIELDS != 0),
        bytes,
        flows: toward.iter().filter(|f| concurrent(f)).count() as i64,
        busiest: busiest.map(|n| n.iface.clone()).unwrap_or_default(),
        busiest_percent: busiest.map_or(0.0, |n| percent(n.bytes, bytes)),
        busiest_weight_percent: busiest.map_or(0.0, |n| percent(n.weight, weights)),
        measured,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::route_table::Nexthop;
    use crate::kernel::packet::flows::test_flow;

    fn iface(name: &str, index: u32) -> Interface {
        Interface::test_named(name, index)
    }

    fn route() -> TableRoute {
        TableRoute {
            destination: "10.99.0.0/24".parse().expect("prefix"),
            table: 254,
            nexthops: [7, 8]
                .map(|ifindex| Nexthop {
                    ifindex,
                    weight: 1,
                    gateway: None,
                })
                .to_vec(),
        }
    }

    #[test]
    fn one_nexthop_carrying_every_flow_is_measured_as_such() {
        let all = [iface("wg0", 7), iface("wg1", 8)];
        let mut flows: Vec<Flow> = (0..8)
            .map(|i| {
                test_flow(
                    7,
                    Direction::Egress,
                    "10.98.0.1",
                    40000 + i,
                    "10.99.0.1",
                    1_000_000,
                )
            })
            .collect();
        // A keepalive on the other tunnel, and traffic elsewhere, are not the route's flows.
        flows.push(test_flow(
            8,
            Direction::Egress,
            "10.98.0.1",
            1,
            "10.99.0.1",
            100,
        ));
        flows.push(test_flow(
            8,
            Direction::Egress,
            "10.98.0.1",
            2,
            "192.0.2.1",
            9_000_000,
        ));
        flows.push(test_flow(
            7,
            Direction::Ingress,
            "10.99.0.1",
            3,
            "10.98.0.1",
            9_000_000,
        ));
        let f = measure(&route(), &all, &flows, 0, 0);
        assert!(f.present && !f.l4_hashing);
        assert_eq!(f.nexthops, ["wg0", "wg1"]);
        assert_eq!((f.bytes, f.flows), (8_000_100, 8));
        assert_eq!(f.busiest, "wg0");
        assert_eq!(f.busiest_percent, 100.0);
        assert_eq!(f.busiest_weight_percent, 50.0);
        assert_eq!(f.measured[1].bytes, 100);
        assert_eq!(f.measured[1].flows, 0, "a keepalive is no concurrent flow");
    }

    #[test]
    fn the_policy_decides_whether_ports_are_hashed() {
        let all = [iface("wg0", 7), iface("wg1", 8)];
        assert!(measure(&route(), &all, &[], 1, 0).l4_hashing);
        assert!(!measure(&route(), &all, &[], 2, 0).l4_hashing);
        assert!(measure(&route(), &all, &[], 3, 0x37).l4_hashing);
        assert!(!measure(&route(), &all, &[], 3, 0x07).l4_hashing);
        assert_eq!(measure(&route(), &all, &[], 0, 0).busiest, "", "no traffic");
    }
}

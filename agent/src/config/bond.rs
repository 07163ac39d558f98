//! A bond's members measured: the kernel's per-link transmit counters (rtnetlink
//! `IFLA_STATS64`) read at the start and the end of the window, so the evidence says what
//! each member carried ("m1 carried 99.7 % of 310 Mbit/s"), and the rule decides from the
//! measured spread where there was traffic and from the hash policy only where there was
//! none.

use rtnetlink::packet_route::link::LinkAttribute;
use serde::Serialize;

use super::error::Result;
use super::iface::Interface;

/// One link's counters at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LinkCounter {
    /// Interface index.
    pub index: u32,
    /// Bytes sent.
    pub tx_bytes: u64,
    /// Packets sent.
    pub tx_packets: u64,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Packets received.
    pub rx_packets: u64,
}

/// Every link's counters in the caller's namespace.
pub async fn counters() -> Result<Vec<LinkCounter>> {
    let links = super::link::all("reading link counters").await?;
    Ok(links
        .iter()
        .filter_map(|l| {
            l.attributes.iter().find_map(|a| match a {
                LinkAttribute::Stats64(s) => Some(LinkCounter {
                    index: l.header.index,
                    tx_bytes: s.tx_bytes,
                    tx_packets: s.tx_packets,
                    rx_bytes: s.rx_bytes,
                    rx_packets: s.rx_packets,
                }),
                _ => None,
            })
        })
        .collect())
}

/// What one member sent during the window.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct MemberTraffic {
    /// Interface name.
    pub name: String,
    /// Bytes sent.
    pub tx_bytes: i64,
    /// Packets sent.
    pub tx_packets: i64,
}

/// A bond's members over the window.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct BondTraffic {
    /// Each member.
    pub members: Vec<MemberTraffic>,
    /// Bytes sent over all members.
    pub tx_bytes: i64,
    /// The member that sent the most ("" if none sent anything).
    pub busiest: String,
    /// Its share of the bytes, percent (one decimal).
    pub busiest_percent: f64,
    /// All members' rate, Mbit/s (one decimal).
    pub rate_mbps: f64,
}

fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// The members named `members` (of `all`) between two readings `secs` apart. A counter
/// that went backwards (a link recreated) counts from zero; one missing at the start
/// counts nothing.
pub fn measure(
    members: &[String],
    all: &[Interface],
    start: &[LinkCounter],
    end: &[LinkCounter],
    secs: f64,
) -> BondTraffic {
    let of = |set: &[LinkCounter], index: u32| set.iter().find(|c| c.index == index).copied();
    let members: Vec<MemberTraffic> = members
        .iter()
        .map(|name| {
            let index = all.iter().find(|i| &i.name == name).map(|i| i.index);
            // A link not read at the start (the agent's first window) counts nothing.
            let (before, after) = index
                .and_then(|i| {
                    let after = of(end, i)?;
                    Some((of(start, i).unwrap_or(after), after))
                })
                .unwrap_or_default();
            let d = |now: u64, then: u64| now.checked_sub(then).unwrap_or(now);
            MemberTraffic {
                name: name.clone(),
                tx_bytes: to_i64(d(after.tx_bytes, before.tx_bytes)),
                tx_packets: to_i64(d(after.tx_packets, before.tx_packets)),
            }
        })
        .collect();
    let total: i64 = members.iter().map(|m| m.tx_bytes).sum();
    let busiest = members
        .iter()
        .filter(|m| m.tx_bytes > 0)
        .max_by_key(|m| m.tx_bytes);
    let round = |v: f64| (v * 10.0).round() / 10.0;
    BondTraffic {
        tx_bytes: total,
        busiest: busiest.map(|m| m.name.clone()).unwrap_or_default(),
        busiest_percent: busiest.map_or(0.0, |m| round(m.tx_bytes as f64 * 100.0 / total as f64)),
        rate_mbps: if secs > 0.0 {
            round(total as f64 * 8.0 / secs / 1e6)
        } else {
            0.0
        },
        members,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(index: u32, tx_bytes: u64) -> LinkCounter {
        LinkCounter {
            index,
            tx_bytes,
            tx_packets: tx_bytes / 1000,
            ..LinkCounter::default()
        }
    }

    /// The kernel's own counters (rtnetlink, this namespace): loopback is there, and what
    /// is sent over it shows.
    #[test]
    fn counters_come_from_the_kernel() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let lo = |c: &[LinkCounter]| c.iter().find(|c| c.index == 1).copied();
        let before = rt.block_on(counters()).expect("link counters");
        let sent = std::net::UdpSocket::bind("127.0.0.1:0")
            .and_then(|s| s.send_to(&[0u8; 1000], "127.0.0.1:9"))
            .expect("a datagram over lo");
        let after = rt.block_on(counters()).expect("link counters");
        let (before, after) = (lo(&before).expect("lo read"), lo(&after).expect("lo read"));
        assert!(
            after.tx_bytes >= before.tx_bytes + sent as u64,
            "{before:?} -> {after:?}"
        );
        // What lo sends it receives: the tunnel's throughput counts both directions.
        assert!(
            after.rx_bytes >= before.rx_bytes + sent as u64 && after.rx_packets > before.rx_packets,
            "{before:?} -> {after:?}"
        );
    }

    #[test]
    fn members_are_measured_over_the_window() {
        let all = [
            Interface {
                name: "m0".into(),
                index: 4,
                ..Interface::test_default()
            },
            Interface {
                name: "m1".into(),
                index: 5,
                ..Interface::test_default()
            },
        ];
        let members = ["m0".to_owned(), "m1".to_owned()];
        let t = measure(
            &members,
            &all,
            &[at(4, 1_000), at(5, 5_000_000)],
            &[at(4, 11_000), at(5, 392_505_000)],
            10.0,
        );
        assert_eq!(t.tx_bytes, 387_515_000);
        assert_eq!(t.busiest, "m1");
        assert_eq!(t.busiest_percent, 100.0);
        assert_eq!(t.rate_mbps, 310.0);
        assert_eq!(t.members[0].tx_bytes, 10_000);
        assert_eq!(t.members[1].tx_packets, 387_505);
    }

    #[test]
    fn no_traffic_and_recreated_links_are_told_apart() {
        let all = [Interface {
            name: "m0".into(),
            index: 4,
            ..Interface::test_default()
        }];
        let members = ["m0".to_owned(), "gone".to_owned()];
        let idle = measure(&members, &all, &[at(4, 500)], &[at(4, 500)], 3.0);
        assert_eq!((idle.tx_bytes, idle.busiest.as_str()), (0, ""));
        let recreated = measure(&members, &all, &[at(4, 9_000)], &[at(4, 2_000)], 3.0);
        assert_eq!(recreated.tx_bytes, 2_000);
    }
}

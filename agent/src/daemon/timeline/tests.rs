//! The timeline against snapshots built by hand, and against a real network namespace whose
//! MTU, routes and congestion control change between two readings.

use std::collections::BTreeMap;

use super::read::{self, link_section, route_section};
use super::snapshot::{Section, Snapshot};
use super::*;
use crate::config::inventory::LinkState;
use crate::testing::ip;

fn link(name: &str, index: u32, mtu: u32) -> LinkState {
    LinkState {
        name: name.into(),
        index,
        kind: "wireguard".into(),
        mtu,
        up: true,
        master: String::new(),
        bond_hash_policy: String::new(),
        addresses: vec!["10.0.0.1/24".into()],
    }
}

fn snapshot(links: &[LinkState]) -> Snapshot {
    let map: BTreeMap<String, LinkState> =
        links.iter().map(|l| (l.name.clone(), l.clone())).collect();
    let mut s = Snapshot::default();
    s.set("links", link_section(&map));
    s
}

fn texts(events: &[Event]) -> Vec<String> {
    events.iter().map(|e| e.text.clone()).collect()
}

#[test]
fn an_mtu_change_is_one_event_with_old_and_new() {
    let before = snapshot(&[link("wg0", 3, 1420)]);
    let after = snapshot(&[link("wg0", 3, 1500)]);
    let events = diff(&before, &after, 1_000);
    assert_eq!(texts(&events), ["wg0's MTU changed 1420 → 1500"]);
    let e = &events[0];
    assert_eq!(
        (e.kind.as_str(), e.interface.as_str(), e.change),
        ("link.mtu", "wg0", Change::Changed)
    );
    assert_eq!(
        (e.old.as_deref(), e.new.as_deref()),
        (Some("1420"), Some("1500"))
    );
    assert_eq!(e.ts_ms, 1_000);
}

#[test]
fn the_same_configuration_gives_no_event() {
    let s = snapshot(&[link("wg0", 3, 1420), link("eth0", 2, 1500)]);
    assert!(diff(&s, &s.clone(), 1).is_empty());
    // Nothing to compare with (the first snapshot after start): nothing.
    assert!(diff(&Snapshot::default(), &s, 1).is_empty());
}

#[test]
fn a_link_added_is_one_event_not_one_per_setting() {
    let before = snapshot(&[link("eth0", 2, 1500)]);
    let after = snapshot(&[link("eth0", 2, 1500), link("wg1", 4, 1420)]);
    assert_eq!(texts(&diff(&before, &after, 1)), ["wg1 (wireguard) added"]);
    assert_eq!(
        texts(&diff(&after, &before, 1)),
        ["wg1 (wireguard) removed"]
    );
}

#[test]
fn a_section_not_read_or_read_in_part_is_not_compared() {
    let before = snapshot(&[link("wg0", 3, 1420)]);
    // The links could not be read this time: not "everything removed".
    assert!(diff(&before, &Snapshot::default(), 1).is_empty());
    let mut a = Snapshot::default();
    a.set("firewall", Section::default());
    let mut b = Snapshot::default();
    let mut s = Section {
        guard: "iptables: not loaded".into(),
        ..Section::default()
    };
    s.put(Kind::Firewall, "eth0", "masquerade", "masquerade");
    b.set("firewall", s);
    assert!(diff(&a, &b, 1).is_empty());
}

#[test]
fn a_multipath_route_names_each_nexthop() {
    use crate::config::route_table::{Nexthop, TableRoute};
    let names = BTreeMap::from([(2, "eth0"), (3, "eth1")]);
    let hop = |i| Nexthop {
        ifindex: i,
        weight: 1,
        gateway: None,
    };
    let route = |hops: Vec<Nexthop>| TableRoute {
        destination: "10.9.0.0/24".parse().expect("prefix"),
        table: 254,
        nexthops: hops,
    };
    let mut a = Snapshot::default();
    a.set("routes", route_section(&[route(vec![hop(2)])], &names));
    let mut b = Snapshot::default();
    b.set(
        "routes",
        route_section(&[route(vec![hop(2), hop(3)])], &names),
    );
    assert_eq!(
        texts(&diff(&a, &b, 1)),
        ["route 10.9.0.0/24 table main changed dev eth0 → dev eth0 weight 1, dev eth1 weight 1"]
    );
}

#[test]
fn a_finding_cites_the_latest_change_before_it_and_only_that() {
    let before = snapshot(&[link("wg0", 3, 1420)]);
    let after = snapshot(&[link("wg0", 3, 1500)]);
    let events = diff(&before, &after, 100_000);
    assert_eq!(
        cause(&events, 140_000, 600_000).as_deref(),
        Some("began 40 s after wg0's MTU changed 1420 → 1500")
    );
    // Before the change, or long after it: no citation.
    assert_eq!(cause(&events, 99_000, 600_000), None);
    assert_eq!(cause(&events, 800_000, 600_000), None);
    assert_eq!(cause(&[], 140_000, 600_000), None);
    assert!(events[0].concerns("wg0", &[]));
    assert!(!events[0].concerns("wg1", &[]));
    assert!(events[0].concerns("vx0", &["wg0".into()]));
}

fn set_cc(name: &str) {
    std::fs::write("/proc/sys/net/ipv4/tcp_congestion_control", name).expect("set cc");
}

#[test]
fn changes_in_a_real_namespace_are_seen_and_no_change_is_not() {
    if !crate::testing::root_or_skip("for a network namespace") {
        return;
    }
    crate::testing::in_new_netns(|| async {
        // No IPv6 on the test's links: the kernel adds a link-local address some time
        // after a link comes up, a real change the control would otherwise catch.
        std::fs::write("/proc/sys/net/ipv6/conf/default/disable_ipv6", "1").expect("disable IPv6");
        ip("link add tl0 type veth peer name tl1");
        ip("link set tl1 up");
        ip("link set tl0 mtu 1420 up");
        ip("addr add 10.77.0.1/24 dev tl0");
        // Only the allowed modules may be set in a namespace (tcp_allowed_congestion_control).
        set_cc("reno");
        let firewall = crate::config::firewall::Ruleset::default();
        let parts = WindowParts {
            routes: None,
            firewall: &firewall,
        };
        let first = read_window(parts).await;
        let control = read_window(parts).await;
        assert!(
            diff(&first, &control, 1).is_empty(),
            "{:?}",
            diff(&first, &control, 1)
        );

        ip("link set tl0 mtu 1380");
        set_cc("bbr");
        let fast = read_fast().await;
        let mut routes = first.clone();
        routes.update(read_fast().await);
        ip("route add 10.88.0.0/16 via 10.77.0.2 dev tl0");
        let window = read_window(parts).await;
        let seen = texts(&diff(&first, &window, 1));
        assert!(
            seen.contains(&"tl0's MTU changed 1420 → 1380".to_owned()),
            "{seen:?}"
        );
        assert!(
            seen.contains(&"net.ipv4.tcp_congestion_control changed reno → bbr".to_owned()),
            "{seen:?}"
        );
        // A notification's reading has links and routes, not sysctls.
        let notified = texts(&diff(&first, &fast, 1));
        assert_eq!(notified, ["tl0's MTU changed 1420 → 1380"]);
        let with_route = texts(&diff(&routes, &read_fast().await, 1));
        assert_eq!(
            with_route,
            ["route 10.88.0.0/16 table main added: via 10.77.0.2 dev tl0"]
        );
    });
}

#[test]
fn a_routing_table_too_large_to_compare_gives_no_event() {
    use crate::config::route_table::{Nexthop, TableRoute};
    let names = BTreeMap::from([(2, "eth0")]);
    let table = |n: usize, via: u32| -> Vec<TableRoute> {
        (0..n)
            .map(|i| TableRoute {
                destination: format!("10.{}.{}.0/24", i / 256, i % 256)
                    .parse()
                    .expect("prefix"),
                table: 254,
                nexthops: vec![Nexthop {
                    ifindex: 2,
                    weight: 1,
                    gateway: Some(format!("192.0.2.{via}").parse().expect("gateway")),
                }],
            })
            .collect()
    };
    let section = |routes: &[TableRoute]| {
        let mut s = Snapshot::default();
        s.set("routes", route_section(routes, &names));
        s
    };
    let big = read::MAX_ROUTES + 1;
    let (a, b) = (section(&table(big, 1)), section(&table(big, 2)));
    assert!(diff(&a, &b, 1).is_empty());
    assert!(
        b.sections["routes"].values.is_empty(),
        "nothing kept of a table that large"
    );
    // At the limit, every route is compared.
    let at = read::MAX_ROUTES;
    let (a, b) = (section(&table(at, 1)), section(&table(at, 2)));
    assert_eq!(diff(&a, &b, 1).len(), at);
}

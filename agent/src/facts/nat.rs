//! A gateway's source address translation for its tunnel's clients: the tunnel's address
//! ranges (its interface addresses and the peers' allowed IPs), the uplinks (where the
//! clients' traffic is routed out, [`crate::config::uplink`]), whether a masquerade or SNAT rule
//! covers those ranges leaving an uplink ([`crate::config::firewall`]), and what the data plane saw
//! there: packets from those ranges leaving untranslated, and whether anything came back.
//!
//! Without translation a road-warrior gateway sends its clients' private addresses to the
//! Internet, where no route leads back: every connection through it times out.

use serde::Serialize;

use crate::config::firewall::Ruleset;
use crate::config::iface::Interface;
use crate::config::prefix::Prefix;
use crate::kernel::packet::flows::Flow;
use crate::kernel::views::Direction;

/// What rules read as `nat.*`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct NatFacts {
    /// The uplink the other facts describe: of `uplinks`, the one where most of the
    /// clients' packets left untranslated, else the busiest ("" if none).
    pub uplink: String,
    /// Every interface the tunnel's clients' traffic was routed out of during the
    /// observation, busiest first; without such traffic, the main table's default route's
    /// interface. Never the diagnosed interface itself.
    pub uplinks: Vec<String>,
    /// The tunnel's address ranges: its interface's networks and the peers' allowed IPs
    /// (default routes left out), each range once.
    pub sources: Vec<String>,
    /// The private ones among them (RFC 1918, 100.64/10, fc00::/7): those that need
    /// translation to reach the Internet.
    pub private_sources: Vec<String>,
    /// A masquerade or SNAT rule covers every private range leaving through the uplink.
    pub masquerade: bool,
    /// The first rule covering them, described ("" if none).
    pub rule: String,
    /// The first private range no rule covers ("" if none).
    pub uncovered_source: String,
    /// Packets from the private ranges that left the uplink untranslated during the
    /// observation.
    pub leaked_packets: i64,
    /// The flows (address and port pairs) of those packets.
    pub leaked_flows: i64,
    /// Those of them that got anything back on the uplink.
    pub answered_flows: i64,
    /// The private range the first leaked packet came from ("" if none).
    pub leaked_source: String,
    /// "ipv4" or "ipv6": the family of `leaked_source` ("" if none).
    pub leaked_family: String,
}

/// The tunnel's ranges from its interface addresses (`10.250.0.1/24`) and the peers'
/// allowed IPs, without default routes, and without ranges another one covers.
pub fn tunnel_sources<'a>(
    addresses: &'a [String],
    allowed_ips: impl Iterator<Item = &'a String>,
) -> Vec<Prefix> {
    let all: Vec<Prefix> = addresses
        .iter()
        .chain(allowed_ips)
        .filter_map(|a| a.parse::<Prefix>().ok())
        .filter(|p| !p.is_default())
        .collect();
    let mut out: Vec<Prefix> = Vec::new();
    for p in &all {
        let covered = all.iter().any(|o| o != p && o.covers(p)) || out.contains(p);
        if !covered {
            out.push(*p);
        }
    }
    out
}

fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// The facts, from the configuration and the flows the data plane saw in the window, about
/// the uplink among `uplinks` (busiest first) where most packets left untranslated, else
/// the busiest.
pub fn facts(
    sources: &[Prefix],
    uplinks: &[&Interface],
    firewall: &Ruleset,
    flows: &[Flow],
) -> NatFacts {
    let private: Vec<&Prefix> = sources.iter().filter(|p| p.is_private()).collect();
    let mut facts = NatFacts::default();
    for uplink in uplinks {
        let on = on_uplink(&private, uplink, firewall, flows);
        if facts.uplink.is_empty() || on.leaked_packets > facts.leaked_packets {
            facts = on;
        }
    }
    facts.uplinks = uplinks.iter().map(|u| u.name.clone()).collect();
    facts.sources = sources.iter().map(ToString::to_string).collect();
    facts.private_sources = private.iter().map(ToString::to_string).collect();
    facts
}

/// The translation facts of one uplink (`uplinks`, `sources` and `private_sources` left
/// empty).
fn on_uplink(
    private: &[&Prefix],
    uplink: &Interface,
    firewall: &Ruleset,
    flows: &[Flow],
) -> NatFacts {
    let mut facts = NatFacts {
        uplink: uplink.name.clone(),
        ..NatFacts::default()
    };
    let rules: Vec<(&Prefix, Option<String>)> = private
        .iter()
        .map(|p| (*p, firewall.nat_for(p, &uplink.name).map(|r| r.describe())))
        .collect();
    facts.masquerade = !rules.is_empty() && rules.iter().all(|(_, r)| r.is_some());
    facts.rule = rules
        .iter()
        .find_map(|(_, r)| r.clone())
        .unwrap_or_default();
    facts.uncovered_source = rules
        .iter()
        .find(|(_, r)| r.is_none())
        .map(|(p, _)| p.to_string())
        .unwrap_or_default();

    let on_uplink = |f: &&Flow, dir: Direction| f.ifindex == uplink.index && f.direction == dir;
    let leaked: Vec<(&Flow, &Prefix)> = flows
        .iter()
        .filter(|f| on_uplink(f, Direction::Egress))
        .filter_map(|f| Some((f, *private.iter().find(|p| p.contains(f.src))?)))
        .collect();
    facts.leaked_packets = to_i64(leaked.iter().map(|(f, _)| f.packets).sum());
    facts.leaked_flows = leaked.len() as i64;
    facts.answered_flows = leaked
        .iter()
        .filter(|(out, _)| {
            flows.iter().any(|back| {
                on_uplink(&back, Direction::Ingress) && back.src == out.dst && back.dst == out.src
            })
        })
        .count() as i64;
    if let Some((_, range)) = leaked.first() {
        facts.leaked_source = range.to_string();
        facts.leaked_family = if range.is_ipv4() { "ipv4" } else { "ipv6" }.into();
    }
    facts
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::firewall::{Action, FirewallRule, Hook, IfName, Match, Source, TableFamily};
    use crate::kernel::packet::flows::test_flow;

    /// An nftables masquerade of 10.250.0.0/24 leaving through `oif`.
    fn masquerade(oif: &str) -> Ruleset {
        Ruleset {
            rules: vec![FirewallRule {
                source: Source::Nftables,
                family: TableFamily::Ipv4,
                table: "nat".into(),
                chain: "postrouting".into(),
                hook: Hook::Postrouting,
                matches: vec![
                    Match::Saddr {
                        prefix: "10.250.0.0/24".parse().expect("prefix"),
                        negated: false,
                    },
                    Match::Oif {
                        name: IfName {
                            name: oif.into(),
                            prefix: false,
                        },
                        negated: false,
                    },
                ],
                action: Action::Masquerade,
            }],
            errors: Vec::new(),
        }
    }

    fn uplink() -> Interface {
        Interface {
            name: "eth1".into(),
            index: 3,
            ..Interface::test_default()
        }
    }

    #[test]
    fn only_a_masquerade_on_the_uplink_covers_the_tunnel() {
        let sources = ["10.250.0.0/24".parse::<Prefix>().expect("prefix")];
        let on_uplink = facts(&sources, &[&uplink()], &masquerade("eth1"), &[]);
        assert!(on_uplink.masquerade && on_uplink.rule.contains("masquerade"));
        assert_eq!(on_uplink.uncovered_source, "");
        // The same rule for the client side (eth0) translates nothing leaving eth1.
        let elsewhere = facts(&sources, &[&uplink()], &masquerade("eth0"), &[]);
        assert!(!elsewhere.masquerade);
        assert_eq!(
            (elsewhere.rule.as_str(), elsewhere.uncovered_source.as_str()),
            ("", "10.250.0.0/24")
        );
    }

    #[test]
    fn untranslated_flows_count_and_answers_are_matched() {
        let sources = ["10.250.0.0/24".parse::<Prefix>().expect("prefix")];
        let flows = [
            // Two clients' flows leave the uplink untranslated, one gets an answer.
            test_flow(3, Direction::Egress, "10.250.0.2", 1000, "10.200.2.2", 5000),
            test_flow(3, Direction::Egress, "10.250.0.3", 1001, "10.200.2.2", 3000),
            test_flow(3, Direction::Ingress, "10.200.2.2", 5201, "10.250.0.3", 800),
            // The gateway's own traffic, and the clients' on another interface, do not.
            test_flow(3, Direction::Egress, "10.200.2.1", 1002, "10.200.2.2", 9000),
            test_flow(7, Direction::Egress, "10.250.0.2", 1003, "10.250.0.9", 9000),
        ];
        let f = facts(&sources, &[&uplink()], &Ruleset::default(), &flows);
        assert_eq!((f.leaked_flows, f.answered_flows), (2, 1));
        assert_eq!(f.leaked_packets, 8);
        assert_eq!(
            (f.leaked_source.as_str(), f.leaked_family.as_str()),
            ("10.250.0.0/24", "ipv4")
        );
        assert!(!f.masquerade);
    }

    /// Two uplinks: the facts are about the one the clients' packets left untranslated
    /// through, even when it is not the busiest, and both are listed, busiest first; with
    /// no leak anywhere, about the busiest.
    #[test]
    fn the_facts_follow_the_uplink_that_leaks() {
        let sources: Vec<Prefix> = ["10.250.0.0/24", "fd00:250::/64"]
            .iter()
            .map(|p| p.parse().expect("prefix"))
            .collect();
        let second = Interface {
            name: "up1".into(),
            index: 4,
            ..Interface::test_default()
        };
        let flows = [
            // Translated on eth1 (the masquerade covers it), untranslated IPv6 on up1.
            test_flow(
                3,
                Direction::Egress,
                "10.200.2.1",
                1000,
                "198.51.100.7",
                9000,
            ),
            test_flow(
                4,
                Direction::Egress,
                "fd00:250::2",
                1001,
                "2001:db8::7",
                3000,
            ),
        ];
        let uplinks = [&uplink(), &second];
        let f = facts(&sources, &uplinks, &masquerade("eth1"), &flows);
        assert_eq!(f.uplinks, ["eth1", "up1"]);
        assert_eq!(f.uplink, "up1");
        assert_eq!((f.leaked_flows, f.leaked_packets), (1, 3));
        assert_eq!(
            (f.leaked_source.as_str(), f.leaked_family.as_str()),
            ("fd00:250::/64", "ipv6")
        );
        assert!(!f.masquerade);
        let quiet = facts(&sources, &uplinks, &masquerade("eth1"), &flows[..1]);
        assert_eq!((quiet.uplink.as_str(), quiet.leaked_flows), ("eth1", 0));
        // No uplink at all: nothing to describe.
        let none = facts(&sources, &[], &masquerade("eth1"), &flows);
        assert_eq!((none.uplink.as_str(), none.uplinks.len()), ("", 0));
        assert_eq!(none.private_sources, ["10.250.0.0/24", "fd00:250::/64"]);
    }

    #[test]
    fn sources_are_the_tunnel_ranges_once_without_default_routes() {
        let allowed = ["10.250.0.2/32".to_owned(), "0.0.0.0/0".to_owned()];
        let got = tunnel_sources(
            &["10.250.0.1/24".to_owned(), "fd00:250::1/64".to_owned()],
            allowed.iter(),
        );
        let got: Vec<String> = got.iter().map(ToString::to_string).collect();
        assert_eq!(got, ["10.250.0.0/24", "fd00:250::/64"]);
    }
}

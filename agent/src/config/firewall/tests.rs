//! What a rule covers, and nf_tables expressions as the kernel dumps them.

use super::chains::Decoded;
use super::*;

fn p(s: &str) -> Prefix {
    s.parse().expect("prefix")
}

fn oif(name: &str, prefix: bool, negated: bool) -> Match {
    Match::Oif {
        name: IfName {
            name: name.into(),
            prefix,
        },
        negated,
    }
}

fn rule(hook: Hook, matches: Vec<Match>, action: Action) -> FirewallRule {
    FirewallRule {
        source: Source::Nftables,
        family: TableFamily::Ipv4,
        table: "t".into(),
        chain: "c".into(),
        hook,
        matches,
        action,
    }
}

fn set(rules: Vec<FirewallRule>) -> Ruleset {
    Ruleset {
        rules,
        errors: Vec::new(),
    }
}

#[test]
fn a_clamp_counts_only_for_the_interfaces_it_matches() {
    let on_wg = set(vec![rule(
        Hook::Forward,
        vec![oif("wg0", false, false)],
        Action::ClampMss(None),
    )]);
    assert!(on_wg.clamp_for("wg0", 1380).is_some());
    assert!(on_wg.clamp_for("eth0", 1460).is_none(), "another interface");
    assert!(on_wg.any_clamp());

    let wildcard = set(vec![rule(
        Hook::Postrouting,
        vec![oif("wg", true, false)],
        Action::ClampMss(None),
    )]);
    assert!(wildcard.clamp_for("wg0", 1380).is_some());
    assert!(wildcard.clamp_for("eth0", 1380).is_none());

    let everywhere_but_eth0 = set(vec![rule(
        Hook::Forward,
        vec![oif("eth0", false, true)],
        Action::ClampMss(None),
    )]);
    assert!(everywhere_but_eth0.clamp_for("wg0", 1380).is_some());
    assert!(everywhere_but_eth0.clamp_for("eth0", 1460).is_none());

    let global = set(vec![rule(Hook::Forward, vec![], Action::ClampMss(None))]);
    assert!(global.clamp_for("wg0", 1380).is_some());
}

#[test]
fn a_clamp_must_be_on_the_forwarding_path_and_small_enough() {
    let input = set(vec![rule(Hook::Input, vec![], Action::ClampMss(None))]);
    assert!(input.clamp_for("wg0", 1380).is_none(), "input hook");
    let fixed = set(vec![rule(
        Hook::Forward,
        vec![],
        Action::ClampMss(Some(1400)),
    )]);
    assert!(fixed.clamp_for("wg0", 1380).is_none(), "1400 > 1380");
    assert!(fixed.clamp_for("wg0", 1400).is_some());
    let v6_only = FirewallRule {
        family: TableFamily::Ipv6,
        ..rule(Hook::Forward, vec![], Action::ClampMss(None))
    };
    assert!(set(vec![v6_only]).clamp_for("wg0", 1380).is_none());
}

#[test]
fn a_masquerade_must_cover_the_sources_and_the_uplink() {
    let sources = p("10.250.0.0/24");
    let rules = set(vec![rule(
        Hook::Postrouting,
        vec![
            Match::Saddr {
                prefix: p("10.250.0.0/16"),
                negated: false,
            },
            oif("eth1", false, false),
        ],
        Action::Masquerade,
    )]);
    assert!(rules.nat_for(&sources, "eth1").is_some());
    assert!(rules.nat_for(&sources, "eth0").is_none(), "another uplink");
    assert!(rules.nat_for(&p("192.168.1.0/24"), "eth1").is_none());
    assert!(
        rules.nat_for(&p("10.0.0.0/8"), "eth1").is_none(),
        "a rule for part of the range leaves the rest untranslated"
    );

    let except_lan = set(vec![rule(
        Hook::Postrouting,
        vec![Match::Saddr {
            prefix: p("192.168.0.0/16"),
            negated: true,
        }],
        Action::Snat,
    )]);
    assert!(except_lan.nat_for(&sources, "eth1").is_some());
    assert!(except_lan.nat_for(&p("192.168.7.0/24"), "eth1").is_none());

    let forward_hook = set(vec![rule(Hook::Forward, vec![], Action::Masquerade)]);
    assert!(forward_hook.nat_for(&sources, "eth1").is_none());
}

#[test]
fn an_unmodelled_condition_is_given_the_benefit_of_the_doubt() {
    let rules = set(vec![rule(
        Hook::Postrouting,
        vec![Match::Other("oifname in @uplinks".into())],
        Action::Masquerade,
    )]);
    assert!(rules.nat_for(&p("10.250.0.0/24"), "eth1").is_some());
    let text = rules.rules[0].describe();
    assert!(
        text.contains("postrouting") && text.contains("@uplinks") && text.ends_with("masquerade"),
        "{text}"
    );
}

// ---------------------------------------------------------------------------
// nf_tables expressions, encoded as the kernel dumps them.
// ---------------------------------------------------------------------------

fn nla(kind: u16, value: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&((4 + value.len()) as u16).to_ne_bytes());
    out.extend_from_slice(&kind.to_ne_bytes());
    out.extend_from_slice(value);
    while out.len() % 4 != 0 {
        out.push(0);
    }
    out
}

fn nested(kind: u16, parts: &[Vec<u8>]) -> Vec<u8> {
    nla(kind | 0x8000, &parts.concat())
}

fn be(v: u32) -> Vec<u8> {
    v.to_be_bytes().to_vec()
}

fn expr(name: &str, data: &[Vec<u8>]) -> Vec<u8> {
    let mut n = name.as_bytes().to_vec();
    n.push(0);
    nested(1, &[nla(1, &n), nested(2, data)])
}

fn decode(exprs: &[Vec<u8>], family: TableFamily) -> Decoded {
    super::nft_expr::decode(&exprs.concat(), family)
}

#[test]
fn an_nft_clamp_on_an_interface_decodes_to_its_condition_and_action() {
    // oifname "wg0" tcp flags syn tcp option maxseg size set rt mtu
    let mut name = b"wg0".to_vec();
    name.resize(16, 0);
    let d = decode(
        &[
            expr("meta", &[nla(2, &be(7)), nla(1, &be(1))]),
            expr(
                "cmp",
                &[nla(1, &be(1)), nla(2, &be(0)), nested(3, &[nla(1, &name)])],
            ),
            expr("meta", &[nla(2, &be(16)), nla(1, &be(1))]),
            expr(
                "cmp",
                &[nla(1, &be(1)), nla(2, &be(0)), nested(3, &[nla(1, &[6])])],
            ),
            expr("rt", &[nla(1, &be(1)), nla(2, &be(3))]),
            expr(
                "exthdr",
                &[
                    nla(7, &be(1)),
                    nla(2, &[2]),
                    nla(3, &be(2)),
                    nla(4, &be(2)),
                    nla(6, &be(1)),
                ],
            ),
        ],
        TableFamily::Inet,
    );
    assert_eq!(d.action, Some(Action::ClampMss(None)));
    assert_eq!(d.matches[0], oif("wg0", false, false));
    assert!(matches!(d.matches[1], Match::Other(_)), "{:?}", d.matches);
}

#[test]
fn an_nft_masquerade_with_a_source_prefix_and_a_jump_decode() {
    // ip saddr 10.250.0.0/24 oifname "eth*" masquerade (iptables-nft: -o eth+ -j MASQUERADE)
    let d = decode(
        &[
            expr(
                "payload",
                &[
                    nla(1, &be(1)),
                    nla(2, &be(1)),
                    nla(3, &be(12)),
                    nla(4, &be(4)),
                ],
            ),
            expr(
                "bitwise",
                &[
                    nla(1, &be(1)),
                    nla(2, &be(1)),
                    nla(3, &be(4)),
                    nested(4, &[nla(1, &[255, 255, 255, 0])]),
                    nested(5, &[nla(1, &[0, 0, 0, 0])]),
                ],
            ),
            expr(
                "cmp",
                &[
                    nla(1, &be(1)),
                    nla(2, &be(0)),
                    nested(3, &[nla(1, &[10, 250, 0, 0])]),
                ],
            ),
            expr("meta", &[nla(2, &be(7)), nla(1, &be(9))]),
            expr(
                "cmp",
                &[nla(1, &be(9)), nla(2, &be(0)), nested(3, &[nla(1, b"eth")])],
            ),
            expr(
                "target",
                &[nla(1, b"MASQUERADE\0"), nla(2, &be(0)), nla(3, &[0; 8])],
            ),
        ],
        TableFamily::Ipv4,
    );
    assert_eq!(d.action, Some(Action::Masquerade));
    assert_eq!(
        d.matches,
        vec![
            Match::Saddr {
                prefix: p("10.250.0.0/24"),
                negated: false
            },
            oif("eth", true, false)
        ]
    );

    // A byte-aligned prefix without bitwise (iptables-nft -s 10.250.0.0/16), and a jump.
    let d = decode(
        &[
            expr(
                "payload",
                &[
                    nla(1, &be(1)),
                    nla(2, &be(1)),
                    nla(3, &be(12)),
                    nla(4, &be(2)),
                ],
            ),
            expr(
                "cmp",
                &[
                    nla(1, &be(1)),
                    nla(2, &be(1)),
                    nested(3, &[nla(1, &[10, 250])]),
                ],
            ),
            expr(
                "immediate",
                &[
                    nla(1, &be(0)),
                    nested(
                        2,
                        &[nested(2, &[nla(1, &be(-3i32 as u32)), nla(2, b"out\0")])],
                    ),
                ],
            ),
        ],
        TableFamily::Ipv4,
    );
    assert_eq!(d.jump.as_deref(), Some("out"));
    assert_eq!(
        d.matches,
        vec![Match::Saddr {
            prefix: p("10.250.0.0/16"),
            negated: true
        }]
    );
}

#[test]
fn x_tables_targets_decode() {
    assert_eq!(
        xtables::target_action("TCPMSS", &0xffffu16.to_ne_bytes()),
        Some(Action::ClampMss(None))
    );
    assert_eq!(
        xtables::target_action("TCPMSS", &1360u16.to_ne_bytes()),
        Some(Action::ClampMss(Some(1360)))
    );
    assert_eq!(xtables::target_action("SNAT", &[]), Some(Action::Snat));
    assert_eq!(xtables::target_action("LOG", &[]), None);
}

//! netdoctor reads the firewall as rules (nftables over netlink, legacy iptables over
//! getsockopt), never by running `nft` or `iptables`; the lab runs them to write the rules.
//! Each case writes one rule in a fresh namespace with `nft`, `iptables-nft` or
//! `iptables-legacy`, reads the ruleset from inside that namespace, and asks what it
//! covers: a clamp or a masquerade on another interface, for other sources, or in a chain
//! no packet reaches, does not count.
//!
//! Needs root and nft, iptables-nft, iptables-legacy; skips elsewhere, fails under CI=true.

use anyhow::{ensure, Context, Result};
use netdoctor::firewall::{Action, FirewallRule, Ruleset, Source};
use netdoctor::prefix::Prefix;
use netdoctor_lab::{ci, Netns};

const TUNNEL: &str = "wg0";
const UPLINK: &str = "eth1";
const OTHER: &str = "eth0";
const SOURCES: &str = "10.250.0.0/24";

/// The ruleset as netdoctor reads it inside `ns`.
fn read(ns: &Netns) -> Result<Ruleset> {
    let set = ns.run_in(Ruleset::read)?;
    ensure!(
        set.errors.is_empty(),
        "reading the ruleset: {:?}",
        set.errors
    );
    Ok(set)
}

fn sources() -> Prefix {
    SOURCES.parse().expect("prefix")
}

/// Runs each of `commands` (whitespace-separated words, `'…'` kept whole) in `ns`.
fn run_all(ns: &Netns, commands: &[&str]) -> Result<()> {
    for c in commands {
        let mut words: Vec<String> = Vec::new();
        let mut quoted: Option<String> = None;
        for w in c.split(' ') {
            match &mut quoted {
                Some(q) => {
                    q.push(' ');
                    q.push_str(w.trim_end_matches('\''));
                    if w.ends_with('\'') {
                        words.extend(quoted.take());
                    }
                }
                None if w.starts_with('\'') && !w.ends_with('\'') => {
                    quoted = Some(w.trim_start_matches('\'').to_owned())
                }
                None => words.push(w.trim_matches('\'').to_owned()),
            }
        }
        let argv: Vec<&str> = words.iter().map(String::as_str).collect();
        ns.run(&argv).with_context(|| format!("running {c}"))?;
    }
    Ok(())
}

fn ready() -> bool {
    ci::require_root_or_skip()
        && ci::require_tools_or_skip(&["nft", "iptables-nft", "iptables-legacy"])
}

fn describe(set: &Ruleset) -> String {
    set.rules
        .iter()
        .map(FirewallRule::describe)
        .collect::<Vec<_>>()
        .join("\n")
}

/// How each tool writes the two rules: an MSS clamp for SYNs leaving through `oif`, and a
/// masquerade of `SOURCES` leaving through `oif`.
#[derive(Debug, Clone, Copy)]
enum Tool {
    Nft,
    IptablesNft,
    IptablesLegacy,
}

impl Tool {
    fn clamp(self, oif: &str) -> Vec<String> {
        match self {
            Tool::Nft => vec![
                "nft add table inet mssfix".into(),
                "nft add chain inet mssfix forward '{ type filter hook forward priority mangle; }'"
                    .into(),
                format!(
                    "nft add rule inet mssfix forward oifname {oif} tcp flags syn \
                     tcp option maxseg size set rt mtu"
                ),
            ],
            Tool::IptablesNft | Tool::IptablesLegacy => vec![format!(
                "{} -t mangle -A FORWARD -o {oif} -p tcp --tcp-flags SYN,RST SYN \
                 -j TCPMSS --clamp-mss-to-pmtu",
                self.iptables()
            )],
        }
    }

    fn masquerade(self, oif: &str) -> Vec<String> {
        match self {
            Tool::Nft => vec![
                "nft add table ip nat".into(),
                "nft add chain ip nat postrouting '{ type nat hook postrouting priority srcnat; }'"
                    .into(),
                format!(
                    "nft add rule ip nat postrouting ip saddr {SOURCES} oifname {oif} masquerade"
                ),
            ],
            Tool::IptablesNft | Tool::IptablesLegacy => vec![format!(
                "{} -t nat -A POSTROUTING -s {SOURCES} -o {oif} -j MASQUERADE",
                self.iptables()
            )],
        }
    }

    fn iptables(self) -> &'static str {
        match self {
            Tool::IptablesLegacy => "iptables-legacy",
            _ => "iptables-nft",
        }
    }

    fn source(self) -> Source {
        match self {
            Tool::IptablesLegacy => Source::IptablesLegacy,
            _ => Source::Nftables,
        }
    }
}

/// A namespace with `commands` run in it, and the ruleset netdoctor reads there.
fn with_rules(commands: &[String]) -> Result<(Netns, Ruleset)> {
    let ns = Netns::new()?;
    let argv: Vec<&str> = commands.iter().map(|c| c.as_str()).collect();
    run_all(&ns, &argv)?;
    let set = read(&ns)?;
    Ok((ns, set))
}

fn rules_count_only_for_what_they_cover(tool: Tool) -> Result<()> {
    // A clamp for the tunnel, and a masquerade for the tunnel's sources on the uplink.
    let (_ns, set) = with_rules(&[tool.clamp(TUNNEL), tool.masquerade(UPLINK)].concat())?;
    let shown = describe(&set);
    let clamp = set
        .clamp_for(TUNNEL, 1380)
        .with_context(|| format!("{tool:?}: the clamp on {TUNNEL} unseen in:\n{shown}"))?;
    ensure!(
        clamp.source == tool.source() && clamp.action == Action::ClampMss(None),
        "{tool:?}: {}",
        clamp.describe()
    );
    let nat = set
        .nat_for(&sources(), UPLINK)
        .with_context(|| format!("{tool:?}: the masquerade on {UPLINK} unseen in:\n{shown}"))?;
    ensure!(
        nat.action == Action::Masquerade,
        "{tool:?}: {}",
        nat.describe()
    );
    ensure!(
        set.clamp_for(OTHER, 1460).is_none() && set.nat_for(&sources(), OTHER).is_none(),
        "{tool:?}: rules for {TUNNEL} and {UPLINK} taken to cover {OTHER}:\n{shown}"
    );
    let elsewhere: Prefix = "192.168.7.0/24".parse()?;
    ensure!(
        set.nat_for(&elsewhere, UPLINK).is_none(),
        "{tool:?}: the masquerade of {SOURCES} taken to cover {elsewhere}:\n{shown}"
    );

    // The same rules on another interface: they exist, and cover nothing here.
    let (_ns, set) = with_rules(&[tool.clamp(OTHER), tool.masquerade(OTHER)].concat())?;
    let shown = describe(&set);
    ensure!(set.any_clamp(), "{tool:?}: no clamp read at all:\n{shown}");
    ensure!(
        set.clamp_for(TUNNEL, 1380).is_none(),
        "{tool:?}: a clamp on {OTHER} counted for {TUNNEL}:\n{shown}"
    );
    ensure!(
        set.nat_for(&sources(), UPLINK).is_none(),
        "{tool:?}: a masquerade on {OTHER} counted for {UPLINK}:\n{shown}"
    );
    Ok(())
}

#[test]
fn nft_rules_count_only_for_what_they_cover() -> Result<()> {
    if !ready() {
        return Ok(());
    }
    rules_count_only_for_what_they_cover(Tool::Nft)
}

#[test]
fn iptables_nft_rules_count_only_for_what_they_cover() -> Result<()> {
    if !ready() {
        return Ok(());
    }
    rules_count_only_for_what_they_cover(Tool::IptablesNft)
}

#[test]
fn iptables_legacy_rules_count_only_for_what_they_cover() -> Result<()> {
    if !ready() {
        return Ok(());
    }
    rules_count_only_for_what_they_cover(Tool::IptablesLegacy)
}

/// Rules in chains no packet reaches do not count; once a reachable rule jumps there, they
/// do, with the jump's conditions.
#[test]
fn rules_in_unused_chains_do_not_count_until_something_jumps_there() -> Result<()> {
    if !ready() {
        return Ok(());
    }
    for (tool, unused, jump) in [
        (
            "nft",
            vec![
                "nft add table inet fw",
                "nft add chain inet fw forward '{ type filter hook forward priority mangle; }'",
                "nft add chain inet fw clamp",
                "nft add rule inet fw clamp tcp flags syn tcp option maxseg size set rt mtu",
                "nft add table ip nat",
                "nft add chain ip nat postrouting '{ type nat hook postrouting priority srcnat; }'",
                "nft add chain ip nat out",
                "nft add rule ip nat out masquerade",
            ],
            vec![
                "nft add rule inet fw forward oifname wg0 jump clamp",
                "nft add rule ip nat postrouting oifname eth1 jump out",
            ],
        ),
        (
            "iptables-legacy",
            vec![
                "iptables-legacy -t mangle -N clamp",
                "iptables-legacy -t mangle -A clamp -p tcp --tcp-flags SYN,RST SYN -j TCPMSS --clamp-mss-to-pmtu",
                "iptables-legacy -t nat -N out",
                "iptables-legacy -t nat -A out -j MASQUERADE",
            ],
            vec![
                "iptables-legacy -t mangle -A FORWARD -o wg0 -j clamp",
                "iptables-legacy -t nat -A POSTROUTING -o eth1 -j out",
            ],
        ),
    ] {
        let ns = Netns::new()?;
        run_all(&ns, &unused)?;
        let set = read(&ns)?;
        ensure!(
            set.rules.is_empty(),
            "{tool}: rules of chains nothing jumps to counted:\n{}",
            describe(&set)
        );
        run_all(&ns, &jump)?;
        let set = read(&ns)?;
        let shown = describe(&set);
        ensure!(
            set.clamp_for(TUNNEL, 1380).is_some() && set.nat_for(&sources(), UPLINK).is_some(),
            "{tool}: rules reached by a jump unseen:\n{shown}"
        );
        ensure!(
            set.clamp_for(OTHER, 1460).is_none() && set.nat_for(&sources(), OTHER).is_none(),
            "{tool}: the jumps' interface conditions were lost:\n{shown}"
        );
    }
    Ok(())
}

/// ip6tables-legacy is read too (IPv6 rules never cover IPv4 packets).
#[test]
fn ip6tables_legacy_rules_are_read() -> Result<()> {
    if !ready() || !ci::require_tools_or_skip(&["ip6tables-legacy"]) {
        return Ok(());
    }
    let (_ns, set) = with_rules(&[
        "ip6tables-legacy -t mangle -A FORWARD -o wg0 -p tcp --tcp-flags SYN,RST SYN -j TCPMSS --set-mss 1340".into(),
    ])?;
    let shown = describe(&set);
    ensure!(
        set.rules.len() == 1
            && set.rules[0].source == Source::Ip6tablesLegacy
            && set.rules[0].action == Action::ClampMss(Some(1340)),
        "the ip6tables-legacy clamp unseen:\n{shown}"
    );
    ensure!(
        set.clamp_for(TUNNEL, 1380).is_none(),
        "an IPv6 rule counted for IPv4 SYNs:\n{shown}"
    );
    Ok(())
}

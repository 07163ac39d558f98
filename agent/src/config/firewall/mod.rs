//! The firewall read as rules, not as text: the NAT (masquerade, SNAT) and TCP MSS clamping
//! rules of nftables (which also holds the rules of `iptables-nft`) and of legacy iptables,
//! each with what it covers: table family, hook, chain, interfaces and source prefixes.
//! Only rules that packets can reach count: rules of base chains, and of regular chains
//! that a reachable rule jumps to (the jump's own matches apply to them as well).
//!
//! netdoctor never runs `nft` or `iptables`: [`nft`] dumps the ruleset over netlink
//! (`NFNL_SUBSYS_NFTABLES`) and [`xtables`] reads legacy tables with
//! `getsockopt(IPT_SO_GET_ENTRIES)`, as the tools themselves do.
//!
//! A match netdoctor does not model (a set lookup, a conntrack state, a mark) is kept as
//! [`Match::Other`] and taken as one that may match: a rule is only ever ruled out by what
//! netdoctor can read, so a rule it half understands never causes a false finding.

mod chains;
pub mod nft;
mod nft_expr;
mod nlattr;
pub mod xtables;

use std::net::IpAddr;

use serde::Serialize;

use super::prefix::Prefix;

/// Where a rule lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Source {
    /// nftables (`nft`, and `iptables-nft`'s tables).
    Nftables,
    /// Legacy `iptables` (x_tables over `setsockopt`).
    IptablesLegacy,
    /// Legacy `ip6tables`.
    Ip6tablesLegacy,
}

/// The netfilter hook of the chain a rule is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Hook {
    Prerouting,
    Input,
    Forward,
    Output,
    Postrouting,
}

impl Hook {
    /// As nft names it.
    pub fn name(self) -> &'static str {
        match self {
            Hook::Prerouting => "prerouting",
            Hook::Input => "input",
            Hook::Forward => "forward",
            Hook::Output => "output",
            Hook::Postrouting => "postrouting",
        }
    }

    /// From `NF_INET_*` hook numbers.
    pub fn from_number(n: u32) -> Option<Hook> {
        Some(match n {
            0 => Hook::Prerouting,
            1 => Hook::Input,
            2 => Hook::Forward,
            3 => Hook::Output,
            4 => Hook::Postrouting,
            _ => return None,
        })
    }
}

/// Which packets a table or rule sees by address family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TableFamily {
    Ipv4,
    Ipv6,
    /// nftables `inet`: both.
    Inet,
}

impl TableFamily {
    /// As nft names it (`ip`, `ip6`, `inet`).
    pub fn name(self) -> &'static str {
        match self {
            TableFamily::Ipv4 => "ip",
            TableFamily::Ipv6 => "ip6",
            TableFamily::Inet => "inet",
        }
    }

    fn admits(self, v4: bool) -> bool {
        match self {
            TableFamily::Ipv4 => v4,
            TableFamily::Ipv6 => !v4,
            TableFamily::Inet => true,
        }
    }
}

/// What a rule does that netdoctor cares about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Action {
    /// Source NAT to the outgoing interface's address.
    Masquerade,
    /// Source NAT to a given address.
    Snat,
    /// Rewrites the MSS option of SYNs: to the route's MTU (`None`), or to a value.
    ClampMss(Option<u16>),
}

/// An interface name as rules match it: exact, or a prefix (`wg*`, iptables' `wg+`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IfName {
    /// The name, or its prefix.
    pub name: String,
    /// Matches every name starting with `name`.
    pub prefix: bool,
}

impl IfName {
    /// Whether interface `iface` matches.
    pub fn matches(&self, iface: &str) -> bool {
        if self.prefix {
            iface.starts_with(&self.name)
        } else {
            iface == self.name
        }
    }

    /// From the bytes a rule compares an interface name with: up to a NUL it is exact,
    /// without one a prefix (`IFNAMSIZ` bytes of a full name always hold a NUL).
    pub fn from_bytes(bytes: &[u8]) -> IfName {
        match bytes.iter().position(|b| *b == 0) {
            Some(end) => IfName {
                name: String::from_utf8_lossy(&bytes[..end]).into_owned(),
                prefix: false,
            },
            None => IfName {
                name: String::from_utf8_lossy(bytes).into_owned(),
                prefix: true,
            },
        }
    }
}

/// One condition of a rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Match {
    /// Incoming interface (`iifname`, `-i`), `negated` for `!=`.
    Iif { name: IfName, negated: bool },
    /// Outgoing interface (`oifname`, `-o`).
    Oif { name: IfName, negated: bool },
    /// Source address in a prefix (`ip saddr`, `-s`).
    Saddr { prefix: Prefix, negated: bool },
    /// Only one address family (`meta nfproto`, or the table's).
    Family(TableFamily),
    /// A condition netdoctor does not model: it may match.
    Other(String),
}

/// A rule that rewrites what netdoctor cares about, where packets reach it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FirewallRule {
    /// nftables or legacy iptables.
    pub source: Source,
    /// Table family.
    pub family: TableFamily,
    /// Table name.
    pub table: String,
    /// The chain the rule is in; for a rule reached by a jump, `base > … > chain`.
    pub chain: String,
    /// The hook of the base chain packets come from.
    pub hook: Hook,
    /// Every condition, the jumps' included.
    pub matches: Vec<Match>,
    /// What it does.
    pub action: Action,
}

/// The packets a question is about; `None` is "any".
#[derive(Debug, Clone, Copy, Default)]
pub struct Packets<'a> {
    /// IPv4 (else IPv6).
    pub v4: bool,
    /// Arriving on this interface.
    pub iif: Option<&'a str>,
    /// Leaving through this interface.
    pub oif: Option<&'a str>,
    /// With a source address in this prefix.
    pub src: Option<Prefix>,
}

impl Match {
    /// Whether the condition holds for (every one of) `p`; an unknown side holds.
    fn holds(&self, p: &Packets<'_>) -> bool {
        match self {
            Match::Iif { name, negated } => p.iif.is_none_or(|i| name.matches(i) != *negated),
            Match::Oif { name, negated } => p.oif.is_none_or(|o| name.matches(o) != *negated),
            Match::Saddr { prefix, negated } => p.src.is_none_or(|s| {
                if prefix.is_ipv4() != p.v4 {
                    // An address match of the other family: the rule is for other packets.
                    false
                } else if *negated {
                    !prefix.overlaps(&s)
                } else {
                    prefix.covers(&s)
                }
            }),
            Match::Family(f) => f.admits(p.v4),
            Match::Other(_) => true,
        }
    }
}

impl FirewallRule {
    /// Whether the rule applies to all packets described by `p`.
    pub fn covers(&self, p: &Packets<'_>) -> bool {
        self.family.admits(p.v4) && self.matches.iter().all(|m| m.holds(p))
    }

    /// One line for people: `nftables ip nat POSTROUTING (postrouting): oifname "eth1"
    /// saddr 10.250.0.0/24 -> masquerade`.
    pub fn describe(&self) -> String {
        let conditions: Vec<String> = self
            .matches
            .iter()
            .map(|m| match m {
                Match::Iif { name, negated } | Match::Oif { name, negated } => format!(
                    "{}{} \"{}{}\"",
                    if matches!(m, Match::Iif { .. }) {
                        "iifname"
                    } else {
                        "oifname"
                    },
                    if *negated { " !=" } else { "" },
                    name.name,
                    if name.prefix { "*" } else { "" }
                ),
                Match::Saddr { prefix, negated } => {
                    format!("saddr{} {prefix}", if *negated { " !=" } else { "" })
                }
                Match::Family(f) => f.name().to_owned(),
                Match::Other(what) => what.clone(),
            })
            .collect();
        let action = match self.action {
            Action::Masquerade => "masquerade".to_owned(),
            Action::Snat => "snat".to_owned(),
            Action::ClampMss(None) => "clamp mss to path mtu".to_owned(),
            Action::ClampMss(Some(v)) => format!("set mss {v}"),
        };
        let source = match self.source {
            Source::Nftables => "nftables",
            Source::IptablesLegacy => "iptables-legacy",
            Source::Ip6tablesLegacy => "ip6tables-legacy",
        };
        format!(
            "{source} {} {} {} ({}): {}{action}",
            self.family.name(),
            self.table,
            self.chain,
            self.hook.name(),
            if conditions.is_empty() {
                String::new()
            } else {
                conditions.join(" ") + " -> "
            }
        )
    }
}

/// The NAT and MSS clamping rules of the caller's network namespace.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Ruleset {
    /// Every reachable masquerade, SNAT and MSS clamping rule.
    pub rules: Vec<FirewallRule>,
    /// What could not be read (each source is optional: the others still count).
    pub errors: Vec<String>,
}

impl Ruleset {
    /// Reads nftables and legacy iptables (IPv4 and IPv6) of the caller's namespace.
    pub fn read() -> Ruleset {
        let mut set = Ruleset::default();
        match nft::read() {
            Ok(rules) => set.rules.extend(rules),
            Err(e) => set.errors.push(format!("nftables: {e}")),
        }
        for v4 in [true, false] {
            match xtables::read(v4) {
                Ok(rules) => set.rules.extend(rules),
                Err(e) => set.errors.push(format!(
                    "{}: {e}",
                    if v4 { "iptables" } else { "ip6tables" }
                )),
            }
        }
        set
    }

    /// A rule that clamps the MSS of forwarded SYNs leaving through `oif` to at most
    /// `mss_limit` (to the path MTU, or to a value that fits).
    pub fn clamp_for(&self, oif: &str, mss_limit: i64) -> Option<&FirewallRule> {
        let p = Packets {
            v4: true,
            oif: Some(oif),
            ..Packets::default()
        };
        self.rules.iter().find(|r| {
            matches!(r.hook, Hook::Forward | Hook::Postrouting)
                && match r.action {
                    Action::ClampMss(None) => true,
                    Action::ClampMss(Some(v)) => i64::from(v) <= mss_limit,
                    _ => false,
                }
                && r.covers(&p)
        })
    }

    /// Whether any MSS clamping rule exists, wherever it applies.
    pub fn any_clamp(&self) -> bool {
        self.rules
            .iter()
            .any(|r| matches!(r.action, Action::ClampMss(_)))
    }

    /// A masquerade or SNAT rule that translates packets from `src` leaving through `oif`.
    pub fn nat_for(&self, src: &Prefix, oif: &str) -> Option<&FirewallRule> {
        let p = Packets {
            v4: src.is_ipv4(),
            oif: Some(oif),
            src: Some(*src),
            ..Packets::default()
        };
        self.rules.iter().find(|r| {
            r.hook == Hook::Postrouting
                && matches!(r.action, Action::Masquerade | Action::Snat)
                && r.covers(&p)
        })
    }
}

/// An address family's prefix from an address and a mask's bytes (or a prefix length in
/// bits when the mask is all ones up to there).
pub(crate) fn prefix_from(addr: &[u8], mask_bits: u32) -> Option<Prefix> {
    let ip: IpAddr = match addr.len() {
        4 => IpAddr::V4(<[u8; 4]>::try_from(addr).ok()?.into()),
        16 => IpAddr::V6(<[u8; 16]>::try_from(addr).ok()?.into()),
        _ => return None,
    };
    Some(Prefix::new(ip, u8::try_from(mask_bits).ok()?))
}

#[cfg(test)]
mod tests;

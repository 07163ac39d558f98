//! Which rules packets reach: those of base chains, and of regular chains that a reachable
//! rule jumps to (or goes to), with the jumping rules' conditions added. A chain that no
//! reachable rule names never sees a packet, so its rules do not count.

use super::{Action, FirewallRule, Hook, Match, Source, TableFamily};

/// nftables allows 16 nested jumps; x_tables about as many in practice.
const MAX_DEPTH: usize = 16;

/// One rule as read from a table, before reachability.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Decoded {
    /// Its conditions.
    pub matches: Vec<Match>,
    /// What it does, if netdoctor cares.
    pub action: Option<Action>,
    /// The chain it jumps or goes to.
    pub jump: Option<String>,
}

/// One chain of a table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Chain {
    /// Its name.
    pub name: String,
    /// Its hook, for a base chain.
    pub hook: Option<Hook>,
    /// Its rules, in order.
    pub rules: Vec<Decoded>,
}

/// One table's chains.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Table<'a> {
    pub source: Source,
    pub family: TableFamily,
    pub name: &'a str,
    pub chains: &'a [Chain],
}

impl Table<'_> {
    /// Every reachable rule with an action netdoctor cares about.
    pub(crate) fn reachable(&self) -> Vec<FirewallRule> {
        let mut out = Vec::new();
        for chain in self.chains {
            if let Some(hook) = chain.hook {
                self.visit(chain, hook, &chain.name, &[], 0, &mut out);
            }
        }
        out
    }

    fn visit(
        &self,
        chain: &Chain,
        hook: Hook,
        path: &str,
        inherited: &[Match],
        depth: usize,
        out: &mut Vec<FirewallRule>,
    ) {
        for rule in &chain.rules {
            let mut matches = inherited.to_vec();
            matches.extend(rule.matches.iter().cloned());
            if let Some(action) = rule.action {
                out.push(FirewallRule {
                    source: self.source,
                    family: self.family,
                    table: self.name.to_owned(),
                    chain: path.to_owned(),
                    hook,
                    matches: matches.clone(),
                    action,
                });
            }
            let Some(target) = &rule.jump else { continue };
            if depth >= MAX_DEPTH {
                tracing::debug!(table = self.name, chain = %path, "jumps nested too deep");
                continue;
            }
            if let Some(next) = self.chains.iter().find(|c| &c.name == target) {
                let path = format!("{path} > {target}");
                self.visit(next, hook, &path, &matches, depth + 1, out);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::firewall::IfName;

    fn oif(name: &str) -> Match {
        Match::Oif {
            name: IfName {
                name: name.into(),
                prefix: false,
            },
            negated: false,
        }
    }

    #[test]
    fn only_base_chains_and_what_they_jump_to_count_with_the_jumps_conditions() {
        let chains = vec![
            Chain {
                name: "POSTROUTING".into(),
                hook: Some(Hook::Postrouting),
                rules: vec![Decoded {
                    matches: vec![oif("eth1")],
                    jump: Some("nat-out".into()),
                    ..Decoded::default()
                }],
            },
            Chain {
                name: "nat-out".into(),
                hook: None,
                rules: vec![Decoded {
                    action: Some(Action::Masquerade),
                    ..Decoded::default()
                }],
            },
            Chain {
                name: "unused".into(),
                hook: None,
                rules: vec![Decoded {
                    action: Some(Action::ClampMss(None)),
                    ..Decoded::default()
                }],
            },
        ];
        let table = Table {
            source: Source::Nftables,
            family: TableFamily::Ipv4,
            name: "nat",
            chains: &chains,
        };
        let rules = table.reachable();
        assert_eq!(rules.len(), 1, "{rules:?}");
        assert_eq!(rules[0].chain, "POSTROUTING > nat-out");
        assert_eq!(rules[0].hook, Hook::Postrouting);
        assert_eq!(rules[0].matches, vec![oif("eth1")]);
    }

    #[test]
    fn jump_loops_end() {
        let chains = vec![
            Chain {
                name: "base".into(),
                hook: Some(Hook::Forward),
                rules: vec![Decoded {
                    jump: Some("a".into()),
                    ..Decoded::default()
                }],
            },
            Chain {
                name: "a".into(),
                hook: None,
                rules: vec![
                    Decoded {
                        action: Some(Action::ClampMss(None)),
                        ..Decoded::default()
                    },
                    Decoded {
                        jump: Some("a".into()),
                        ..Decoded::default()
                    },
                ],
            },
        ];
        let table = Table {
            source: Source::Nftables,
            family: TableFamily::Inet,
            name: "t",
            chains: &chains,
        };
        assert_eq!(table.reachable().len(), MAX_DEPTH);
    }
}

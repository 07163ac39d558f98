//! Evaluating rules when some facts are missing (a BPF program this kernel cannot run, a
//! hook it lacks): every rule whose condition can be decided without them is evaluated; the
//! others are reported as not evaluated, naming what they lacked, never counted as passed.
//!
//! A missing fact is a dotted path as rules write it: a root (`traffic`, `drops`, `flows`),
//! a field of a root (`tunnel.underlay_fragments`), or a field of every item of a per-item
//! scope (`peer.initiations_sent`, `flow.retransmits`). Conditions are evaluated against the
//! facts without those paths, so a condition that needs one fails instead of reading a
//! placeholder, while one that is decided before reaching it (`!host.ip_forward && drops...`
//! with forwarding on) still counts. Evidence and texts of a finding read the whole facts
//! document (where a missing figure shows its "unknown" value, e.g. -1).

use serde::Serialize;

use super::budget::Budget;
use super::engine::{context, finding, holds, to_cel};
use super::rule::Rule;
use super::ruleset::RuleSet;
use crate::rules::finding::Finding;

/// A rule that could not be evaluated because facts it reads are missing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NotEvaluated {
    /// The rule's id.
    pub rule: String,
    /// The missing facts its condition reads, e.g. `drops.forwarding`.
    pub missing: Vec<String>,
}

/// Findings and the rules that could not be decided.
#[derive(Debug, Default)]
pub struct Evaluation {
    /// Findings, most severe first.
    pub findings: Vec<Finding>,
    /// Rules left undecided for lack of facts.
    pub not_evaluated: Vec<NotEvaluated>,
}

/// The list an item variable iterates over (`peer` → `peers`), for the per-item scopes.
fn list_of(var: &str) -> Option<&'static str> {
    match var {
        "peer" => Some("peers"),
        "flow" => Some("flows"),
        _ => None,
    }
}

/// `facts` without the `missing` paths.
fn without(facts: &serde_json::Value, missing: &[String]) -> serde_json::Value {
    let mut out = facts.clone();
    for path in missing {
        let (head, field) = match path.split_once('.') {
            Some((h, f)) => (h, Some(f)),
            None => (path.as_str(), None),
        };
        let Some(root) = out.as_object_mut() else {
            break;
        };
        match (list_of(head), field) {
            (Some(list), Some(field)) => {
                if let Some(items) = root.get_mut(list).and_then(|v| v.as_array_mut()) {
                    for item in items.iter_mut().filter_map(|i| i.as_object_mut()) {
                        item.remove(field);
                    }
                }
            }
            (_, Some(field)) => {
                if let Some(obj) = root.get_mut(head).and_then(|v| v.as_object_mut()) {
                    obj.remove(field);
                }
            }
            (_, None) => {
                root.remove(head);
            }
        }
    }
    out
}

/// True if `text` mentions `path` as a whole dotted name (`tunnel.kind` is not
/// `tunnel.kind_x`).
fn mentions(text: &str, path: &str) -> bool {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    text.match_indices(path).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + path.len()..].chars().next();
        !before.is_some_and(|c| ident(c) || c == '.') && !after.is_some_and(ident)
    })
}

/// The missing facts `rule`'s condition reads: a missing root it names, a missing field it
/// names, or the list of its per-item scope.
fn missing_read(rule: &Rule, missing: &[String]) -> Vec<String> {
    let list = rule.scope.item().map(|(_, list)| list);
    missing
        .iter()
        .filter(|m| Some(m.as_str()) == list || mentions(&rule.condition_source, m))
        .cloned()
        .collect()
}

/// Evaluates every rule against `facts`, with `missing` facts treated as unknown.
pub fn evaluate_partial(
    rules: &RuleSet,
    facts: &serde_json::Value,
    missing: &[String],
) -> Evaluation {
    let known = without(facts, missing);
    let (full_ctx, known_ctx) = match (context(facts), context(&known)) {
        (Ok(f), Ok(k)) => (f, k),
        (Err(e), _) | (_, Err(e)) => {
            tracing::warn!("facts cannot be given to the rules: {e}");
            return Evaluation::default();
        }
    };
    let mut out = Evaluation::default();
    for rule in rules.rules() {
        let lacking = missing_read(rule, missing);
        match decide(rule, &full_ctx, &known_ctx, facts, &known) {
            Ok(mut f) => {
                f.iter_mut().for_each(|f| explain_missing(rule, f, missing));
                out.findings.append(&mut f)
            }
            Err(_) if !lacking.is_empty() => out.not_evaluated.push(NotEvaluated {
                rule: rule.id.clone(),
                missing: lacking,
            }),
            Err(e) => {
                tracing::warn!(rule = %rule.id, origin = %rule.origin, "rule failed to evaluate: {e}")
            }
        }
    }
    out.findings
        .sort_by(|a, b| b.severity.cmp(&a.severity).then(a.id.cmp(&b.id)));
    out
}

/// Why a finding's evidence is unknown when its expression reads a missing fact.
pub const MISSING_REASON: &str = "not measured: its BPF program is unavailable here, see the notes";

/// Gives each unknown evidence value of `finding` that reads a `missing` fact (and has no
/// reason from its rule) [`MISSING_REASON`].
fn explain_missing(rule: &Rule, finding: &mut Finding, missing: &[String]) {
    for (name, value) in &finding.evidence {
        let Some(source) = rule.evidence_sources.get(name) else {
            continue;
        };
        if crate::rules::units::is_unknown_value(value)
            && !finding.unknown.contains_key(name)
            && missing.iter().any(|m| mentions(source, m))
        {
            finding
                .unknown
                .insert(name.clone(), MISSING_REASON.to_owned());
        }
    }
}

/// One rule's findings: conditions read `known`, findings `facts`. Fails when a condition
/// cannot be decided, when the per-item list itself is missing, or when the rule exceeds
/// its evaluation budget (which covers every item).
fn decide(
    rule: &Rule,
    full_ctx: &cel::Context<'_, '_>,
    known_ctx: &cel::Context<'_, '_>,
    facts: &serde_json::Value,
    known: &serde_json::Value,
) -> Result<Vec<Finding>, String> {
    let budget = Budget::new(&rule.id);
    let Some((var, list)) = rule.scope.item() else {
        return Ok(if holds(rule, known_ctx, &budget)? {
            vec![finding(rule, full_ctx, &budget)?]
        } else {
            Vec::new()
        });
    };
    let known_items = known
        .get(list)
        .and_then(|v| v.as_array())
        .ok_or_else(|| format!("{list} unknown"))?;
    let items = facts.get(list).and_then(|v| v.as_array());
    let mut out = Vec::new();
    for (i, k) in known_items.iter().enumerate() {
        let mut cond = known_ctx.new_inner_scope();
        cond.add_variable(var, to_cel(k)?)
            .map_err(|e| e.to_string())?;
        if !holds(rule, &cond, &budget)? {
            continue;
        }
        let item = items.and_then(|it| it.get(i)).unwrap_or(k);
        let mut full = full_ctx.new_inner_scope();
        full.add_variable(var, to_cel(item)?)
            .map_err(|e| e.to_string())?;
        out.push(finding(rule, &full, &budget)?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mentions_whole_names_only() {
        assert!(mentions("drops.forwarding > 0", "drops.forwarding"));
        assert!(mentions(
            "x && peer.initiations_sent > 0",
            "peer.initiations_sent"
        ));
        assert!(!mentions("drops.forwarding_x > 0", "drops.forwarding"));
        assert!(!mentions("mydrops.forwarding > 0", "drops.forwarding"));
        assert!(!mentions("a.drops.forwarding > 0", "drops.forwarding"));
    }

    #[test]
    fn without_removes_roots_fields_and_item_fields() {
        let facts = serde_json::json!({
            "traffic": {"a": 1},
            "tunnel": {"kind": "wireguard", "underlay_fragments": 3},
            "peers": [{"name": "p", "initiations_sent": 2}],
        });
        let known = without(
            &facts,
            &[
                "traffic".into(),
                "tunnel.underlay_fragments".into(),
                "peer.initiations_sent".into(),
            ],
        );
        assert_eq!(
            known,
            serde_json::json!({"tunnel": {"kind": "wireguard"}, "peers": [{"name": "p"}]})
        );
    }
}

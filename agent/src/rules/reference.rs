//! The reference evaluator the tests hold the production one ([`super::partial`]) to:
//! every rule against a facts document with every fact present.

use super::engine::{context, evaluate_rule};
use super::finding::Finding;
use super::ruleset::RuleSet;

/// Findings of every rule whose condition holds for `facts` (a JSON object whose keys
/// are the variables rules read), every fact present: the reference the tests hold
/// [`super::partial::evaluate_partial`] to. A rule that fails to evaluate is logged and skipped.
pub fn evaluate(rules: &RuleSet, facts: &serde_json::Value) -> Vec<Finding> {
    let ctx = match context(facts) {
        Ok(ctx) => ctx,
        Err(e) => {
            tracing::warn!("facts cannot be given to the rules: {e}");
            return Vec::new();
        }
    };
    let mut findings = Vec::new();
    for rule in rules.rules() {
        match evaluate_rule(rule, &ctx, facts) {
            Ok(mut f) => findings.append(&mut f),
            Err(e) => {
                tracing::warn!(rule = %rule.id, origin = %rule.origin, "rule failed to evaluate: {e}")
            }
        }
    }
    findings.sort_by(|a, b| b.severity.cmp(&a.severity).then(a.id.cmp(&b.id)));
    findings
}

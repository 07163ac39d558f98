//! Evaluating rules against a facts document.

use std::collections::BTreeMap;

use cel::{Context, Value};

use super::budget::Budget;
pub(super) use super::expr::{context, to_cel};
use super::rule::Rule;
use super::template::display;
use crate::rules::finding::{Finding, Severity};

/// Findings of one rule; `ctx` is [`context`] of `facts` (per-item scopes read their
/// items from `facts`). The rule's evaluation budget covers every item.
pub(super) fn evaluate_rule(
    rule: &Rule,
    ctx: &Context<'_, '_>,
    facts: &serde_json::Value,
) -> Result<Vec<Finding>, String> {
    let budget = Budget::new(&rule.id);
    let Some((var, list)) = rule.scope.item() else {
        return Ok(check(rule, ctx, &budget)?.into_iter().collect());
    };
    let items = facts
        .get(list)
        .and_then(|v| v.as_array())
        .cloned()
        .unwrap_or_default();
    let mut out = Vec::new();
    for item in &items {
        let mut inner = ctx.new_inner_scope();
        inner
            .add_variable(var, to_cel(item)?)
            .map_err(|e| e.to_string())?;
        out.extend(check(rule, &inner, &budget)?);
    }
    Ok(out)
}

fn check(rule: &Rule, ctx: &Context<'_, '_>, budget: &Budget) -> Result<Option<Finding>, String> {
    if !holds(rule, ctx, budget)? {
        return Ok(None);
    }
    finding(rule, ctx, budget).map(Some)
}

/// Whether the rule's condition holds in `ctx`.
pub(super) fn holds(rule: &Rule, ctx: &Context<'_, '_>, budget: &Budget) -> Result<bool, String> {
    match rule
        .condition
        .execute(ctx, budget)
        .map_err(|e| format!("condition: {e}"))?
    {
        Value::Bool(b) => Ok(b),
        other => Err(format!(
            "condition must be true or false, got {}",
            display(&other)
        )),
    }
}

/// The finding of a rule whose condition holds: evidence, templates and `critical_when`
/// read `ctx`.
pub(super) fn finding(
    rule: &Rule,
    ctx: &Context<'_, '_>,
    budget: &Budget,
) -> Result<Finding, String> {
    let mut evidence = BTreeMap::new();
    for (name, expression) in &rule.evidence {
        let value = expression
            .execute(ctx, budget)
            .map_err(|e| format!("evidence.{name}: {e}"))?;
        let json = value.json().map_err(|e| format!("evidence.{name}: {e}"))?;
        evidence.insert(name.clone(), json);
    }
    let critical = match &rule.critical_when {
        Some((_, e)) => match e
            .execute(ctx, budget)
            .map_err(|e| format!("critical_when: {e}"))?
        {
            Value::Bool(b) => b,
            other => {
                return Err(format!(
                    "critical_when must be true or false, got {}",
                    display(&other)
                ))
            }
        },
        None => false,
    };
    Ok(Finding {
        id: rule.id.clone(),
        severity: if critical {
            Severity::Critical
        } else {
            rule.severity
        },
        summary: rule.summary.render(ctx, budget)?,
        fix: rule.fix.render(ctx, budget)?,
        reference: rule.reference.clone(),
        subject: rule
            .subject
            .as_ref()
            .map(|s| s.render(ctx, budget))
            .transpose()?,
        unknown: evidence
            .iter()
            .filter(|(_, v)| crate::rules::units::is_unknown_value(v))
            .filter_map(|(name, _)| Some((name.clone(), rule.unknown.get(name)?.clone())))
            .collect(),
        evidence,
    })
}

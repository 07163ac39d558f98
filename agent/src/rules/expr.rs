//! One CEL expression of a rule (its condition, an evidence entry, a `{{ }}` placeholder):
//! compiled within the limits of [`super::limits`], and evaluated within a rule's
//! [`Budget`]. A panic inside the `cel` crate, parsing or evaluating, becomes an error of
//! the rule instead of ending the thread (and with the monitor's, the agent).

use std::panic::{self, AssertUnwindSafe};

use cel::parser::Parser;
use cel::{Context, IdedExpr, Value};

use super::budget::{self, Budget};
use super::instrument;
use super::limits;

/// A compiled expression.
#[derive(Debug)]
pub struct Expression {
    ast: IdedExpr,
    variables: Vec<String>,
}

/// Runs `f`, a call into the `cel` crate, turning a panic into an error.
pub fn guarded<T>(f: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
    panic::catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|panic| {
        let what = panic
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "no message".into());
        Err(format!(
            "the CEL library failed on this expression ({what}): simplify it, and report it"
        ))
    })
}

impl Expression {
    /// Parses and checks `source`: the errors say which limit it passes and what to do.
    pub fn compile(source: &str) -> Result<Self, String> {
        limits::check_source(source)?;
        let mut ast = guarded(|| Parser::new().parse(source).map_err(|e| e.to_string()))?;
        check_size(&ast)?;
        let least = instrument::least_operations(&ast);
        if least > budget::MAX_OPERATIONS {
            return Err(format!(
                "the expression takes at least {} operations to evaluate, more than the {} a \
                 rule may (its evaluation budget; see Limits in docs/rules.md): iterate over \
                 shorter lists, or nest fewer comprehensions",
                budget::thousands(least),
                budget::thousands(budget::MAX_OPERATIONS)
            ));
        }
        let mut variables: Vec<String> = ast
            .references()
            .variables()
            .into_iter()
            .map(str::to_owned)
            .collect();
        variables.sort();
        // Charging adds a call above some nodes: at most one per bracket or operator chain
        // on a path, so a tree within the limits stays within the stack (tested).
        instrument::instrument(&mut ast);
        Ok(Expression { ast, variables })
    }

    /// Every variable the expression reads, names bound by its comprehensions included.
    pub fn variables(&self) -> &[String] {
        &self.variables
    }

    /// Evaluates the expression against `ctx`, a context made by [`context`], spending
    /// `budget`.
    pub fn execute(&self, ctx: &Context<'_, '_>, budget: &Budget) -> Result<Value, String> {
        // `Value::resolve`, compiled in the `cel` crate: `resolve_val` is inlined into its
        // caller, and unoptimised (a debug build) takes 50 KiB of stack per level.
        let result =
            budget.run(|| guarded(|| Value::resolve(&self.ast, ctx).map_err(|e| e.to_string())));
        match budget.exceeded() {
            Some(exceeded) => Err(budget.message(exceeded)),
            None => result,
        }
    }
}

/// Refuses a syntax tree deeper or larger than [`limits`] allow.
fn check_size(ast: &IdedExpr) -> Result<(), String> {
    let size = instrument::measure(ast);
    if size.depth > limits::MAX_DEPTH {
        return Err(format!(
            "the expression's syntax tree is {} levels deep, more than the {} an expression may \
             have: split long chains of operators (a + b + c ...) or nested calls",
            size.depth,
            limits::MAX_DEPTH
        ));
    }
    if size.nodes > limits::MAX_NODES {
        return Err(format!(
            "the expression's syntax tree has {} nodes, more than the {} an expression may \
             have: split it into several rules or evidence entries",
            size.nodes,
            limits::MAX_NODES
        ));
    }
    Ok(())
}

/// A CEL context with every root of `facts` as a variable, and the function the budget is
/// charged through; built once per evaluation.
pub fn context(facts: &serde_json::Value) -> Result<Context<'static, 'static>, String> {
    let mut ctx = Context::default();
    budget::declare(&mut ctx)?;
    super::units::cel::declare(&mut ctx)?;
    if let Some(obj) = facts.as_object() {
        for (name, value) in obj {
            ctx.add_variable(name.clone(), to_cel(value)?)
                .map_err(|e| e.to_string())?;
        }
    }
    Ok(ctx)
}

/// Facts as CEL values. Integers become CEL `int` (not `uint`), so rule authors can write
/// `iface.mtu - 80` without type errors; the facts never exceed i64.
pub fn to_cel(value: &serde_json::Value) -> Result<Value, String> {
    use serde_json::Value as J;
    Ok(match value {
        J::Null => Value::Null,
        J::Bool(b) => Value::Bool(*b),
        J::Number(n) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => Value::Int(i),
            (None, Some(f)) => Value::Float(f),
            (None, None) => return Err(format!("number {n} does not fit a CEL value")),
        },
        J::String(s) => Value::String(s.clone().into()),
        J::Array(items) => Value::List(
            items
                .iter()
                .map(to_cel)
                .collect::<Result<Vec<_>, _>>()?
                .into(),
        ),
        J::Object(map) => {
            let entries = map
                .iter()
                .map(|(k, v)| to_cel(v).map(|v| (k.clone(), v)))
                .collect::<Result<std::collections::HashMap<String, Value>, String>>()?;
            Value::Map(entries.into())
        }
    })
}

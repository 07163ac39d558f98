//! Diagnostic rules as data.
//!
//! A rule is a TOML file (see `docs/rules.md` in the repository): an id, a severity, a
//! scope, a CEL condition over the facts, and summary/fix templates whose `{{ expr }}`
//! parts are CEL expressions too. Built-in rules are embedded in the binary; users add
//! their own directory. [`RuleSet::check`] validates rules without running a diagnosis.

mod engine;
mod files;
pub mod finding;
mod limits;
mod partial;
mod rule;
mod template;

#[cfg(test)]
pub use engine::evaluate;
pub use partial::{evaluate_partial, NotEvaluated};
pub use rule::{InvalidRules, RuleError, RuleSet};

#[cfg(test)]
mod tailscale_tests;
#[cfg(test)]
mod tests;

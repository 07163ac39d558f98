//! Diagnostic rules as data.
//!
//! A rule is a TOML file (see `docs/rules.md` in the repository): an id, a severity, a
//! scope, a CEL condition over the facts, and summary/fix templates whose `{{ expr }}`
//! parts are CEL expressions too. Built-in rules are embedded in the binary; users add
//! their own directory. [`RuleSet::check`] validates rules without running a diagnosis.

mod budget;
mod engine;
mod expr;
mod files;
pub mod finding;
mod instrument;
mod limits;
mod partial;
#[cfg(test)]
mod reference;
mod rule;
mod ruleset;
mod template;
pub mod units;

/// Stack size of every thread that parses or evaluates rules: the agent's monitor, the
/// thread a diagnosis the API runs on, and `rules check`. Set explicitly (it is also Rust's
/// default, which `RUST_MIN_STACK` would change). The limits of [`limits`] keep the largest
/// expression `rules check` accepts within a quarter of it (about 220 KiB to load and
/// evaluate, tested); the main thread of `netdoctor diagnose` has the usual 8 MiB.
pub const EVAL_STACK_SIZE: usize = 2 << 20;

#[cfg(test)]
pub use budget::MAX_TIME;
pub use partial::{evaluate_partial, NotEvaluated};
#[cfg(test)]
pub use reference::evaluate;
pub use rule::RuleError;
pub use ruleset::{InvalidRules, RuleSet};

#[cfg(test)]
mod tailscale_tests;
#[cfg(test)]
mod tests;

//! A set of rules with unique ids ([`RuleSet`]): the built-in ones, a user's directory,
//! and their validation against a sample facts document ([`RuleSet::check`]).

use std::path::{Path, PathBuf};

use super::engine;
use super::rule::{Rule, RuleError};

/// Built-in rules, embedded from the repository's `rules/` directory at build time.
const BUILTIN: &[(&str, &str)] = include!(concat!(env!("OUT_DIR"), "/builtin_rules.rs"));

/// Every error of a set of rules that cannot be used, shown one a line.
#[derive(Debug)]
pub struct InvalidRules(pub Vec<RuleError>);

impl std::fmt::Display for InvalidRules {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "invalid rules:")?;
        for e in &self.0 {
            write!(f, "\n  {e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for InvalidRules {}

/// A set of rules with unique ids.
#[derive(Debug, Default)]
pub struct RuleSet {
    rules: Vec<Rule>,
}

impl RuleSet {
    /// The built-in rules.
    pub fn builtin() -> Result<Self, Vec<RuleError>> {
        Self::from_sources(
            BUILTIN
                .iter()
                .map(|(name, text)| (format!("builtin:{name}"), (*text).to_owned())),
        )
    }

    /// The built-in rules plus every `*.toml` in `dir`; a user rule with a built-in's id
    /// replaces it.
    pub fn with_user_dir(dir: &Path) -> Result<Self, Vec<RuleError>> {
        let mut set = Self::builtin()?;
        let user = Self::load_dir(dir)?;
        for rule in user.rules {
            set.rules.retain(|r| r.id != rule.id);
            set.rules.push(rule);
        }
        Ok(set)
    }

    /// The built-in rules plus, when given, those of `dir`, with every error at once:
    /// what `diagnose` and the agent start from.
    pub fn load(dir: Option<&Path>) -> Result<Self, InvalidRules> {
        match dir {
            Some(dir) => Self::with_user_dir(dir),
            None => Self::builtin(),
        }
        .map_err(InvalidRules)
    }

    /// Every `*.toml` in `dir` (not recursive), all errors at once. Each must be a regular
    /// file of at most [`super::limits::MAX_RULE_FILE`] bytes, and no user but root (or
    /// this process's user) may write it or the directory ([`super::files`]).
    pub fn load_dir(dir: &Path) -> Result<Self, Vec<RuleError>> {
        super::files::check_dir(dir).map_err(|message| {
            vec![RuleError {
                origin: dir.display().to_string(),
                message,
            }]
        })?;
        let entries = std::fs::read_dir(dir).map_err(|e| {
            vec![RuleError {
                origin: dir.display().to_string(),
                message: format!("cannot read rules directory: {e}"),
            }]
        })?;
        let mut paths: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "toml"))
            .collect();
        paths.sort();
        let mut sources = Vec::new();
        let mut errors = Vec::new();
        for p in paths {
            match super::files::read(&p) {
                Ok(text) => sources.push((p.display().to_string(), text)),
                Err(message) => errors.push(RuleError {
                    origin: p.display().to_string(),
                    message,
                }),
            }
        }
        let set = Self::from_sources(sources);
        match (set, errors.is_empty()) {
            (Ok(set), true) => Ok(set),
            (Ok(_), false) => Err(errors),
            (Err(mut e), _) => {
                e.extend(errors);
                Err(e)
            }
        }
    }

    fn from_sources(
        sources: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Self, Vec<RuleError>> {
        let mut rules: Vec<Rule> = Vec::new();
        let mut errors = Vec::new();
        for (origin, text) in sources {
            match Rule::parse(&origin, &text) {
                Ok(rule) => {
                    if let Some(first) = rules.iter().find(|r| r.id == rule.id) {
                        errors.push(RuleError {
                            origin,
                            message: format!(
                                "duplicate id {:?} (also in {})",
                                rule.id, first.origin
                            ),
                        });
                    } else {
                        rules.push(rule);
                    }
                }
                Err(e) => errors.push(e),
            }
        }
        if errors.is_empty() {
            Ok(RuleSet { rules })
        } else {
            Err(errors)
        }
    }

    /// The rules, in load order.
    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// Checks that every rule reads only known facts and evaluates without error against
    /// `sample`, a facts document with every field present (names unknown to it are
    /// reported as unknown facts).
    pub fn check(&self, sample: &serde_json::Value) -> Vec<RuleError> {
        let roots: Vec<&str> = sample
            .as_object()
            .map(|o| o.keys().map(String::as_str).collect())
            .unwrap_or_default();
        let mut errors = Vec::new();
        let ctx = match engine::context(sample) {
            Ok(ctx) => ctx,
            Err(message) => {
                return vec![RuleError {
                    origin: "facts".into(),
                    message,
                }]
            }
        };
        for rule in &self.rules {
            let item = rule.scope.item().map(|(var, _)| var);
            for var in rule.variables() {
                if !roots.contains(&var.as_str()) && Some(var.as_str()) != item {
                    errors.push(RuleError {
                        origin: rule.origin.clone(),
                        message: format!(
                            "unknown fact {var:?} (known: {}{})",
                            roots.join(", "),
                            item.map(|i| format!(", {i}")).unwrap_or_default()
                        ),
                    });
                }
            }
            if let Err(message) = engine::evaluate_rule(rule, &ctx, sample).map(|_| ()) {
                errors.push(RuleError {
                    origin: rule.origin.clone(),
                    message,
                });
            }
        }
        errors
    }
}

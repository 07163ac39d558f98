//! Rule files: parsing, compiling and validating.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::expr::Expression;
use super::template::Template;
use crate::rules::finding::Severity;

/// What a rule is evaluated for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// Once per diagnosis, about the interface.
    Interface,
    /// Once per tunnel peer (`peer` is bound to each of `peers`).
    Tunnel,
    /// Once per connection or flow (`flow` is bound to each of `flows`).
    Flow,
    /// Once per diagnosis, about host-wide settings.
    Host,
}

impl Scope {
    /// The variable bound per item, and the facts list it comes from.
    pub fn item(self) -> Option<(&'static str, &'static str)> {
        match self {
            Scope::Tunnel => Some(("peer", "peers")),
            Scope::Flow => Some(("flow", "flows")),
            Scope::Interface | Scope::Host => None,
        }
    }
}

/// A rule file as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleFile {
    id: String,
    severity: Severity,
    scope: Scope,
    /// Why the rule exists, for `rules list` and readers.
    description: Option<String>,
    condition: String,
    summary: String,
    fix: String,
    /// CEL: when it holds, a finding of a `warning` or `info` rule is critical instead.
    critical_when: Option<String>,
    /// Name → CEL expression: the numbers shown as evidence.
    #[serde(default)]
    evidence: BTreeMap<String, String>,
    /// Names the item a per-item finding is about (template).
    subject: Option<String>,
    reference: Option<String>,
}

/// A compiled rule.
#[derive(Debug)]
pub struct Rule {
    /// Stable finding id.
    pub id: String,
    /// Severity of its findings.
    pub severity: Severity,
    /// What it is evaluated for.
    pub scope: Scope,
    /// Why it exists.
    pub description: String,
    /// The condition's source text.
    pub condition_source: String,
    pub(super) condition: Expression,
    pub(super) summary: Template,
    pub(super) fix: Template,
    pub(super) evidence: Vec<(String, Expression)>,
    /// When it holds for a finding, the finding is critical (`critical_when`).
    pub(super) critical_when: Option<(String, Expression)>,
    pub(super) subject: Option<Template>,
    /// Where to read more.
    pub reference: Option<String>,
    /// The file it came from (`builtin:NAME` for embedded rules).
    pub origin: String,
    /// Names bound by comprehension macros (not facts).
    bound: Vec<String>,
}

/// A rule that could not be loaded, with where and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{origin}: {message}")]
pub struct RuleError {
    /// The file.
    pub origin: String,
    /// What is wrong.
    pub message: String,
}

impl Rule {
    /// Parses and compiles one rule file's text.
    pub fn parse(origin: &str, text: &str) -> Result<Rule, RuleError> {
        let err = |message: String| RuleError {
            origin: origin.to_owned(),
            message,
        };
        let file: RuleFile = toml::from_str(text).map_err(|e| err(e.to_string()))?;
        if file.id.is_empty()
            || !file
                .id
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '.' || c == '_')
        {
            return Err(err(format!(
                "id {:?} must be non-empty lowercase letters, digits, '.' and '_'",
                file.id
            )));
        }
        let compile = |what: &str, src: &str| {
            Expression::compile(src).map_err(|e| err(format!("{what}: {e}")))
        };
        let condition = compile("condition", &file.condition)?;
        let evidence = file
            .evidence
            .iter()
            .map(|(name, src)| compile(&format!("evidence.{name}"), src).map(|p| (name.clone(), p)))
            .collect::<Result<Vec<_>, _>>()?;
        if file.critical_when.is_some() && file.severity == Severity::Critical {
            return Err(err(
                "critical_when raises a warning or info rule to critical: this rule is \
                 critical already"
                    .into(),
            ));
        }
        let critical_when = file
            .critical_when
            .as_deref()
            .map(|src| compile("critical_when", src).map(|e| (src.to_owned(), e)))
            .transpose()?;
        let template =
            |what: &str, src: &str| Template::compile(src).map_err(|e| err(format!("{what}: {e}")));
        let mut bound = macro_bound(&file.condition);
        for src in file
            .evidence
            .values()
            .chain([&file.summary, &file.fix])
            .chain(file.subject.iter())
            .chain(file.critical_when.iter())
        {
            bound.extend(macro_bound(src));
        }
        Ok(Rule {
            bound,
            summary: template("summary", &file.summary)?,
            fix: template("fix", &file.fix)?,
            subject: file
                .subject
                .as_deref()
                .map(|s| template("subject", s))
                .transpose()?,
            id: file.id,
            severity: file.severity,
            scope: file.scope,
            description: file.description.unwrap_or_default(),
            condition_source: file.condition,
            condition,
            evidence,
            critical_when,
            reference: file.reference,
            origin: origin.to_owned(),
        })
    }

    /// The `critical_when` expression as written, if the rule has one.
    pub fn critical_when_source(&self) -> Option<&str> {
        self.critical_when
            .as_ref()
            .map(|(source, _)| source.as_str())
    }

    /// Every fact the rule reads (condition, evidence, templates); names bound by CEL
    /// macros such as `flows.exists(f, ...)` are not facts and are left out.
    pub fn variables(&self) -> Vec<String> {
        let mut vars: Vec<String> = self.condition.variables().to_vec();
        for (_, e) in &self.evidence {
            vars.extend_from_slice(e.variables());
        }
        if let Some((_, e)) = &self.critical_when {
            vars.extend_from_slice(e.variables());
        }
        vars.extend(self.summary.variables());
        vars.extend(self.fix.variables());
        if let Some(s) = &self.subject {
            vars.extend(s.variables());
        }
        vars.sort();
        vars.dedup();
        vars.retain(|v| !self.bound.contains(v));
        vars
    }
}

/// Identifiers bound by CEL comprehension macros in `src`: `x` in `list.exists(x, ...)`,
/// `.all(x, ...)`, `.exists_one(x, ...)`, `.filter(x, ...)`, `.map(x, ...)`.
fn macro_bound(src: &str) -> Vec<String> {
    let mut out = Vec::new();
    for m in [".exists(", ".all(", ".exists_one(", ".filter(", ".map("] {
        for (pos, _) in src.match_indices(m) {
            let rest = &src[pos + m.len()..];
            if let Some((name, _)) = rest.split_once(',') {
                let name = name.trim();
                if !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                    out.push(name.to_owned());
                }
            }
        }
    }
    out
}

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
        let ctx = match super::engine::context(sample) {
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
            if let Err(message) = super::engine::evaluate_rule(rule, &ctx, sample).map(|_| ()) {
                errors.push(RuleError {
                    origin: rule.origin.clone(),
                    message,
                });
            }
        }
        errors
    }
}

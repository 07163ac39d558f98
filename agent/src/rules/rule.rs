//! Rule files: parsing, compiling and validating.

use std::collections::BTreeMap;

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
    /// Evidence name → why its value can be unknown (`-1`, `""`): printed `n/a (WHY)`.
    #[serde(default)]
    unknown: BTreeMap<String, String>,
}

impl RuleFile {
    /// Refuses an id that is empty or holds other than lowercase letters, digits, '.'
    /// and '_'.
    fn check_id(&self) -> Result<(), String> {
        if self.id.is_empty()
            || !self
                .id
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '.' || c == '_')
        {
            return Err(format!(
                "id {:?} must be non-empty lowercase letters, digits, '.' and '_'",
                self.id
            ));
        }
        Ok(())
    }

    /// Refuses an `[unknown]` entry that names no `[evidence]` entry.
    fn check_unknown(&self) -> Result<(), String> {
        if let Some(name) = self
            .unknown
            .keys()
            .find(|n| !self.evidence.contains_key(*n))
        {
            return Err(format!(
                "unknown.{name}: names no evidence (the [unknown] table says why an [evidence] \
                 value can be unknown)"
            ));
        }
        Ok(())
    }

    /// Refuses `critical_when` on a rule that is critical already.
    fn check_critical_when(&self) -> Result<(), String> {
        if self.critical_when.is_some() && self.severity == Severity::Critical {
            return Err(
                "critical_when raises a warning or info rule to critical: this rule is \
                 critical already"
                    .into(),
            );
        }
        Ok(())
    }

    /// Names bound by CEL comprehension macros anywhere in the rule: condition, evidence,
    /// templates and `critical_when`.
    fn bound_names(&self) -> Vec<String> {
        let mut bound = macro_bound(&self.condition);
        for src in self
            .evidence
            .values()
            .chain([&self.summary, &self.fix])
            .chain(self.subject.iter())
            .chain(self.critical_when.iter())
        {
            bound.extend(macro_bound(src));
        }
        bound
    }
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
    /// Evidence name → why its value can be unknown (the rule's `[unknown]` table).
    pub(super) unknown: BTreeMap<String, String>,
    /// Evidence name → its expression as written.
    pub(super) evidence_sources: BTreeMap<String, String>,
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
        file.check_id().map_err(err)?;
        let compile = |what: &str, src: &str| {
            Expression::compile(src).map_err(|e| err(format!("{what}: {e}")))
        };
        let condition = compile("condition", &file.condition)?;
        let evidence = file
            .evidence
            .iter()
            .map(|(name, src)| compile(&format!("evidence.{name}"), src).map(|p| (name.clone(), p)))
            .collect::<Result<Vec<_>, _>>()?;
        file.check_unknown().map_err(err)?;
        file.check_critical_when().map_err(err)?;
        let critical_when = file
            .critical_when
            .as_deref()
            .map(|src| compile("critical_when", src).map(|e| (src.to_owned(), e)))
            .transpose()?;
        let template =
            |what: &str, src: &str| Template::compile(src).map_err(|e| err(format!("{what}: {e}")));
        let bound = file.bound_names();
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
            evidence_sources: file.evidence,
            unknown: file.unknown,
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

//! `{{ expr }}` templates: each placeholder is a CEL expression evaluated against the same
//! facts as the rule's condition.

use cel::{Context, Value};

use super::budget::Budget;
use super::expr::Expression;

/// A compiled template.
#[derive(Debug)]
pub struct Template {
    parts: Vec<Part>,
}

#[derive(Debug)]
enum Part {
    Text(String),
    Expr {
        source: String,
        expression: Expression,
    },
}

impl Template {
    /// Compiles `text`; errors name the placeholder that does not parse.
    pub fn compile(text: &str) -> Result<Self, String> {
        let mut parts = Vec::new();
        let mut rest = text;
        while let Some(start) = rest.find("{{") {
            parts.push(Part::Text(rest[..start].to_owned()));
            let after = &rest[start + 2..];
            let end = after
                .find("}}")
                .ok_or_else(|| format!("unclosed '{{{{' in {text:?}"))?;
            let source = after[..end].trim().to_owned();
            let expression = Expression::compile(&source)
                .map_err(|e| format!("placeholder {{{{ {} }}}}: {e}", excerpt(&source)))?;
            parts.push(Part::Expr { source, expression });
            rest = &after[end + 2..];
        }
        parts.push(Part::Text(rest.to_owned()));
        Ok(Template { parts })
    }

    /// Variables the placeholders read.
    pub fn variables(&self) -> Vec<String> {
        self.parts
            .iter()
            .filter_map(|p| match p {
                Part::Expr { expression, .. } => Some(expression.variables().to_vec()),
                Part::Text(_) => None,
            })
            .flatten()
            .collect()
    }

    /// Renders against `ctx`, spending `budget`.
    pub fn render(&self, ctx: &Context<'_, '_>, budget: &Budget) -> Result<String, String> {
        let mut out = String::new();
        for part in &self.parts {
            match part {
                Part::Text(t) => out.push_str(t),
                Part::Expr { source, expression } => {
                    let value = expression
                        .execute(ctx, budget)
                        .map_err(|e| format!("{{{{ {} }}}}: {e}", excerpt(source)))?;
                    out.push_str(&display(&value));
                }
            }
        }
        Ok(out)
    }
}

/// The start of `source`, short enough for a message.
fn excerpt(source: &str) -> String {
    const SHOWN: usize = 80;
    match source.char_indices().nth(SHOWN) {
        Some((end, _)) => format!("{}…", &source[..end]),
        None => source.to_owned(),
    }
}

/// A CEL value as a person reads it.
pub fn display(value: &Value) -> String {
    match value {
        Value::String(s) => s.to_string(),
        Value::Int(i) => i.to_string(),
        Value::UInt(u) => u.to_string(),
        Value::Float(f) if f.fract() == 0.0 && f.abs() < 1e15 => format!("{f:.0}"),
        Value::Float(f) if f.abs() < 1.0 => format!("{f:.3}"),
        Value::Float(f) => format!("{f:.1}"),
        Value::Bool(b) => b.to_string(),
        Value::Null => "none".into(),
        Value::List(items) => items.iter().map(display).collect::<Vec<_>>().join(", "),
        other => format!("{other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_expressions_and_text() {
        let t = Template::compile("MTU {{ iface.mtu }} + {{iface.mtu - 1380}} bytes")
            .expect("compiles");
        let facts = serde_json::json!({"iface": {"mtu": 1420}});
        let ctx = super::super::expr::context(&facts).expect("context");
        let budget = Budget::new("test.template");
        assert_eq!(
            t.render(&ctx, &budget).expect("renders"),
            "MTU 1420 + 40 bytes"
        );
        assert_eq!(
            t.variables(),
            vec!["iface".to_string(), "iface".to_string()]
        );
    }

    #[test]
    fn reports_broken_placeholders() {
        assert!(Template::compile("{{ unclosed").is_err());
        assert!(Template::compile("{{ 1 + }}").is_err());
    }
}

//! Every fact rules can read is documented in docs/rules.md: each field of each section of
//! the facts document (`peers` and `flows` items as `peer.` and `flow.`) is named there, as
//! `section.field`, or as `.field` in a bullet that names the section (`tunnel.local`,
//! `.options`).

use crate::facts::Facts;

const DOC: &str = include_str!("../../../../docs/rules.md");

/// The doc's bullets, each joined onto one line.
fn bullets() -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in DOC.lines() {
        if let Some(rest) = line.strip_prefix("- ") {
            out.push(rest.to_owned());
        } else if let (Some(last), true) = (out.last_mut(), line.starts_with("  ")) {
            last.push(' ');
            last.push_str(line.trim());
        }
    }
    out
}

/// `section.field` for every field of the sample document.
fn facts() -> Vec<(String, String)> {
    let json = Facts::sample().to_json();
    let mut out = Vec::new();
    for (section, value) in json.as_object().into_iter().flatten() {
        let (name, fields) = match value {
            serde_json::Value::Array(items) => (
                section.trim_end_matches('s').to_owned(),
                items.first().and_then(|i| i.as_object()),
            ),
            v => (section.clone(), v.as_object()),
        };
        for field in fields.into_iter().flat_map(|f| f.keys()) {
            out.push((name.clone(), field.clone()));
        }
    }
    out
}

#[test]
fn every_fact_is_documented_in_docs_rules_md() {
    let bullets = bullets();
    let undocumented: Vec<String> = facts()
        .into_iter()
        .filter(|(section, field)| {
            let full = format!("`{section}.{field}`");
            let short = format!("`.{field}`");
            let named = format!("`{section}.");
            !bullets
                .iter()
                .any(|b| b.contains(&full) || (b.contains(&named) && b.contains(&short)))
        })
        .map(|(section, field)| format!("{section}.{field}"))
        .collect();
    assert!(
        undocumented.is_empty(),
        "facts missing from docs/rules.md: {undocumented:?}"
    );
    assert!(facts().len() > 100, "{:?}", facts());
}

//! Numbers in rule texts print in their units (issue 35): the template functions
//! (`fmt_bytes(x)` ...), and every built-in rule's summary, subject and fix rendered with
//! sample values, large and unknown.

use serde_json::{json, Value};

use crate::facts::Facts;
use crate::rules::budget::Budget;
use crate::rules::engine::context;
use crate::rules::template::Template;
use crate::rules::units::unit_of;
use crate::rules::units::Unit;
use crate::rules::RuleSet;

/// `text` rendered against `facts`.
fn render(text: &str, facts: &Value) -> Result<String, String> {
    let ctx = context(facts)?;
    Template::compile(text)?.render(&ctx, &Budget::new("test.units"))
}

#[test]
fn template_functions_print_numbers_in_their_units() {
    let facts = json!({"p": {"derp": 21_450_376, "udp": 15_848_054, "unknown": -1,
        "ratio": 0.0421337, "rtt": 48.123, "rate": 81_234_567.0, "count": 138_866,
        "mbps": 512.25, "age": 200, "pct": 97.04, "mtu": 1420}});
    let cases = [
        (
            "{{ fmt_bytes(p.derp) }} and {{ fmt_bytes(p.udp) }}",
            "20.5 MiB and 15.1 MiB",
        ),
        ("{{ fmt_bytes(p.derp + p.udp) }}", "35.6 MiB"),
        ("{{ fmt_ratio(p.ratio) }}", "4.2 %"),
        ("{{ fmt_percent(p.pct) }}", "97.0 %"),
        ("{{ fmt_ms(p.rtt) }}", "48.1 ms"),
        ("{{ fmt_s(p.age) }}", "3 min 20 s"),
        ("{{ fmt_bps(p.rate) }}", "81.2 Mbit/s"),
        ("{{ fmt_mbps(p.mbps) }}", "512 Mbit/s"),
        ("{{ fmt_count(p.count) }}", "138,866"),
        ("{{ fmt_per_s(p.count) }}", "138,866/s"),
        ("{{ fmt_kib(64) }}", "64.0 KiB"),
        ("{{ fmt_plain(p.mtu) }}", "1420"),
        ("{{ fmt_bytes(p.unknown) }}", "n/a"),
        ("{{ fmt_bytes(-1.0) }}", "n/a"),
        ("{{ fmt_plain(p.unknown) }}", "n/a"),
        ("{{ fmt_bytes(null) }}", "n/a"),
        (
            "{{ fmt_bytes(p.unknown, 'no DERP server address known') }}",
            "n/a (no DERP server address known)",
        ),
        ("{{ fmt_count(p.count, 'unused') }}", "138,866"),
        (
            "{{ 'sent ' + fmt_bytes(p.udp) + ' over UDP' }}",
            "sent 15.1 MiB over UDP",
        ),
    ];
    for (template, want) in cases {
        assert_eq!(render(template, &facts).as_deref(), Ok(want), "{template}");
    }
    for bad in [
        "{{ fmt_bytes('x') }}",
        "{{ fmt_bytes(1, 2) }}",
        "{{ fmt_bytes() }}",
        "{{ fmt_bytes(1, 'a', 'b') }}",
    ] {
        let err = render(bad, &facts).expect_err(bad);
        assert!(err.contains("fmt_bytes"), "{bad}: {err}");
    }
}

/// Fields whose value people read as a plain number (an MTU, an MSS, a port, a process
/// id, a sysctl setting, a CPU or thread count): the sample gives them a realistic value.
const SETTINGS: &[&str] = &[
    "port",
    "hash_policy",
    "cpus_online",
    "syn_mss_max",
    "tcp_reordering_max",
    "daemon_busy_threads",
    "daemon_threads",
    "daemon_uid",
    "daemon_pid",
    "max_segment",
    "tcp_rmem_min",
    "tcp_rmem_default",
    "tcp_wmem_min",
    "tcp_wmem_default",
];

/// `facts` with every number replaced by `number(field name)`, lists and objects walked;
/// a float stays a float (as the facts' f64 fields serialize).
fn every_number(v: &mut Value, field: &str, number: &dyn Fn(&str) -> Value) {
    match v {
        Value::Number(n) => {
            let float = n.is_f64();
            let new = number(field);
            *v = match new.as_f64() {
                Some(x) if float => json!(x),
                _ => new,
            };
        }
        Value::Array(items) => items
            .iter_mut()
            .for_each(|i| every_number(i, field, number)),
        Value::Object(map) => map.iter_mut().for_each(|(k, i)| every_number(i, k, number)),
        _ => {}
    }
}

/// Large sample values: 21,450,376 for any amount, a realistic one for settings.
fn large(field: &str) -> Value {
    if field.ends_with("mtu") || field.ends_with("mss") || field.ends_with("mss_limit") {
        return json!(1420);
    }
    if SETTINGS.contains(&field) || unit_of(field) == Some(Unit::Plain) {
        return json!(7);
    }
    match unit_of(field) {
        Some(Unit::Ratio) => return json!(0.0421337),
        Some(Unit::Percent) => return json!(42.17),
        _ => {}
    }
    json!(21_450_376)
}

/// Digit runs of 5 or more with no separator: an unformatted integer above 9,999.
fn long_digit_runs(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_ascii_digit())
        .filter(|run| run.len() >= 5)
        .map(str::to_owned)
        .collect()
}

/// The summary, subject and fix of every built-in rule rendered against `facts` (whatever
/// the condition says), each with the rule's id and which text it is.
fn rendered(facts: &Value) -> Vec<(String, &'static str, String)> {
    let rules = RuleSet::builtin().expect("built-in rules load");
    let ctx = context(facts).expect("context");
    let mut out = Vec::new();
    for rule in rules.rules() {
        let budget = Budget::new(&rule.id);
        let mut inner = ctx.new_inner_scope();
        if let Some((var, list)) = rule.scope.item() {
            let item = &facts[list][0];
            let value = crate::rules::engine::to_cel(item).expect("an item");
            inner.add_variable(var, value).expect("the item variable");
        }
        let mut texts = vec![("summary", &rule.summary), ("fix", &rule.fix)];
        if let Some(subject) = &rule.subject {
            texts.push(("subject", subject));
        }
        for (what, template) in texts {
            let text = template
                .render(&inner, &budget)
                .unwrap_or_else(|e| format!("RENDER ERROR {e}"));
            out.push((rule.id.clone(), what, text));
        }
    }
    out
}

/// Every rule's message (summary and subject) prints large numbers in units: no
/// unformatted integer above 9,999, no raw float ratio. Fixes are commands, whose numbers
/// (sysctl values, --max-flows) must stay as the command takes them.
#[test]
fn every_rule_message_prints_large_numbers_in_units() {
    let mut facts = Facts::sample().to_json();
    every_number(&mut facts, "", &large);
    let mut bad = Vec::new();
    for (id, what, text) in rendered(&facts) {
        let runs = long_digit_runs(&text);
        let message = what != "fix";
        let wrong = !runs.is_empty() || text.contains("0.042") || text.contains("RENDER ERROR");
        if message && wrong {
            bad.push(format!("{id} {what}: {runs:?} in {text}"));
        }
    }
    assert!(
        bad.is_empty(),
        "raw numbers in messages:\n{}",
        bad.join("\n")
    );
}

/// Every rule's message (summary and subject) prints an unknown value (-1) as n/a, never
/// as -1. (A fix is a command, given only when the values it needs are known.)
#[test]
fn every_rule_message_prints_unknown_values_as_na() {
    let mut facts = Facts::sample().to_json();
    every_number(&mut facts, "", &|_| json!(-1));
    let mut bad = Vec::new();
    for (id, what, text) in rendered(&facts) {
        if what != "fix" && (text.contains("-1") || text.contains("RENDER ERROR")) {
            bad.push(format!("{id} {what}: {text}"));
        }
    }
    assert!(bad.is_empty(), "-1 in rule texts:\n{}", bad.join("\n"));
}

/// A rule's `[unknown]` table says why an evidence value is unknown; the text report
/// prints it after n/a, and a value that is known prints in its unit.
#[test]
fn unknown_evidence_prints_na_with_the_rules_reason() {
    use crate::rules::units::evidence_line_with;
    let rules = RuleSet::builtin().expect("built-in rules load");
    let mut facts = super::healthy();
    facts.iface.mtu = 1480;
    facts.tunnel.overhead_measured = -1;
    facts.tunnel.path_mtu = -1;
    let found = crate::rules::evaluate(&rules, &facts.to_json());
    let f = found
        .iter()
        .find(|f| f.id == "mtu.tunnel_exceeds_underlay")
        .expect("the MTU finding");
    let line = evidence_line_with(&f.evidence, &f.unknown);
    assert!(
        line.contains("overhead_measured=n/a (no unfragmented full-size traffic seen)")
            && line.contains("underlay_path_mtu=n/a (not probed)")
            && line.contains("tunnel_mtu=1480"),
        "{line}"
    );
    // The healthy twin: known values have no reason.
    facts.tunnel.overhead_measured = 60;
    facts.tunnel.path_mtu = 1500;
    let found = crate::rules::evaluate(&rules, &facts.to_json());
    let f = found
        .iter()
        .find(|f| f.id == "mtu.tunnel_exceeds_underlay")
        .expect("the MTU finding");
    assert!(f.unknown.is_empty(), "{:?}", f.unknown);
    assert!(!evidence_line_with(&f.evidence, &f.unknown).contains("n/a"));
}

/// An unknown evidence value that reads a fact missing for lack of a BPF program says so.
#[test]
fn evidence_of_a_missing_fact_says_it_was_not_measured() {
    use crate::rules::partial::MISSING_REASON;
    let rules = RuleSet::builtin().expect("built-in rules load");
    let mut facts = super::healthy();
    facts.iface.mtu = 1480;
    facts.tunnel.underlay_fragments = -1;
    let missing = vec!["tunnel.underlay_fragments".to_owned()];
    let eval = crate::rules::evaluate_partial(&rules, &facts.to_json(), &missing);
    let f = eval
        .findings
        .iter()
        .find(|f| f.id == "mtu.tunnel_exceeds_underlay")
        .expect("the MTU finding");
    assert!(
        f.unknown.values().all(|r| r != MISSING_REASON),
        "{:?}",
        f.unknown
    );
    let rule = "id = \"site.frags\"\nseverity = \"warning\"\nscope = \"interface\"\n\
                condition = \"iface.mtu > 1400\"\nsummary = \"s\"\nfix = \"f\"\n\
                [evidence]\nunderlay_fragments = \"tunnel.underlay_fragments\"\n";
    let set = super::load(&[("frags.toml", rule.to_owned())]).expect("loads");
    let eval = crate::rules::evaluate_partial(&set, &facts.to_json(), &missing);
    assert_eq!(eval.findings.len(), 1, "{:?}", eval.not_evaluated);
    assert_eq!(
        eval.findings[0]
            .unknown
            .get("underlay_fragments")
            .map(String::as_str),
        Some(MISSING_REASON)
    );
    // Not missing: no reason.
    let eval = crate::rules::evaluate_partial(&set, &facts.to_json(), &[]);
    assert!(eval.findings[0].unknown.is_empty());
}

#[test]
fn an_unknown_table_must_name_evidence() {
    let rule = "id = \"site.x\"\nseverity = \"warning\"\nscope = \"interface\"\n\
                condition = \"true\"\nsummary = \"s\"\nfix = \"f\"\n\
                [evidence]\nmtu = \"iface.mtu\"\n[unknown]\nmtuu = \"typo\"\n";
    let errors = super::load(&[("x.toml", rule.to_owned())]).expect_err("refused");
    assert!(
        errors[0]
            .message
            .contains("unknown.mtuu: names no evidence"),
        "{errors:?}"
    );
}

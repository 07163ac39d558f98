//! `critical_when`: a warning rule whose finding is critical when an expression holds.

use super::{healthy, load, rule_file};
use crate::facts::Facts;
use crate::rules::evaluate;
use crate::rules::finding::Severity;

#[test]
fn critical_when_raises_a_warning_only_when_it_holds() {
    let text = rule_file("site.big", "interface", "iface.mtu > 1400")
        + "critical_when = \"iface.mtu > 1450\"\n";
    let rules = load(&[("big.toml", text)]).expect("loads");
    let severity = |mtu: i64| {
        let mut f = healthy();
        f.iface.mtu = mtu;
        evaluate(&rules, &f.to_json())
            .into_iter()
            .find(|x| x.id == "site.big")
            .map(|x| x.severity)
    };
    assert_eq!(severity(1440), Some(Severity::Warning));
    assert_eq!(severity(1480), Some(Severity::Critical));
    assert_eq!(severity(1300), None);
    let listed = rules.rules().iter().find(|r| r.id == "site.big");
    assert_eq!(
        listed.and_then(|r| r.critical_when_source()),
        Some("iface.mtu > 1450")
    );

    // Critical already: refused, with the reason.
    let critical = rule_file("site.c", "interface", "true").replace("\"warning\"", "\"critical\"")
        + "critical_when = \"true\"\n";
    let errors = load(&[("c.toml", critical)]).expect_err("refused");
    assert!(errors[0].message.contains("critical already"), "{errors:?}");
    // Not a boolean: the rule fails to evaluate (and `rules check` says so).
    let number = rule_file("site.n", "interface", "true") + "critical_when = \"iface.mtu\"\n";
    let rules = load(&[("n.toml", number)]).expect("loads");
    let errors = rules.check(&Facts::sample().to_json());
    assert!(
        errors
            .iter()
            .any(|e| e.message.contains("critical_when must be true or false")),
        "{errors:?}"
    );
    // It reads facts like any expression: unknown ones are named.
    let unknown = rule_file("site.u", "interface", "true") + "critical_when = \"nope.x > 1\"\n";
    let rules = load(&[("u.toml", unknown)]).expect("loads");
    let errors = rules.check(&Facts::sample().to_json());
    assert!(
        errors
            .iter()
            .any(|e| e.message.contains("unknown fact \"nope\"")),
        "{errors:?}"
    );
}

//! Compiled expressions charge their evaluation budget without changing what they
//! evaluate to, and their least cost is known before any fact is read.

use cel::{Context, Program};

use crate::rules::budget::Budget;
use crate::rules::expr::{context, to_cel, Expression};
use crate::rules::instrument::least_operations;

fn least(src: &str) -> u64 {
    least_operations(&cel::parser::Parser::new().parse(src).expect("parses"))
}

#[test]
fn least_operations_count_steps_over_written_lists_on_every_path() {
    let two = least("[1, 2].map(a, a)");
    assert!(two > 0);
    assert_eq!(least("[1, 2, 3, 4].map(a, a)"), 2 * two);
    assert!(least("[1, 2].map(a, [1, 2, 3].map(b, b))") >= 6);
    assert_eq!(
        least("[1, 2].map(a, a).map(b, b)"),
        2 * least("[1, 2].map(b, b)"),
        "a map of a written list has its length"
    );
    // Facts have no known length; `exists` may stop at once; `&&`, `||` and `?:` may
    // skip an operand.
    assert_eq!(least("flows.map(a, a)"), 0);
    assert_eq!(
        least("[1, 2, 3].exists(a, true)"),
        least("[1].exists(a, true)")
    );
    assert_eq!(least("x && [1, 2].map(a, a) == []"), 0);
    assert_eq!(least("[1, 2].map(a, a) == [] || x"), two);
    assert_eq!(least("x ? [1, 2].map(a, a) : []"), 0);
}

/// Charging changes no result: each expression evaluates as the `cel` crate's own
/// program does, errors included.
#[test]
fn charged_expressions_evaluate_as_written() {
    let facts = serde_json::json!({"xs": [1, 2, 3], "m": {"a": 1, "b": 2}, "s": "abc"});
    let ctx = context(&facts).expect("context");
    let mut plain = Context::default();
    for (k, v) in facts.as_object().expect("object") {
        plain
            .add_variable(k.clone(), to_cel(v).expect("value"))
            .expect("variable");
    }
    for src in [
        "xs.map(x, x * 2)",
        "xs.filter(x, x > 1)",
        "xs.map(x, x > 1, x * 10)",
        "xs.exists(x, x == 2)",
        "xs.all(x, x > 0)",
        "xs.exists_one(x, x > 2)",
        "[1, 0].all(x, 1 / x > 0)",
        "[0, 1].exists(x, 1 / x > 0)",
        "[1, 0].map(x, 1 / x)",
        "m.all(k, m[k] > 0)",
        "[xs, [s + s, s]] + [m]",
        "{'k': xs.map(x, [x, x])}",
        "xs.map(a, xs.filter(b, b < a)).filter(l, l.size() > 0)",
        "s + '-' + string(xs.size())",
        "xs + xs + [4]",
    ] {
        let expected = Program::compile(src)
            .expect("compiles")
            .execute(&plain)
            .map_err(|e| e.to_string());
        let budget = Budget::new("test.same");
        let got = Expression::compile(src)
            .expect("compiles")
            .execute(&ctx, &budget);
        assert_eq!(got, expected, "{src}");
    }
}

//! Rules at and past the limits of `rules::limits`: whatever loads runs on a thread with the
//! evaluation threads' stack; the rest is refused with an error that names the limit.

use super::{load, rule_file};
use crate::facts::Facts;
use crate::rules::expr::Expression;
use crate::rules::limits::{MAX_DEPTH, MAX_NESTING, MAX_NODES};
use crate::rules::rule::Rule;
use crate::rules::{evaluate, EVAL_STACK_SIZE};

/// The one error of loading a rule whose condition is `condition`.
fn refusal(condition: &str) -> String {
    match load(&[("x.toml", rule_file("site.x", "interface", condition))]) {
        Ok(_) => panic!("accepted: {:.200}", condition),
        Err(errors) => {
            assert_eq!(errors.len(), 1, "{errors:?}");
            errors[0].to_string()
        }
    }
}

#[test]
fn expressions_too_large_for_the_stack_are_refused() {
    let terms = |n: usize| format!("{}1 > 0", "1 + ".repeat(n));
    for n in [2_000, 5_000] {
        let e = refusal(&terms(n));
        assert!(e.contains("bytes long, more than the 4096"), "{e}");
    }
    // Too large for a rule file; and as an expression, refused before the parser sees it.
    let parens = format!("{}1{} > 0", "(".repeat(100_000), ")".repeat(100_000));
    assert!(refusal(&parens).contains("KiB, more than the 64 KiB a rule file may have"));
    let e = Rule::parse("x.toml", &rule_file("site.x", "interface", &parens)).expect_err("refused");
    assert!(e.message.contains("bytes long"), "{e}");
    let nested = format!(
        "{}1{} > 0",
        "(".repeat(MAX_NESTING + 1),
        ")".repeat(MAX_NESTING + 1)
    );
    let e = refusal(&nested);
    assert!(
        e.contains("nests brackets 25 deep, more than the 24"),
        "{e}"
    );
    let e = refusal(&format!("{}1 > 0", "1+".repeat(300)));
    assert!(e.contains("301 operators, more than the 256"), "{e}");
    let e = refusal(&terms(200));
    assert!(e.contains("levels deep, more than the 128"), "{e}");
    let list = format!("[{}1].size() > 0", "1,".repeat(MAX_NODES));
    let e = refusal(&list);
    assert!(e.contains("nodes, more than the 1024"), "{e}");
    assert!(e.contains("x.toml: condition: "), "{e}");
}

/// An expression of a given shape, `n` making it deeper or longer.
type Shape = Box<dyn Fn(usize) -> String>;

/// Each family of shapes an expression can take.
fn shapes() -> Vec<(&'static str, Shape)> {
    let sum = |n: usize| format!("{}1", "1 + ".repeat(n));
    let nest = |open: &str, close: &str, n: usize, inner: &str| {
        format!("{}{inner}{}", open.repeat(n), close.repeat(n))
    };
    vec![
        ("a + b + ...", Box::new(move |n| format!("{} > 0", sum(n)))),
        (
            "nested parentheses around a sum",
            Box::new(move |n| {
                let inner = sum(n);
                format!("{} > 0", nest("(", ")", MAX_NESTING, &inner))
            }),
        ),
        (
            "nested lists around a sum",
            Box::new(move |n| {
                let inner = sum(n);
                format!("size({}) > 0", nest("[", "]", MAX_NESTING - 1, &inner))
            }),
        ),
        (
            "nested calls",
            Box::new(move |n| format!("{} > 0", nest("int(", ")", n, "1"))),
        ),
        (
            "nested exists",
            Box::new(move |n| {
                let mut s = sum(MAX_DEPTH / 4) + " > 0";
                for i in 0..n {
                    s = format!("[{i}].exists(a{i}, {s})");
                }
                s
            }),
        ),
        (
            "nested map",
            Box::new(move |n| {
                let mut s = "1".to_owned();
                for i in 0..n {
                    s = format!("[{i}].map(a{i}, {s})");
                }
                format!("size({s}) > 0")
            }),
        ),
        (
            "a ? b : c ? ...",
            Box::new(move |n| format!("{}true", "false ? false : ".repeat(n))),
        ),
        (
            "x == y == ...",
            Box::new(move |n| format!("{}true", "true == ".repeat(n))),
        ),
        (
            "a && b && ...",
            Box::new(move |n| format!("{}true", "true && ".repeat(n))),
        ),
        (
            "nested maps of sums",
            Box::new(move |n| {
                let inner = sum(n);
                format!("size({}) > 0", nest("{1: ", "}", MAX_NESTING - 1, &inner))
            }),
        ),
    ]
}

/// The largest `n` whose shape compiles, and the first that does not.
fn largest(shape: &dyn Fn(usize) -> String) -> usize {
    let mut n = 0;
    while Expression::compile(&shape(n + 1)).is_ok() {
        n += 1;
        assert!(n < 10_000, "no limit stops {:.100}", shape(n));
    }
    n
}

/// Loads and checks the largest rule of every shape, and evaluates it, on a thread with
/// `stack` bytes of stack.
fn largest_rules_run_with(stack: usize) {
    let files: Vec<(String, String)> = shapes()
        .iter()
        .enumerate()
        .map(|(i, (_, shape))| {
            let n = largest(shape.as_ref());
            (
                format!("r{i}.toml"),
                rule_file(&format!("site.r{i}"), "interface", &shape(n)),
            )
        })
        .collect();
    let names: Vec<&str> = shapes().iter().map(|(name, _)| *name).collect();
    std::thread::Builder::new()
        .stack_size(stack)
        .spawn(move || {
            let files: Vec<(&str, String)> =
                files.iter().map(|(n, t)| (n.as_str(), t.clone())).collect();
            let set = load(&files).expect("the largest rules load");
            let sample = Facts::sample().to_json();
            let errors = set.check(&sample);
            assert!(errors.is_empty(), "{errors:?}");
            let found = evaluate(&set, &sample);
            assert_eq!(found.len(), names.len(), "every rule fires: {found:?}");
        })
        .expect("thread")
        .join()
        .expect("the largest rules run");
}

#[test]
fn largest_accepted_rules_run_on_the_evaluation_stack() {
    largest_rules_run_with(EVAL_STACK_SIZE);
}

/// A quarter of the stack is enough: the limits leave a wide margin.
#[test]
fn largest_accepted_rules_run_on_a_quarter_of_the_evaluation_stack() {
    largest_rules_run_with(EVAL_STACK_SIZE / 4);
}

#[test]
fn a_panic_in_the_cel_library_is_an_error() {
    // The parser's error message for a column past 65535 panics formatting its caret.
    let source = "(".repeat(100_000);
    let e = crate::rules::expr::guarded(|| {
        cel::parser::Parser::new()
            .parse(&source)
            .map(|_| ())
            .map_err(|e| e.to_string())
    })
    .expect_err("refused");
    assert!(e.contains("the CEL library failed"), "{e}");
}

//! A parsed expression's syntax tree: measured ([`measure`]), charged for what evaluating it
//! costs ([`instrument`], see [`super::budget`]), and its least cost known before any fact
//! is read ([`least_operations`]).

use cel::common::ast::{operators, CallExpr, ComprehensionExpr, EntryExpr, Expr, ListExpr};
use cel::common::ast::{IdedExpr, LiteralValue};

use super::budget::CHARGE;

/// How big a syntax tree is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Size {
    /// Levels from the root to the deepest leaf (a leaf alone is 1).
    pub depth: usize,
    /// Nodes.
    pub nodes: usize,
}

/// The children of `e`, in no particular order.
fn children(e: &IdedExpr) -> Vec<&IdedExpr> {
    match &e.expr {
        Expr::Call(c) => c.target.iter().map(|t| &**t).chain(&c.args).collect(),
        Expr::Comprehension(c) => vec![
            &c.iter_range,
            &c.accu_init,
            &c.loop_cond,
            &c.loop_step,
            &c.result,
        ],
        Expr::List(l) => l.elements.iter().collect(),
        Expr::Map(m) => entries(&m.entries),
        Expr::Struct(s) => entries(&s.entries),
        Expr::Select(s) => vec![&s.operand],
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => Vec::new(),
    }
}

fn entries(entries: &[cel::common::ast::IdedEntryExpr]) -> Vec<&IdedExpr> {
    entries
        .iter()
        .flat_map(|e| match &e.expr {
            EntryExpr::MapEntry(m) => vec![&m.key, &m.value],
            EntryExpr::StructField(f) => vec![&f.value],
        })
        .collect()
}

/// Depth and nodes of `e`, without recursion (any depth is measured safely).
pub fn measure(e: &IdedExpr) -> Size {
    let mut size = Size::default();
    let mut stack = vec![(e, 1usize)];
    while let Some((e, depth)) = stack.pop() {
        size.nodes += 1;
        size.depth = size.depth.max(depth);
        stack.extend(children(e).into_iter().map(|c| (c, depth + 1)));
    }
    size
}

/// Nodes a step of a comprehension evaluates: its loop condition and step, the loops of
/// comprehensions nested in them left out (they charge their own steps).
fn step_operations(c: &ComprehensionExpr) -> u64 {
    fn count(e: &IdedExpr) -> u64 {
        match &e.expr {
            Expr::Comprehension(c) => 1 + count(&c.iter_range) + count(&c.accu_init),
            _ => 1 + children(e).into_iter().map(count).sum::<u64>(),
        }
    }
    count(&c.loop_cond) + count(&c.loop_step)
}

/// A comprehension's accumulator, which CEL source cannot name.
fn is_accumulator(e: &IdedExpr) -> bool {
    matches!(&e.expr, Expr::Ident(name) if name.starts_with('@'))
}

/// Whether `e` is a constant whose size the source bounds.
fn is_literal(e: &IdedExpr) -> bool {
    matches!(e.expr, Expr::Literal(_))
}

/// What a charge counts for the value it passes on.
#[derive(Debug, Clone, Copy)]
enum Cells {
    /// Its size: a value the expression copies or builds.
    Measured,
    /// This many: e.g. 1 for an element `filter` keeps, a copy of one of the elements of the
    /// list it filters, which is a fact or was charged when built (so the copies of one
    /// filtering cost no more than that list).
    Count(u64),
}

/// Rewrites expressions to charge the budget: see [`super::budget`].
struct Charger {
    next_id: u64,
}

impl Charger {
    fn literal(&mut self, value: LiteralValue) -> IdedExpr {
        self.next_id += 1;
        IdedExpr {
            id: self.next_id,
            expr: Expr::Literal(value),
        }
    }

    /// `CHARGE(e, operations, cells)` in place of `e`.
    fn wrap(&mut self, e: &mut IdedExpr, operations: u64, cells: Cells) {
        let inner = std::mem::take(e);
        let int = |n: u64| LiteralValue::Int(i64::try_from(n).unwrap_or(i64::MAX).into());
        let operations = self.literal(int(operations));
        let cells = self.literal(match cells {
            Cells::Measured => LiteralValue::Int((-1).into()),
            Cells::Count(n) => int(n),
        });
        self.next_id += 1;
        *e = IdedExpr {
            id: self.next_id,
            expr: Expr::Call(CallExpr {
                func_name: CHARGE.to_owned(),
                target: None,
                args: vec![inner, operations, cells],
            }),
        };
    }

    /// Instruments `e`'s subtree; `in_sum` when `e` is an operand of a `+` (only the
    /// outermost `+` of a chain is measured: its result is the largest).
    fn visit(&mut self, e: &mut IdedExpr, in_sum: bool) {
        match &mut e.expr {
            Expr::Comprehension(c) => self.comprehension(c),
            Expr::Call(call) if call.func_name == operators::ADD && call.args.len() == 2 => {
                let accumulates = call.args.first().is_some_and(is_accumulator);
                for arg in &mut call.args {
                    self.visit(arg, true);
                }
                if !in_sum && !accumulates {
                    self.wrap(e, 0, Cells::Measured);
                }
            }
            Expr::List(list) => self.list(list),
            Expr::Map(m) => {
                for entry in &mut m.entries {
                    if let EntryExpr::MapEntry(m) = &mut entry.expr {
                        self.visit(&mut m.key, false);
                        self.visit(&mut m.value, false);
                        if !is_literal(&m.value) {
                            self.wrap(&mut m.value, 0, Cells::Measured);
                        }
                    }
                }
            }
            Expr::Call(call) => {
                if let Some(t) = &mut call.target {
                    self.visit(t, false);
                }
                for arg in &mut call.args {
                    self.visit(arg, false);
                }
            }
            Expr::Select(s) => self.visit(&mut s.operand, false),
            Expr::Struct(_) | Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => {}
        }
    }

    /// A list literal: each element it copies in is measured.
    fn list(&mut self, list: &mut ListExpr) {
        for element in &mut list.elements {
            self.visit(element, false);
            if !is_literal(element) {
                self.wrap(element, 0, Cells::Measured);
            }
        }
    }

    /// A comprehension charges its steps. `map` and `filter` append to a list in place only
    /// while their shape is theirs (a constant loop condition, `@result + [x]`), so they are
    /// charged inside the step, with the element they keep; the others are charged in their
    /// loop condition, evaluated before every step.
    fn comprehension(&mut self, c: &mut ComprehensionExpr) {
        let operations = step_operations(c);
        self.visit(&mut c.iter_range, false);
        self.visit(&mut c.accu_init, false);
        self.visit(&mut c.result, false);
        self.visit(&mut c.loop_cond, false);
        let in_place = appends_in_place(c);
        // An element that is the step's own item (`filter`, `map(x, x)`) copies one of the
        // list's elements: one cell; anything else is measured.
        let own = |e: &IdedExpr| matches!(&e.expr, Expr::Ident(name) if *name == c.iter_var);
        match appended(&mut c.loop_step).filter(|_| in_place) {
            Some((None, element)) => {
                let cells = if own(element) {
                    Cells::Count(1)
                } else {
                    Cells::Measured
                };
                self.visit(element, false);
                self.wrap(element, operations, cells);
            }
            Some((Some(guard), element)) => {
                let cells = if own(element) {
                    Cells::Count(1)
                } else {
                    Cells::Measured
                };
                self.visit(element, false);
                self.wrap(element, 0, cells);
                self.visit(guard, false);
                self.wrap(guard, operations, Cells::Count(0));
            }
            None => {
                self.visit(&mut c.loop_step, false);
                self.wrap(&mut c.loop_cond, operations, Cells::Count(0));
            }
        }
    }
}

/// Whether the interpreter appends `c`'s results in place (`map`, `filter`): a constant loop
/// condition, the accumulator as result, and a step [`appended`] recognises.
fn appends_in_place(c: &ComprehensionExpr) -> bool {
    is_literal(&c.loop_cond) && is_accumulator(&c.result) && append_shape(&c.loop_step).is_some()
}

/// `Some(guarded)` for a step `@result + [element]` (`false`) or
/// `guard ? @result + [element] : @result` (`true`).
fn append_shape(step: &IdedExpr) -> Option<bool> {
    fn appends(e: &IdedExpr) -> bool {
        matches!(&e.expr, Expr::Call(call)
            if call.func_name == operators::ADD
                && call.target.is_none()
                && matches!(call.args.as_slice(), [accu, IdedExpr { expr: Expr::List(l), .. }]
                    if is_accumulator(accu) && l.elements.len() == 1))
    }
    match &step.expr {
        Expr::Call(call) if call.func_name == operators::CONDITIONAL && call.target.is_none() => {
            match call.args.as_slice() {
                [_, then, otherwise] if is_accumulator(otherwise) && appends(then) => Some(true),
                _ => None,
            }
        }
        _ => appends(step).then_some(false),
    }
}

/// The guard (if any) and the element of a step [`append_shape`] recognises.
fn appended(step: &mut IdedExpr) -> Option<(Option<&mut IdedExpr>, &mut IdedExpr)> {
    fn element(e: &mut IdedExpr) -> Option<&mut IdedExpr> {
        match &mut e.expr {
            Expr::Call(call) => match call.args.as_mut_slice() {
                [_, IdedExpr {
                    expr: Expr::List(list),
                    ..
                }] => list.elements.first_mut(),
                _ => None,
            },
            _ => None,
        }
    }
    match append_shape(step)? {
        false => element(step).map(|e| (None, e)),
        true => match &mut step.expr {
            Expr::Call(call) => match call.args.as_mut_slice() {
                [guard, then, _] => element(then).map(|e| (Some(guard), e)),
                _ => None,
            },
            _ => None,
        },
    }
}

/// Makes `e` charge the running budget for its comprehension steps and the values it
/// builds. `e` must be no deeper than [`super::limits::MAX_DEPTH`] (this recurses).
pub fn instrument(e: &mut IdedExpr) {
    let mut max_id = 0;
    let mut stack = vec![&*e];
    while let Some(n) = stack.pop() {
        max_id = max_id.max(n.id);
        stack.extend(children(n));
    }
    Charger { next_id: max_id }.visit(e, false);
}

/// Elements `e` is known to have before any fact is read: a list or map literal's, or those
/// of the list a `map` transforms; 0 when unknown.
fn least_len(e: &IdedExpr) -> u64 {
    match &e.expr {
        Expr::List(l) => l.elements.len() as u64,
        Expr::Map(m) => m.entries.len() as u64,
        Expr::Comprehension(c)
            if appends_in_place(c) && append_shape(&c.loop_step) == Some(false) =>
        {
            least_len(&c.iter_range)
        }
        _ => 0,
    }
}

/// The fewest operations evaluating `e` charges whatever the facts are: the steps over lists
/// written in the rule, on paths every evaluation takes (a `&&`, `||` or `?:` may skip
/// its other operands; `exists` and `all` may stop after one step). Recurses like
/// [`instrument`].
pub fn least_operations(e: &IdedExpr) -> u64 {
    match &e.expr {
        Expr::Comprehension(c) => {
            let n = least_len(&c.iter_range);
            let steps = if is_literal(&c.loop_cond) {
                n
            } else {
                n.min(1)
            };
            let per_step = step_operations(c)
                .saturating_add(least_operations(&c.loop_cond))
                .saturating_add(least_operations(&c.loop_step));
            least_operations(&c.iter_range)
                .saturating_add(least_operations(&c.accu_init))
                .saturating_add(steps.saturating_mul(per_step))
                .saturating_add(least_operations(&c.result))
        }
        Expr::Call(call)
            if call.func_name == operators::LOGICAL_AND
                || call.func_name == operators::LOGICAL_OR =>
        {
            call.args.first().map_or(0, least_operations)
        }
        Expr::Call(call) if call.func_name == operators::CONDITIONAL && call.args.len() == 3 => {
            let branch = least_operations(&call.args[1]).min(least_operations(&call.args[2]));
            least_operations(&call.args[0]).saturating_add(branch)
        }
        _ => children(e)
            .into_iter()
            .map(least_operations)
            .fold(0, u64::saturating_add),
    }
}

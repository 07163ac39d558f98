//! A parsed expression's syntax tree, measured ([`measure`]).

use cel::common::ast::{EntryExpr, Expr, IdedExpr};

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

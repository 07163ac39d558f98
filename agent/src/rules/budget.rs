//! The evaluation budget of one rule: what evaluating it once (its condition for every item,
//! its evidence and texts) may cost before it is stopped with an error naming the rule.
//!
//! Without loops, a CEL expression costs about as much as it is long; its comprehensions
//! (`exists`, `all`, `exists_one`, `map`, `filter`) multiply, and nested ones over long lists
//! can take seconds and gigabytes. Compiling ([`super::instrument`]) threads two calls of
//! [`CHARGE`] through every expression: one per comprehension step, charging the operations
//! of the step's body, and one per value the expression builds (a list or map element, the
//! result of a `+`, an element `map` or `filter` keeps), charging its size in cells. The
//! interpreter evaluates those calls like any function, so a budget spent fails the
//! evaluation right there, on the thread that runs it, and nothing outlives it. The
//! thread's CPU time is read every few charges: operations bound the time a step's body
//! takes only up to the size of the values it reads (a step copies the element it is
//! given). CPU time, not the wall clock, so a loaded host stops no rule that would fit.

use std::cell::Cell;
use std::time::Duration;

use nix::time::{clock_gettime, ClockId};

use cel::common::types::{CelBytes, CelInt, CelList, CelMap, CelMapKey, CelOptional, CelString};
use cel::common::value::{CowVal, Val};
use cel::{Context, ExecutionError, FunctionContext};

/// Most operations a rule's comprehension steps may evaluate per evaluation of the rule.
pub const MAX_OPERATIONS: u64 = 1_000_000;

/// Most cells of values a rule may build or copy per evaluation: a value is a cell, each
/// element of a list or entry of a map another, text one more per 16 bytes.
pub const MAX_CELLS: u64 = 200_000;

/// Most CPU time one evaluation of a rule may take.
pub const MAX_TIME: Duration = Duration::from_secs(1);

/// Charges between two readings of the CPU clock (a system call).
const CLOCK_EVERY: u64 = 16;

/// The function compiled expressions call: `CHARGE(value, operations, cells)` charges
/// `operations` and `cells` (the cells of `value` when `cells` is negative), then returns
/// `value`. Its name cannot be written in CEL source.
pub const CHARGE: &str = "@netdoctor_charge";

/// Which limit an evaluation ran into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exceeded {
    /// [`MAX_OPERATIONS`].
    Operations,
    /// [`MAX_CELLS`].
    Cells,
    /// [`MAX_TIME`].
    Time,
}

#[derive(Debug, Clone, Copy)]
struct Spent {
    operations: u64,
    cells: u64,
    charges: u64,
    /// The evaluating thread's CPU time when [`MAX_TIME`] is spent.
    deadline: Duration,
    exceeded: Option<Exceeded>,
}

/// CPU time this thread has used.
fn thread_cpu() -> Duration {
    clock_gettime(ClockId::CLOCK_THREAD_CPUTIME_ID).map_or(Duration::ZERO, Duration::from)
}

thread_local! {
    /// The budget of the evaluation running on this thread, if any.
    static ACTIVE: Cell<Option<Spent>> = const { Cell::new(None) };
}

/// One rule's budget for one evaluation; its clock starts when it is made.
#[derive(Debug)]
pub struct Budget {
    rule: String,
    spent: Cell<Spent>,
}

impl Budget {
    /// A full budget for evaluating `rule` (its id) once, on this thread.
    pub fn new(rule: &str) -> Self {
        Budget {
            rule: rule.to_owned(),
            spent: Cell::new(Spent {
                operations: 0,
                cells: 0,
                charges: 0,
                deadline: thread_cpu() + MAX_TIME,
                exceeded: None,
            }),
        }
    }

    /// Runs `f` (an evaluation) against this budget; the charges `f` makes are kept.
    pub fn run<T>(&self, f: impl FnOnce() -> T) -> T {
        /// Takes the budget back from the thread even if `f` panics.
        struct Back<'a>(&'a Budget);
        impl Drop for Back<'_> {
            fn drop(&mut self) {
                if let Some(spent) = ACTIVE.with(Cell::take) {
                    self.0.spent.set(spent);
                }
            }
        }
        ACTIVE.with(|a| a.set(Some(self.spent.get())));
        let _back = Back(self);
        f()
    }

    /// The limit this budget ran into, if it did.
    pub fn exceeded(&self) -> Option<Exceeded> {
        self.spent.get().exceeded
    }

    /// Why the evaluation was stopped, naming the rule and the limit.
    pub fn message(&self, exceeded: Exceeded) -> String {
        let limit = match exceeded {
            Exceeded::Operations => {
                format!("more than {} operations", thousands(MAX_OPERATIONS))
            }
            Exceeded::Cells => format!(
                "values of more than {} cells (list elements, map entries, 16 bytes of text)",
                thousands(MAX_CELLS)
            ),
            Exceeded::Time => format!("more than {} ms of CPU time", MAX_TIME.as_millis()),
        };
        format!(
            "rule {} exceeds its evaluation budget ({limit}; see Limits in docs/rules.md): \
             iterate over fewer or shorter lists, or nest fewer comprehensions",
            self.rule
        )
    }
}

/// `n` with a comma every three digits.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Charges the running evaluation; fails once a limit is passed, and for good after that.
pub fn charge(operations: u64, cells: u64) -> Result<(), Exceeded> {
    ACTIVE.with(|active| {
        // An evaluation outside `Budget::run` has nothing to spend.
        let mut spent = active.get().ok_or(Exceeded::Operations)?;
        if let Some(e) = spent.exceeded {
            return Err(e);
        }
        spent.operations = spent.operations.saturating_add(operations);
        spent.cells = spent.cells.saturating_add(cells);
        let clock = spent.charges % CLOCK_EVERY == 0;
        spent.charges += 1;
        spent.exceeded = if spent.operations > MAX_OPERATIONS {
            Some(Exceeded::Operations)
        } else if spent.cells > MAX_CELLS {
            Some(Exceeded::Cells)
        } else if clock && thread_cpu() > spent.deadline {
            Some(Exceeded::Time)
        } else {
            None
        };
        active.set(Some(spent));
        spent.exceeded.map_or(Ok(()), Err)
    })
}

/// The cells of `value`: 1 for it, 1 for each of its elements or entries, and one per 16
/// bytes of text; counted up to just past `limit`.
pub fn cells(value: &dyn Val, limit: u64) -> u64 {
    let mut count: u64 = 0;
    let mut stack = vec![value];
    while let Some(v) = stack.pop() {
        count += 1;
        if let Some(list) = v.downcast_ref::<CelList>() {
            if count + list.inner().len() as u64 > limit {
                return limit + 1;
            }
            stack.extend(list.inner().iter().map(|b| b.as_ref()));
        } else if let Some(map) = v.downcast_ref::<CelMap>() {
            if count + map.inner().len() as u64 > limit {
                return limit + 1;
            }
            for (key, value) in map.inner() {
                if let CelMapKey::String(k) = key {
                    count += k.inner().len() as u64 / 16;
                }
                stack.push(value.as_ref());
            }
        } else if let Some(s) = v.downcast_ref::<CelString>() {
            count += s.inner().len() as u64 / 16;
        } else if let Some(b) = v.downcast_ref::<CelBytes>() {
            count += b.inner().len() as u64 / 16;
        } else if let Some(inner) = v.downcast_ref::<CelOptional>().and_then(CelOptional::inner) {
            stack.push(inner);
        }
        if count > limit {
            break;
        }
    }
    count
}

/// [`CHARGE`] as the interpreter calls it.
fn charge_call<'c, 'v>(
    ftx: &mut FunctionContext<'c, 'v>,
) -> Result<CowVal<'c, 'v>, ExecutionError> {
    let mut args = std::mem::take(&mut ftx.args).into_iter();
    let (Some(value), Some(operations), Some(count)) = (args.next(), args.next(), args.next())
    else {
        return Err(ftx.error("expects a value, operations and cells"));
    };
    let int = |v: &dyn Val| v.downcast_ref::<CelInt>().map_or(0, |n| *n.inner());
    let operations = u64::try_from(int(&*operations)).unwrap_or(0);
    let cells = u64::try_from(int(&*count)).unwrap_or_else(|_| cells(&*value, MAX_CELLS));
    match charge(operations, cells) {
        Ok(()) => Ok(value),
        Err(_) => Err(ftx.error("evaluation budget exceeded")),
    }
}

/// Declares [`CHARGE`] in `ctx`, a root context.
pub fn declare(ctx: &mut Context<'_, '_>) -> Result<(), String> {
    type Handler = Box<
        dyn for<'c, 'v> Fn(&mut FunctionContext<'c, 'v>) -> Result<CowVal<'c, 'v>, ExecutionError>
            + Send
            + Sync,
    >;
    let handler: Handler = Box::new(charge_call);
    ctx.add_function(CHARGE, handler).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_thousands() {
        assert_eq!(thousands(1_000_000), "1,000,000");
        assert_eq!(thousands(200_000), "200,000");
        assert_eq!(thousands(999), "999");
    }

    #[test]
    fn charges_stop_at_each_limit_and_stay_stopped() {
        let budget = Budget::new("site.x");
        budget.run(|| {
            assert_eq!(charge(MAX_OPERATIONS, 0), Ok(()));
            assert_eq!(charge(1, 0), Err(Exceeded::Operations));
            assert_eq!(charge(0, 0), Err(Exceeded::Operations));
        });
        assert_eq!(budget.exceeded(), Some(Exceeded::Operations));
        assert!(budget
            .message(Exceeded::Operations)
            .contains("rule site.x exceeds its evaluation budget (more than 1,000,000 operations"));

        let budget = Budget::new("site.y");
        budget
            .run(|| charge(0, MAX_CELLS + 1))
            .expect_err("past the cells");
        assert_eq!(budget.exceeded(), Some(Exceeded::Cells));
        // The next evaluation of the same rule is stopped at once.
        assert_eq!(budget.run(|| charge(0, 0)), Err(Exceeded::Cells));
    }

    #[test]
    fn a_budget_runs_out_of_time() {
        let budget = Budget::new("site.slow");
        // As if it had started a second of CPU time ago.
        let mut spent = budget.spent.get();
        spent.deadline = Duration::ZERO;
        budget.spent.set(spent);
        assert_eq!(budget.run(|| charge(1, 0)), Err(Exceeded::Time));
        assert!(budget.message(Exceeded::Time).contains(
            "rule site.slow exceeds its evaluation budget (more than 1000 ms of CPU time"
        ));
    }

    #[test]
    fn nothing_is_spent_outside_a_budget() {
        assert!(charge(0, 0).is_err());
        let budget = Budget::new("site.z");
        budget.run(|| charge(5, 5)).expect("within budget");
        assert!(
            charge(0, 0).is_err(),
            "the budget stays with its evaluation"
        );
    }
}

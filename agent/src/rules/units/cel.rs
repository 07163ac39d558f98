//! The unit functions rule templates call: `fmt_bytes(x)`, `fmt_bps(x)`, `fmt_ratio(x)` ...,
//! one per [`Unit`], named after the evidence suffix of that unit, so a placeholder prints
//! a number as the evidence line prints a value of that name (`{{ fmt_bytes(peer.udp_bytes)
//! }}` → "15.1 MiB"). An unknown value (`-1`, null) prints `n/a`, or `n/a (REASON)` when
//! the template gives the reason as a second argument: `fmt_bytes(x, 'no traffic')`.

use cel::common::types::{CelDouble, CelInt, CelNull, CelString, CelUInt};
use cel::common::value::{CowVal, Val};
use cel::{Context, ExecutionError, FunctionContext};

use super::{number, Unit, NA};

/// Every template function and the unit it prints in.
pub const FUNCTIONS: &[(&str, Unit)] = &[
    ("fmt_bytes", Unit::Bytes),
    ("fmt_kib", Unit::Kib),
    ("fmt_ratio", Unit::Ratio),
    ("fmt_percent", Unit::Percent),
    ("fmt_ms", Unit::Millis),
    ("fmt_s", Unit::Seconds),
    ("fmt_bps", Unit::BitRate),
    ("fmt_mbps", Unit::MbitRate),
    ("fmt_per_s", Unit::PerSecond),
    ("fmt_count", Unit::Count),
    ("fmt_plain", Unit::Plain),
];

/// A number argument as f64; None for anything else (null included).
fn as_number(v: &dyn Val) -> Option<f64> {
    if let Some(i) = v.downcast_ref::<CelInt>() {
        // Facts are far below 2^53: exact.
        return Some(*i.inner() as f64);
    }
    if let Some(u) = v.downcast_ref::<CelUInt>() {
        return Some(*u.inner() as f64);
    }
    v.downcast_ref::<CelDouble>().map(|d| *d.inner())
}

/// What `unit`'s function prints for `value` (a CEL value) with the optional `reason`.
pub fn render(unit: Unit, value: Option<f64>, reason: Option<&str>) -> String {
    match value {
        Some(x) if x != -1.0 && x.is_finite() => number(unit, x),
        _ => match reason {
            Some(r) if !r.is_empty() => format!("{NA} ({r})"),
            _ => NA.to_owned(),
        },
    }
}

type Handler = Box<
    dyn for<'c, 'v> Fn(&mut FunctionContext<'c, 'v>) -> Result<CowVal<'c, 'v>, ExecutionError>
        + Send
        + Sync,
>;

fn handler(unit: Unit) -> Handler {
    Box::new(move |ftx: &mut FunctionContext<'_, '_>| {
        let args = std::mem::take(&mut ftx.args);
        if args.is_empty() || args.len() > 2 {
            return Err(ftx.error("expects a number and, optionally, why it may be unknown"));
        }
        let value = &*args[0];
        let number = as_number(value);
        if number.is_none() && value.downcast_ref::<CelNull>().is_none() {
            return Err(ftx.error("expects a number (an int or a double) first"));
        }
        let reason = match args.get(1) {
            Some(r) => match r.downcast_ref::<CelString>() {
                Some(s) => Some(s.inner().to_owned()),
                None => return Err(ftx.error("expects the reason as a string")),
            },
            None => None,
        };
        let text = render(unit, number, reason.as_deref());
        Ok(CowVal::owned(CelString::from(text)))
    })
}

/// Declares every unit function in `ctx`, a root context.
pub fn declare(ctx: &mut Context<'_, '_>) -> Result<(), String> {
    for (name, unit) in FUNCTIONS {
        ctx.add_function(name, handler(*unit))
            .map_err(|e| format!("{name}: {e}"))?;
    }
    Ok(())
}

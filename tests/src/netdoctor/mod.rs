//! Running the real `netdoctor` binary inside lab namespaces and reading its
//! `--json` report.
//!
//! ```no_run
//! use netdoctor_lab::{netdoctor, PairTopology};
//! # fn main() -> anyhow::Result<()> {
//! let pair = PairTopology::new(1500)?;
//! let watch = netdoctor::Watch::start(&pair.a, &["flows", "eth0", "--duration", "60s", "--json"])?;
//! // ... traffic ...
//! let report = watch.interrupt()?; // Ctrl-C: netdoctor still reports
//! println!("{} packets in", report.counters("ingress")?.packets);
//! # Ok(())
//! # }
//! ```
//!
//! The report is read field by field with errors that name the missing or
//! mistyped key, so every test that reads a report also checks its schema.

use std::time::Duration;

mod fields;
mod records;
mod report;
mod run;

pub use fields::{str_field, u64_field};
pub use netdoctor::kernel::packet::counters::DirCounters;
pub use records::{Flow, TooBig, Tunnel, WgMessages};
pub use report::Report;
pub use run::{binary, run, Watch};

/// What netdoctor prints on stderr once its programs are attached.
pub const WATCHING: &str = "netdoctor: watching";

/// How long [`Watch::start`] waits for [`WATCHING`]. Loading runs the verifier
/// over three programs (≈ 3 s for a debug build on an idle 2-core VM); tests
/// running in parallel slow it down further.
pub const START_TIMEOUT: Duration = Duration::from_secs(45);

/// Exit code of netdoctor for usage errors, unknown interfaces and other
/// failures (Nagios "UNKNOWN").
pub const EXIT_UNKNOWN: i32 = 3;

//! The kernel lane's checks: the cases every kernel runs (`cases`, tests/vm/cases.sh; the
//! signal cases in `signals`); WireGuard read over generic netlink against `wg show` (every
//! kernel with kernel WireGuard); on 6.1 and 6.12 bonds and overlays (`tunnels`,
//! tests/vm/tunnels.sh); on every guest netem WAN paths (`wan`, tests/vm/wan.sh), what
//! limits each connection (`limits`, tests/vm/limits.sh) and WireGuard's path under netem
//! (`wg_path`, tests/vm/wg_path.sh); on 5.10 reordering against loss (`reorder`,
//! tests/vm/reorder.sh). Each returns what it proved for the kernel table.

pub mod cases;
pub mod limits;
pub mod reorder;
pub mod signals;
pub mod tunnels;
pub mod wan;
pub mod wg_netlink;
pub mod wg_path;

use anyhow::Result;
use netdoctor_lab::diagnosis::Diagnosis;
use netdoctor_lab::kernel_lane::Run;

/// Case `case`'s diagnosis.
pub fn diagnosis(run: &Run, case: &str) -> Result<Diagnosis> {
    Diagnosis::parse(
        format!("{} {case}", run.name),
        run.rc(case),
        &run.text(&format!("{case}.out")),
        &run.text(&format!("{case}.err")),
    )
}

/// Collects the failures of several checks, each named, so that one failing case does not
/// hide the others.
#[derive(Debug, Default)]
pub struct Failures(pub Vec<String>);

impl Failures {
    /// Runs `check` as `what`; records its error with `evidence`.
    pub fn check(&mut self, what: &str, run: &Run, check: impl FnOnce() -> Result<()>) {
        if let Err(e) = check() {
            self.0
                .push(format!("{what}: {e:#}\n{}", run.evidence(what)));
        }
    }
}

/// Whether `text` states a rate in a unit a person reads: a number then kbit/s, Mbit/s or
/// Gbit/s (the report picks the unit by the rate's size: 881 kbit/s, 3.3 Mbit/s).
pub fn says_rate(text: &str) -> bool {
    ["kbit/s", "Mbit/s", "Gbit/s"].iter().any(|unit| {
        text.match_indices(&format!(" {unit}")).any(|(at, _)| {
            text[..at]
                .rsplit(' ')
                .next()
                .is_some_and(|n| n.replace(',', "").parse::<f64>().is_ok())
        })
    })
}

#[test]
fn a_rate_reads_in_any_bit_unit_after_a_number() {
    assert!(says_rate("can sustain about 881 kbit/s there"));
    assert!(says_rate("a ceiling of 3.3 Mbit/s at 40 ms RTT"));
    assert!(says_rate("1,234.5 Gbit/s"));
    assert!(!says_rate("can sustain about 881000 bit/s there"));
    assert!(!says_rate("Mbit/s alone"));
    assert!(!says_rate("about n/a Mbit/s"));
}

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

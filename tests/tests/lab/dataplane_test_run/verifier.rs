//! The verifier budget: how many instructions the verifier processes per packet program.

use std::mem::MaybeUninit;
use std::os::fd::AsFd;

use anyhow::{ensure, Context, Result};
use libbpf_rs::query::ProgInfoIter;
use netdoctor::kernel::packet::{Dataplane, Options, ProgramKind};
use netdoctor_lab::lab_guard;

use crate::dataplane_test_run::harness::PROGRAMS;

/// Instructions the verifier may process per packet program before this test fails: a
/// quarter of the kernel's limit (BPF_COMPLEXITY_LIMIT_INSNS, 1,000,000). Before the data
/// plane was split into global functions each program took about 750,000, and a small change
/// to the parser pushed them over the limit; this leaves room to notice growth early.
const VERIFIER_BUDGET: u32 = 250_000;

/// The kernel id of one of `dp`'s programs.
fn prog_id(dp: &Dataplane<'_>, kind: ProgramKind) -> Result<u32> {
    Ok(libbpf_rs::Program::id_from_fd(dp.program(kind).as_fd())?)
}

/// Each packet program's `verified_insns` (what the verifier processed for the program and
/// its global functions) stays below [`VERIFIER_BUDGET`].
#[test]
fn verifier_budget() -> Result<()> {
    lab_guard!();
    let mut storage = MaybeUninit::uninit();
    let start = std::time::Instant::now();
    let dp = Dataplane::load(&mut storage, Options::default()).context("load data plane")?;
    println!("data plane loaded in {:?}", start.elapsed());
    let mut over = Vec::new();
    for kind in PROGRAMS {
        let id = prog_id(&dp, kind)?;
        let info = ProgInfoIter::default()
            .find(|p| p.id == id)
            .with_context(|| format!("{kind:?} (id {id}) among the loaded programs"))?;
        let insns = info.verified_insns;
        println!(
            "{kind:?} ({}, id {id}): {insns} verified instructions",
            info.name.to_string_lossy()
        );
        ensure!(insns > 0, "{kind:?}: the kernel reported no verified_insns");
        if insns >= VERIFIER_BUDGET {
            over.push(format!("{kind:?}: {insns}"));
        }
    }
    ensure!(
        over.is_empty(),
        "over the budget of {VERIFIER_BUDGET} verified instructions: {}",
        over.join(", ")
    );
    Ok(())
}

//! Packets for the data plane's `BPF_PROG_TEST_RUN` tests and microbenchmark: a builder for
//! hand-made frames, seeded random frames, and an independent model of what the data plane
//! counts for each frame, to compare the real programs with; and a model of the WireGuard
//! sessions the data plane counts on an underlay ([`wg_model`]).
//!
//! Plain bytes in, plain counts out: nothing here depends on netdoctor's crate, so a test
//! that compares with netdoctor's own types converts at its edge.

pub mod builder;
pub mod model;
pub mod random;
pub mod wg_model;

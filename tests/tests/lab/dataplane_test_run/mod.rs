//! BPF_PROG_TEST_RUN tests of the packet data plane (`ebpf/packet.bpf.c`).
//!
//! Every `#[test]` loads its own [`Dataplane`] and runs a group of cases on it; before each
//! case every map is emptied and ifindex 1 is watched again (the loopback of the calling
//! thread's network namespace, which the kernel uses as the device of test-run packets).
//! A case feeds hand-crafted frames to `nd_xdp_ingress`, `nd_tc_ingress` and `nd_tc_egress`,
//! one run each, and compares the counters of both directions, every flow record and every
//! too-big entry exactly with what the C code prescribes, after each program. XDP and tc
//! ingress both count ingress, so expectations accumulate over the programs of a case.
//!
//! Cases are grouped by topic, one load per group, and a group reports all of its failing
//! cases at once, by name. Loads are cheap (0.1-0.2 s) since the data plane was split into
//! global functions; `verifier_budget` keeps the verifier's work in check.
//!
//! One module per subject; [`harness`] and [`expect`] serve them all. Frames come from the
//! lab crate's packet builder and random generator (`netdoctor_lab::packet`), test runs
//! from its `bpf::test_run`.
//!
//! [`Dataplane`]: netdoctor::kernel::packet::Dataplane

mod expect;
mod harness;

mod encapsulation;
mod fast_path;
mod flow_cache;
mod flow_table;
mod fragments;
mod hooks;
mod icmp_too_big;
mod local_path;
mod malformed;
mod protocols;
mod random_vs_model;
mod tcp_sizes;
mod verifier;
mod wg_path;
mod windows;

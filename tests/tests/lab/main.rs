//! netdoctor's integration tests, as one test binary (`cargo test -p netdoctor-lab --test
//! lab`): a module per subject, each linking the lab crate (`netdoctor_lab`: namespaces,
//! veths, tunnels, traffic, the agent as a process) once for all of them. The kernel lane
//! (`kernel_matrix.rs`) is a binary of its own.
//!
//! Every test runs on the threads of this one process, alongside tests of other modules:
//! the names of namespaces and interfaces are unique per test (`netdoctor_lab::ids`), and
//! a test needs no other test's absence. Filter by module to run one subject, e.g.
//! `cargo test -p netdoctor-lab --test lab -- diagnose_mtu::`. Lab tests start with
//! `lab_guard!`: they skip without root, BPF or a tool, and fail under `CI=true`.
//!
//! The Tailscale lane is `diagnose_tailscale::` and `tailscale_agent::` (its tests are named
//! `tailscale_lane_*`); the measurements (`dataplane_microbench::`, `flow_table_scale::`,
//! `agent_scale::`) are `#[ignore]`d and run with `--release -- --ignored`.

mod common_mesh;

mod agent_api;
mod agent_lifecycle;
mod agent_load;
mod agent_origin;
mod agent_scale;
mod agent_systemd;
mod bpf_cost_metric;
mod cli;
mod connection_limits;
mod container_image;
mod daemon_trust;
mod dataplane_microbench;
mod dataplane_netns;
mod dataplane_test_run;
mod diagnose_all;
mod diagnose_daemon_cpu;
mod diagnose_ecmp;
mod diagnose_gateway;
mod diagnose_mtu;
mod diagnose_nat;
mod diagnose_tailscale;
mod diagnose_tap_mesh;
mod diagnose_wg_path;
mod firewall_rules;
mod flow_table_scale;
mod handshake_race;
mod human_units;
mod lab_selftest;
mod local_tcp;
mod observability;
mod prometheus_rules;
mod rules_eval;
mod seed_scenarios;
mod sockets_drops;
mod tailscale_agent;

//! The real `netdoctor agent` running inside a lab namespace, and HTTP requests to it.
//!
//! The agent listens on its namespace's loopback, so requests are made from inside the
//! namespace too: each one runs on a short-lived thread that entered the namespace with
//! `setns(CLONE_NEWNET)` and speaks HTTP with `ureq`.
//!
//! ```no_run
//! use std::time::Duration;
//! use netdoctor_lab::{agent::Agent, PairTopology};
//! # fn main() -> anyhow::Result<()> {
//! let pair = PairTopology::new(1500)?;
//! // Adds --listen 127.0.0.1:9469, --database <temp dir> and --interval 1s, then waits
//! // for /readyz == 200.
//! let agent = Agent::start(&pair.a, &["--no-probe"])?;
//! let eth0 = agent.poll("/api/v1/interfaces/eth0", Duration::from_secs(5), "eth0 watched", |r| {
//!     (r.status == 200 && r.json["watched"] == true).then(|| r.json.clone())
//! })?;
//! println!("{}", eth0["mtu"]);
//! # Ok(())
//! # }
//! ```
//!
//! Attachments left on an interface (tcx chains, XDP, legacy tc filters) are read with
//! [`attached`], e.g. to check that nothing stays behind after SIGKILL.

use std::time::Duration;

mod http;
mod metrics;
mod process;
mod raw;
mod reply;

pub use http::request_url;
pub use metrics::{find_metric, parse_metrics, MetricSample};
pub use process::{tail, Agent, Auth};
pub use raw::{exchange, is_closed, raise_open_files, read_reply, RawReply};
pub use reply::Reply;

/// Port the agent listens on unless `--listen` is given (each namespace has its own
/// loopback, so agents in different namespaces never collide).
pub const DEFAULT_PORT: u16 = 9469;

/// How long [`Agent::start`] waits for `/readyz` == 200: loading the programs (the
/// verifier, ≈ 3 s for a debug build on an idle 2-core VM, much more with parallel
/// tests) plus the first evaluation.
pub const READY_TIMEOUT: Duration = Duration::from_secs(90);

/// Time limit of one HTTP request (a diagnosis loads programs and observes for up to
/// 60 s).
pub const HTTP_TIMEOUT: Duration = Duration::from_secs(120);

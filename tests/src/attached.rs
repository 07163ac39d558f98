//! What is attached to an interface, seen through every mechanism netdoctor may use:
//! tcx chains (`bpf_prog_query`), XDP (`ip -d link`) and legacy tc filters. Tests use it
//! to prove that nothing stays attached after netdoctor exits, however it exits.

use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde_json::Value;

use crate::bpf::query::tcx_prog_ids as tcx_chain;
use crate::netns::Netns;

/// What is attached to one interface, seen through every mechanism netdoctor may use.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Attached {
    /// Names of the programs in the tcx ingress chain.
    pub tcx_ingress: Vec<String>,
    /// Names of the programs in the tcx egress chain.
    pub tcx_egress: Vec<String>,
    /// `ip -d link` shows an XDP program.
    pub xdp: bool,
    /// `tc filter show dev IF ingress` output (legacy cls_bpf).
    pub tc_ingress: String,
    /// `tc filter show dev IF egress` output.
    pub tc_egress: String,
}

impl Attached {
    /// True when nothing at all is attached.
    pub fn nothing(&self) -> bool {
        *self == Attached::default()
    }

    /// Netlink attachments (what netdoctor's leftover sweep removes).
    pub fn netlink_leftovers(&self) -> usize {
        usize::from(self.xdp)
            + usize::from(!self.tc_ingress.is_empty())
            + usize::from(!self.tc_egress.is_empty())
    }
}

/// Interface index of `ifname` inside `ns`.
pub fn ifindex(ns: &Netns, ifname: &str) -> Result<u32> {
    let json = ns.ip(&["-j", "link", "show", "dev", ifname])?;
    let v: Value = serde_json::from_str(&json).context("parsing `ip -j link show`")?;
    v.pointer("/0/ifindex")
        .and_then(Value::as_u64)
        .and_then(|i| u32::try_from(i).ok())
        .with_context(|| format!("no ifindex in {json}"))
}

/// Program ids in the tcx chain `attach_type` of `ifindex`, queried from a thread inside
/// `ns` (ifindexes are per namespace).
fn tcx_prog_ids(ns: &Netns, ifindex: u32, attach_type: u32) -> Result<Vec<u32>> {
    ns.run_in(move || tcx_chain(ifindex, attach_type))?
        .with_context(|| format!("bpf_prog_query_opts(ifindex {ifindex}, type {attach_type})"))
}

fn prog_names(ids: &[u32]) -> Vec<String> {
    ids.iter()
        .map(|id| {
            libbpf_rs::query::ProgInfoIter::default()
                .find(|p| p.id == *id)
                .map(|p| p.name.to_string_lossy().into_owned())
                .unwrap_or_else(|| format!("prog#{id}"))
        })
        .collect()
}

/// Everything attached to `ifname` in `ns`: tcx chains (bpf_prog_query), XDP (`ip -d
/// link`) and legacy tc filters (`tc filter show`).
pub fn attached(ns: &Netns, ifname: &str) -> Result<Attached> {
    let index = ifindex(ns, ifname)?;
    let ingress = tcx_prog_ids(ns, index, libbpf_rs::libbpf_sys::BPF_TCX_INGRESS)?;
    let egress = tcx_prog_ids(ns, index, libbpf_rs::libbpf_sys::BPF_TCX_EGRESS)?;
    let link: Value = serde_json::from_str(&ns.ip(&["-j", "-d", "link", "show", "dev", ifname])?)
        .context("parsing `ip -j -d link show`")?;
    let link = link.get(0).context("`ip -j -d link show` listed nothing")?;
    let tc = |dir: &str| -> Result<String> {
        Ok(ns
            .run(&["tc", "filter", "show", "dev", ifname, dir])?
            .trim()
            .to_owned())
    };
    Ok(Attached {
        tcx_ingress: prog_names(&ingress),
        tcx_egress: prog_names(&egress),
        xdp: link.get("xdp").is_some(),
        tc_ingress: tc("ingress")?,
        tc_egress: tc("egress")?,
    })
}

/// Polls until nothing is attached to any of `ifnames` (the kernel may detach a dead
/// process' links a little after it exited); errors with the last state after `timeout`.
pub fn wait_nothing_attached(ns: &Netns, ifnames: &[&str], timeout: Duration) -> Result<()> {
    let deadline = Instant::now() + timeout;
    loop {
        let mut left = Vec::new();
        for ifname in ifnames {
            let state = attached(ns, ifname)?;
            if !state.nothing() {
                left.push(format!("{ifname}: {state:?}"));
            }
        }
        if left.is_empty() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            bail!(
                "still attached {timeout:?} after netdoctor exited:\n{}",
                left.join("\n")
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

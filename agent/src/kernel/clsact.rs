//! The clsact qdisc that netdoctor's netlink tc filters sit on (kernels without tcx, or
//! `--attach netlink`): created when an interface has none, and removed again by the
//! process that created it, once its last filter there is gone and no other filter is left
//! on it. A clsact that was there before netdoctor is never removed, nor one that holds
//! anyone else's filter.
//!
//! A killed netdoctor cannot say whether it created the clsact it leaves. The start-up sweep
//! ([`super::attach::sweep_leftovers`]) therefore removes a clsact only when it has just
//! removed a killed netdoctor's filters from it and the qdisc is empty afterwards: a clsact
//! with no filter classifies nothing, so removing it changes no traffic, while one with any
//! other filter stays.

use std::collections::HashMap;
use std::io;
use std::sync::{Mutex, PoisonError};

use super::tc_filters::filters;

/// This process' holds on clsact qdiscs, by network namespace and interface index.
#[derive(Debug, Default)]
struct Holds {
    /// Filters of this process on it.
    filters: usize,
    /// This process created it.
    created: bool,
}

/// An interface: the calling thread's network namespace (its inode) and an index there.
type Key = (u64, u32);

static HELD: Mutex<Option<HashMap<Key, Holds>>> = Mutex::new(None);

fn with_holds<T>(f: impl FnOnce(&mut HashMap<Key, Holds>) -> T) -> T {
    let mut guard = HELD.lock().unwrap_or_else(PoisonError::into_inner);
    f(guard.get_or_insert_with(HashMap::new))
}

/// Interface `ifindex` of the calling thread's network namespace: indexes repeat across
/// namespaces, and a process (the lab's tests) may hold clsacts in several.
fn key(ifindex: u32) -> Key {
    use std::os::unix::fs::MetadataExt;
    let netns = std::fs::metadata("/proc/thread-self/ns/net").map_or(0, |m| m.ino());
    (netns, ifindex)
}

/// A hold on the clsact qdisc of one interface, taken for each netlink tc filter: the last
/// hold released removes the qdisc if this process created it and it holds no filter.
/// Taken and released in the same network namespace (a data plane stays on its thread).
#[derive(Debug)]
pub(crate) struct Clsact {
    key: Key,
}

impl Clsact {
    /// Makes sure interface `ifindex` has a clsact qdisc (creating it if none is there) and
    /// holds it.
    pub(crate) fn hold(ifindex: u32) -> io::Result<Clsact> {
        with_holds(|held| {
            let created = create(ifindex)?;
            let key = key(ifindex);
            let holds = held.entry(key).or_default();
            holds.filters += 1;
            holds.created |= created;
            tracing::debug!(ifindex, created, "clsact held");
            Ok(Clsact { key })
        })
    }
}

impl Drop for Clsact {
    fn drop(&mut self) {
        let (key, ifindex) = (self.key, self.key.1);
        // Under the lock, so that no hold is taken between the check and the removal.
        with_holds(|held| {
            let Some(holds) = held.get_mut(&key) else {
                return;
            };
            holds.filters = holds.filters.saturating_sub(1);
            if holds.filters > 0 || !held.remove(&key).is_some_and(|h| h.created) {
                return;
            }
            match remove_if_empty(ifindex) {
                Ok(true) => tracing::debug!(ifindex, "removed the clsact qdisc netdoctor created"),
                Ok(false) => tracing::info!(
                    ifindex,
                    "the clsact qdisc netdoctor created holds other filters now: left in place"
                ),
                Err(e) => tracing::warn!(
                    ifindex,
                    "removing the clsact qdisc netdoctor created failed: {e}"
                ),
            }
        });
    }
}

fn tc_hook(ifindex: u32) -> libbpf_sys::bpf_tc_hook {
    libbpf_sys::bpf_tc_hook {
        sz: std::mem::size_of::<libbpf_sys::bpf_tc_hook>() as _,
        ifindex: ifindex as i32,
        attach_point: libbpf_sys::BPF_TC_INGRESS | libbpf_sys::BPF_TC_EGRESS,
        ..Default::default()
    }
}

/// Creates the clsact qdisc of `ifindex`: true if this call created it, false if one was
/// there already.
fn create(ifindex: u32) -> io::Result<bool> {
    let mut hook = tc_hook(ifindex);
    // SAFETY: `hook` is a fully initialised bpf_tc_hook whose `sz` matches the libbpf we
    // link against, and it outlives the call.
    let ret = unsafe { libbpf_sys::bpf_tc_hook_create(&mut hook) };
    match ret {
        0 => Ok(true),
        e if e == -libc::EEXIST => Ok(false),
        e => Err(io::Error::from_raw_os_error(-e)),
    }
}

/// Removes the clsact qdisc of `ifindex` if no filter is left on it (ingress or egress):
/// true if it was removed.
pub(crate) fn remove_if_empty(ifindex: u32) -> io::Result<bool> {
    if filters(ifindex)? > 0 {
        return Ok(false);
    }
    let mut hook = tc_hook(ifindex);
    // SAFETY: as in `create`; with both attach points, libbpf deletes the clsact qdisc.
    let ret = unsafe { libbpf_sys::bpf_tc_hook_destroy(&mut hook) };
    match ret {
        0 => Ok(true),
        // Not there (any more): nothing to remove.
        e if e == -libc::ENOENT || e == -libc::EINVAL => Ok(false),
        e => Err(io::Error::from_raw_os_error(-e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::tc_filters::list;

    /// `tc ARGS` (in the calling thread's network namespace); its stdout.
    fn tc(args: &[&str]) -> String {
        let out = std::process::Command::new("tc")
            .args(args)
            .output()
            .expect("run tc");
        assert!(
            out.status.success(),
            "tc {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn has_clsact() -> bool {
        tc(&["qdisc", "show", "dev", "lo"]).contains("clsact")
    }

    /// Someone else's filter: u32, which needs no action module.
    const FOREIGN: [&str; 16] = [
        "filter", "add", "dev", "lo", "ingress", "prio", "1", "protocol", "ip", "u32", "match",
        "u32", "0", "0", "classid", "1:1",
    ];

    /// On `lo` (index 1) of a network namespace of the test's own: a clsact netdoctor
    /// created goes with its last hold; one that was there before stays, and so does one
    /// that holds someone else's filter.
    fn cases() {
        const LO: u32 = 1;
        assert_eq!(filters(LO).expect("dump without a clsact"), 0);

        // Created here, held by two filters: removed with the second hold only.
        let (a, b) = (
            Clsact::hold(LO).expect("hold"),
            Clsact::hold(LO).expect("hold"),
        );
        assert!(has_clsact(), "hold did not create the clsact");
        drop(a);
        assert!(has_clsact(), "removed while a hold is left");
        drop(b);
        assert!(
            !has_clsact(),
            "the clsact netdoctor created outlived its holds"
        );

        // Created here, then someone else's filter on it: it stays, with that filter.
        let a = Clsact::hold(LO).expect("hold");
        tc(&FOREIGN);
        let listed = list(LO).expect("dump");
        assert!(
            listed.iter().any(|f| f.ingress
                && f.priority == 1
                && f.handle != 0
                && f.kind == "u32"
                && f.bpf_id.is_none()),
            "the dump misses the u32 filter: {listed:?}"
        );
        assert_eq!(filters(LO).expect("dump"), listed.len());
        drop(a);
        assert!(has_clsact(), "removed with someone else's filter on it");
        assert!(tc(&["filter", "show", "dev", "lo", "ingress"]).contains("u32"));
        assert!(!remove_if_empty(LO).expect("remove_if_empty"));
        tc(&["filter", "del", "dev", "lo", "ingress"]);
        assert!(
            remove_if_empty(LO).expect("remove_if_empty"),
            "empty, not removed"
        );
        assert!(!has_clsact());

        // There before netdoctor (empty): it stays.
        tc(&["qdisc", "add", "dev", "lo", "clsact"]);
        drop(Clsact::hold(LO).expect("hold"));
        assert!(has_clsact(), "a clsact that was there before was removed");
    }

    /// Interface indexes repeat across namespaces: a hold on `lo` (index 1) of one
    /// namespace does not keep the clsact of `lo` of another.
    #[test]
    fn holds_in_two_namespaces_are_counted_apart() {
        if !crate::testing::root_or_skip("for network namespaces") {
            return;
        }
        const LO: u32 = 1;
        let held = std::sync::Barrier::new(2);
        let released = std::sync::Barrier::new(2);
        std::thread::scope(|s| {
            for first in [true, false] {
                let (held, released) = (&held, &released);
                s.spawn(move || {
                    nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET).expect("unshare");
                    let hold = Clsact::hold(LO).expect("hold");
                    held.wait();
                    if first {
                        drop(hold);
                        let kept = has_clsact();
                        released.wait();
                        assert!(!kept, "a hold in another namespace kept this one's clsact");
                    } else {
                        released.wait();
                        assert!(has_clsact(), "released from another namespace");
                        drop(hold);
                        assert!(!has_clsact());
                    }
                });
            }
        });
    }

    #[test]
    fn removes_only_the_clsact_it_created_once_no_filter_is_left() {
        if !crate::testing::root_or_skip("for a network namespace") {
            return;
        }
        // A thread of its own enters the new namespace (tc, run from it, too).
        std::thread::spawn(|| {
            nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET).expect("unshare");
            cases();
        })
        .join()
        .expect("the namespace's thread failed");
    }
}

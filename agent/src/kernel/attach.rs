//! Attaching programs to interfaces so that nothing outlives the process.
//!
//! The default is BPF links (XDP and tcx through `bpf_link_create`): the kernel detaches
//! them when the last file descriptor closes, so a killed agent leaves nothing behind.
//! Netlink attachments (legacy XDP, clsact + cls_bpf) survive the process; they are only a
//! fallback for kernels without tcx (< 6.6), detached on drop (the one-shot commands drop
//! them on SIGINT and SIGTERM too) and swept at start-up. The clsact qdisc under the filters
//! goes with them when netdoctor created it ([`super::clsact`]).
//!
//! Every netlink tc filter has a handle of its own, chosen by the kernel, at one priority
//! that marks it as netdoctor's ([`TC_PRIORITY`]): several data planes (the agent's monitor
//! and a diagnosis, or two commands) can watch one interface, each removing only its own
//! filter. Our programs return `TCX_NEXT` (`TC_ACT_UNSPEC` for cls_bpf: go on with the next
//! filter), so every one of them sees every packet. Legacy XDP is one program per interface:
//! a data plane that finds it taken is told so ([`xdp_taken`]) and counts with tc instead.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use clap::ValueEnum;
use libbpf_rs::{TcHook, TcHookBuilder, Xdp, XdpFlags, TC_EGRESS, TC_INGRESS};
use serde::Serialize;

use super::clsact::{self, Clsact};
use super::tc_filters;

/// Kernel attach types used with `bpf_link_create` (uapi `enum bpf_attach_type`).
const BPF_XDP: u32 = libbpf_sys::BPF_XDP;
const BPF_TCX_INGRESS: u32 = libbpf_sys::BPF_TCX_INGRESS;
const BPF_TCX_EGRESS: u32 = libbpf_sys::BPF_TCX_EGRESS;

/// Priority of our legacy cls_bpf filters, so start-up can find leftovers of a killed
/// predecessor (by this priority and their program) without touching anyone else's filters.
/// Handles are the kernel's choice: one per filter.
pub(crate) const TC_PRIORITY: u16 = 0xe0d0;

/// How an XDP program is attached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum XdpMode {
    /// The kernel chooses (native where the driver supports it).
    Auto,
    /// In the driver: fastest, needs driver support.
    Native,
    /// On the skb after allocation (SKB mode): works everywhere, copies non-linear skbs.
    Generic,
}

impl XdpMode {
    fn flags(self) -> u32 {
        match self {
            XdpMode::Auto => 0,
            XdpMode::Native => libbpf_sys::XDP_FLAGS_DRV_MODE,
            XdpMode::Generic => libbpf_sys::XDP_FLAGS_SKB_MODE,
        }
    }
}

/// Mechanism for attaching.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum AttachMethod {
    /// BPF links (XDP link, tcx): detached by the kernel when netdoctor exits or dies.
    Link,
    /// Legacy netlink XDP and clsact/cls_bpf: for kernels before 6.6. Survives SIGKILL;
    /// leftovers are removed the next time netdoctor starts.
    Netlink,
}

/// One attached program. Dropping it detaches.
#[derive(Debug)]
pub(crate) enum Attachment {
    /// A BPF link; closing the descriptor detaches.
    Link { _fd: OwnedFd },
    /// Legacy XDP attached through netlink.
    NetlinkXdp {
        ifindex: i32,
        flags: u32,
        prog: OwnedFd,
    },
    /// Legacy cls_bpf filter on a clsact qdisc (its handle in `hook`), the id of the program
    /// it runs, and the hold on that qdisc (released after the filter is detached).
    NetlinkTc {
        hook: TcHook,
        prog_id: u32,
        _clsact: Clsact,
    },
}

impl Drop for Attachment {
    fn drop(&mut self) {
        let result = match self {
            Attachment::Link { .. } => Ok(()),
            Attachment::NetlinkXdp {
                ifindex,
                flags,
                prog,
            } => xdp_detach_own(*ifindex, *flags, prog.as_fd()),
            Attachment::NetlinkTc { hook, prog_id, .. } => tc_detach_own(hook, *prog_id),
        };
        if let Err(e) = result {
            tracing::warn!("detaching a netlink-attached program failed: {e}");
        }
    }
}

fn link_create(
    prog: BorrowedFd<'_>,
    ifindex: u32,
    attach_type: u32,
    flags: u32,
) -> io::Result<OwnedFd> {
    let opts = libbpf_sys::bpf_link_create_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_link_create_opts>() as _,
        flags,
        ..Default::default()
    };
    // SAFETY: `prog` is a valid program descriptor for the duration of the call and `opts`
    // is a fully initialised options struct whose `sz` matches the libbpf we link against.
    let fd = unsafe {
        libbpf_sys::bpf_link_create(prog.as_raw_fd(), ifindex as i32, attach_type, &opts)
    };
    if fd < 0 {
        return Err(io::Error::from_raw_os_error(-fd));
    }
    // SAFETY: bpf_link_create returned a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Attaches an XDP program through a BPF link.
pub(crate) fn xdp_link(
    prog: BorrowedFd<'_>,
    ifindex: u32,
    mode: XdpMode,
) -> io::Result<Attachment> {
    link_create(prog, ifindex, BPF_XDP, mode.flags()).map(|fd| Attachment::Link { _fd: fd })
}

/// Attaches a tc program through a tcx link (Linux >= 6.6).
pub(crate) fn tcx_link(
    prog: BorrowedFd<'_>,
    ifindex: u32,
    ingress: bool,
) -> io::Result<Attachment> {
    let attach_type = if ingress {
        BPF_TCX_INGRESS
    } else {
        BPF_TCX_EGRESS
    };
    link_create(prog, ifindex, attach_type, 0).map(|fd| Attachment::Link { _fd: fd })
}

/// A cls_bpf filter of ours at `handle` (0: the kernel chooses one when attaching). Never
/// `replace`: a filter is only ever added next to the others, never over one.
fn tc_hook(prog: BorrowedFd<'_>, ifindex: u32, ingress: bool, handle: u32) -> TcHook {
    let point = if ingress { TC_INGRESS } else { TC_EGRESS };
    TcHookBuilder::new(prog)
        .ifindex(ifindex as i32)
        .handle(handle)
        .priority(u32::from(TC_PRIORITY))
        .hook(point)
}

/// Removes our filter at `hook`'s handle if it still runs program `prog_id` (nothing when
/// it is gone already; a warning when another program took the handle since).
fn tc_detach_own(hook: &mut TcHook, prog_id: u32) -> libbpf_rs::Result<()> {
    match hook.query() {
        Ok(id) if id == prog_id => hook.detach(),
        Ok(id) => {
            tracing::warn!(
                handle = hook.get_handle(),
                "the tc filter netdoctor attached runs another program now (id {id}): left in place"
            );
            Ok(())
        }
        Err(e) if e.kind() == libbpf_rs::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// Detaches XDP program `prog` from `ifindex` if it is still the one attached there.
fn xdp_detach_own(ifindex: i32, flags: u32, prog: BorrowedFd<'_>) -> libbpf_rs::Result<()> {
    let opts = libbpf_sys::bpf_xdp_attach_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_xdp_attach_opts>() as _,
        old_prog_fd: prog.as_raw_fd(),
        ..Default::default()
    };
    // SAFETY: `opts` is a fully initialised options struct whose `sz` matches the libbpf we
    // link against, and `prog` is a valid descriptor for the duration of the call. With
    // `old_prog_fd` libbpf sets XDP_FLAGS_REPLACE: the kernel detaches only that program.
    let ret = unsafe { libbpf_sys::bpf_xdp_detach(ifindex, flags, &opts) };
    match ret {
        0 => Ok(()),
        e if e == -libc::EEXIST => {
            tracing::warn!(
                ifindex,
                "the XDP program netdoctor attached was replaced by another one: left in place"
            );
            Ok(())
        }
        e => Err(libbpf_rs::Error::from_raw_os_error(-e)),
    }
}

fn dup(prog: BorrowedFd<'_>) -> io::Result<OwnedFd> {
    prog.try_clone_to_owned()
}

/// Attaches XDP through netlink (legacy; survives the process). Never over another program:
/// EBUSY or EEXIST when the interface has one ([`xdp_taken`]).
pub(crate) fn xdp_netlink(
    prog: BorrowedFd<'_>,
    ifindex: u32,
    mode: XdpMode,
) -> io::Result<Attachment> {
    let flags = mode.flags() | libbpf_sys::XDP_FLAGS_UPDATE_IF_NOEXIST;
    // SAFETY: `prog` is a valid program descriptor for the duration of the call; no options.
    let ret = unsafe {
        libbpf_sys::bpf_xdp_attach(ifindex as i32, prog.as_raw_fd(), flags, std::ptr::null())
    };
    if ret < 0 {
        return Err(io::Error::from_raw_os_error(-ret));
    }
    Ok(Attachment::NetlinkXdp {
        ifindex: ifindex as i32,
        flags: mode.flags(),
        prog: dup(prog)?,
    })
}

/// Attaches a cls_bpf filter on a clsact qdisc (legacy; survives the process).
pub(crate) fn tc_netlink(
    prog: BorrowedFd<'_>,
    ifindex: u32,
    ingress: bool,
) -> io::Result<Attachment> {
    let prog_id = libbpf_rs::Program::id_from_fd(prog).map_err(io_error)?;
    let clsact = Clsact::hold(ifindex)?;
    let mut hook = tc_hook(prog, ifindex, ingress, 0);
    hook.attach().map_err(io_error)?;
    tracing::debug!(
        ifindex,
        ingress,
        handle = hook.get_handle(),
        "cls_bpf filter attached"
    );
    Ok(Attachment::NetlinkTc {
        hook,
        prog_id,
        _clsact: clsact,
    })
}

/// Whether attaching XDP failed because the interface has an XDP program already (another
/// netdoctor's, or anyone's): one per interface and mode, and native and generic exclude
/// each other (EBUSY, EEXIST). Such a program is never replaced.
pub(crate) fn xdp_taken(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EBUSY | libc::EEXIST))
}

/// The XDP program attached to `ifindex`, for a message: "nd_xdp_ingress (id 42), another
/// netdoctor's", "prog (id 7)", or "a program on a device above it" when there is none on
/// the interface itself (a bond's, over its members).
pub(crate) fn xdp_holder(prog: BorrowedFd<'_>, ifindex: u32, ours: &[&str]) -> String {
    let ids = Xdp::new(prog)
        .query(ifindex as i32, XdpFlags::NONE)
        .map(|q| [q.prog_id, q.skb_prog_id, q.drv_prog_id, q.hw_prog_id])
        .unwrap_or_default();
    match ids.into_iter().find(|id| *id != 0) {
        None => "a program on a device above it".into(),
        Some(id) => match program_name(id) {
            Some(name) if ours.contains(&name.as_str()) => {
                format!("{name} (id {id}), another netdoctor's")
            }
            Some(name) => format!("{name} (id {id})"),
            None => format!("program id {id}"),
        },
    }
}

/// Removes netlink attachments a killed netdoctor left on `ifindex`: cls_bpf filters at our
/// priority, whatever their handle, and an XDP program, each only if it carries one of our
/// program names and no live process holds it (a running `--attach netlink` netdoctor keeps
/// its programs open; a killed one does not). A clsact qdisc left without any filter once
/// those filters are gone goes too (see [`super::clsact`] for why an empty one, and only
/// then).
pub(crate) fn sweep_leftovers(prog: BorrowedFd<'_>, ifindex: u32, names: &[&str]) -> Swept {
    let leftover = |id: u32| {
        id != 0
            && program_name(id).is_some_and(|n| names.contains(&n.as_str()))
            && !held_by_a_process(id)
    };
    let mut removed = 0;
    let filters = tc_filters::list(ifindex).unwrap_or_else(|e| {
        tracing::warn!(
            ifindex,
            "listing the tc filters to remove a previous netdoctor's: {e}"
        );
        Vec::new()
    });
    for f in filters
        .iter()
        .filter(|f| f.priority == TC_PRIORITY && f.handle != 0 && f.bpf_id.is_some_and(leftover))
    {
        match tc_hook(prog, ifindex, f.ingress, f.handle).detach() {
            Ok(()) => removed += 1,
            Err(e) => tracing::warn!(
                ifindex,
                handle = f.handle,
                "removing a filter a previous netdoctor left: {e}"
            ),
        }
    }
    let clsact = removed > 0
        && clsact::remove_if_empty(ifindex).unwrap_or_else(|e| {
            tracing::warn!(
                ifindex,
                "removing the clsact qdisc a previous netdoctor left: {e}"
            );
            false
        });
    for mode in [XdpMode::Auto, XdpMode::Generic, XdpMode::Native] {
        let xdp = Xdp::new(prog);
        let flags = || XdpFlags::from_bits_truncate(mode.flags());
        let Ok(id) = xdp.query_id(ifindex as i32, flags()) else {
            continue;
        };
        if leftover(id) && xdp.detach(ifindex as i32, flags()).is_ok() {
            removed += 1;
        }
    }
    Swept {
        programs: removed,
        clsact,
    }
}

/// What [`sweep_leftovers`] removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Swept {
    /// Programs (tc filters and XDP).
    pub programs: usize,
    /// The clsact qdisc those filters were on, empty without them.
    pub clsact: bool,
}

impl Swept {
    /// What to add to the count of programs removed.
    pub fn qdisc_note(&self) -> &'static str {
        if self.clsact {
            ", and the clsact qdisc it left empty"
        } else {
            ""
        }
    }
}

fn program_name(id: u32) -> Option<String> {
    libbpf_rs::query::ProgInfoIter::default()
        .find(|p| p.id == id)
        .map(|p| p.name.to_string_lossy().into_owned())
}

/// True if some process has a descriptor for BPF program `id` (fdinfo says `prog_id:`).
fn held_by_a_process(id: u32) -> bool {
    let needle = format!("prog_id:\t{id}\n");
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return false;
    };
    procs
        .filter_map(|p| p.ok())
        .filter(|p| {
            p.file_name()
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_digit())
        })
        .filter_map(|p| std::fs::read_dir(p.path().join("fdinfo")).ok())
        .flat_map(|fds| fds.filter_map(|f| f.ok()))
        .any(|f| std::fs::read_to_string(f.path()).is_ok_and(|info| info.contains(&needle)))
}

fn io_error(e: libbpf_rs::Error) -> io::Error {
    io::Error::other(e.to_string())
}

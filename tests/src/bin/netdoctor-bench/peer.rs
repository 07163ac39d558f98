//! The peer: NetObserv's tc flow programs (`netobserv-tc.o`, NetObserv's committed x86
//! object, from netobserv/netobserv-ebpf-agent `pkg/ebpf/bpf_x86_bpfel.o`), measured on the
//! same packets in the same runs as netdoctor and the floor. The project does not contain
//! the object: it is loaded from `--peer DIR` (default `../shared/peer`, beside the
//! repository), and the comparison is skipped, said in one line, when it is absent.
//!
//! Loaded the way the shared `tcload.c` loads it: only the two flow programs, as tc
//! classifiers (their sections are the legacy "classifier/..."), with the maps NetObserv's
//! own loader sizes at run time (declared with 0 entries) given 65,536 entries (ring
//! buffers 1 MiB), its pinned maps under a private bpffs directory. It is attached with tcx
//! links *behind* the floor and netdoctor (order: floor, netdoctor, NetObserv): its programs
//! return TC_ACT_OK, which ends a tcx chain, so it must run last. It therefore runs on
//! headers netdoctor has already brought into cache: the comparison favours the peer.

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use libbpf_rs::{libbpf_sys, MapType, Object, ObjectBuilder, ProgramType};
use netdoctor_lab::bpf::link_create;
use netdoctor_lab::Netns;

use crate::packet::run::Hook;

/// The object's file name in the peer directory.
pub(crate) const OBJECT: &str = "netobserv-tc.o";
const INGRESS: &str = "tc_ingress_flow_parse";
const EGRESS: &str = "tc_egress_flow_parse";

/// NetObserv's loaded tc programs.
pub(crate) struct Peer {
    object: Object,
    pin_dir: PathBuf,
    pub(crate) tc_in_id: u32,
    pub(crate) tc_out_id: u32,
}

impl std::fmt::Debug for Peer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Peer")
            .field("tc_in_id", &self.tc_in_id)
            .field("tc_out_id", &self.tc_out_id)
            .finish()
    }
}

impl Peer {
    /// Loads the peer from `dir`; `None` when the object is not there.
    pub(crate) fn load(dir: &Path) -> Result<Option<Peer>> {
        let path = dir.join(OBJECT);
        if !path.is_file() {
            return Ok(None);
        }
        let bpffs = Path::new("/sys/fs/bpf");
        if !is_bpffs(bpffs) {
            nix::mount::mount(
                Some("bpf"),
                bpffs,
                Some("bpf"),
                nix::mount::MsFlags::empty(),
                None::<&str>,
            )
            .context("mounting bpffs for the peer's pinned maps")?;
        }
        let pin_dir = bpffs.join(format!("netdoctor-bench-peer-{}", std::process::id()));
        std::fs::create_dir_all(&pin_dir)
            .with_context(|| format!("creating {}", pin_dir.display()))?;
        let mut builder = ObjectBuilder::default();
        builder.pin_root_path(&pin_dir)?;
        let mut open = builder
            .open_file(&path)
            .with_context(|| format!("opening {}", path.display()))?;
        for mut prog in open.progs_mut() {
            let want = prog.name() == INGRESS || prog.name() == EGRESS;
            prog.set_autoload(want);
            if want {
                prog.set_prog_type(ProgramType::SchedCls);
            }
        }
        for mut map in open.maps_mut() {
            if map.max_entries() == 0 {
                let n = if map.map_type() == MapType::RingBuf {
                    1 << 20
                } else {
                    65_536
                };
                map.set_max_entries(n)?;
            }
        }
        let object = open
            .load()
            .with_context(|| format!("loading {}", path.display()))?;
        let id = |name: &str| -> Result<u32> {
            let prog = object
                .progs()
                .find(|p| p.name() == name)
                .with_context(|| format!("{name} in {}", path.display()))?;
            Ok(libbpf_rs::Program::id_from_fd(prog.as_fd())?)
        };
        let (tc_in_id, tc_out_id) = (id(INGRESS)?, id(EGRESS)?);
        Ok(Some(Peer {
            object,
            pin_dir,
            tc_in_id,
            tc_out_id,
        }))
    }

    pub(crate) fn id(&self, hook: Hook) -> Option<u32> {
        match hook {
            Hook::TcIn => Some(self.tc_in_id),
            Hook::TcOut => Some(self.tc_out_id),
            Hook::Xdp => None,
        }
    }

    /// Attaches the peer's programs on the tc `hooks` of the watched interface, appended to
    /// the tcx chains (behind the floor and netdoctor); they stay attached while the
    /// returned descriptors are open.
    pub(crate) fn attach(&self, ns: &Netns, ifindex: u32, hooks: &[Hook]) -> Result<Vec<OwnedFd>> {
        let fd = |name: &str| {
            self.object
                .progs()
                .find(|p| p.name() == name)
                .map(|p| p.as_fd().as_raw_fd())
        };
        let plan: Vec<(i32, u32)> = hooks
            .iter()
            .filter_map(|h| match h {
                Hook::TcIn => fd(INGRESS).map(|f| (f, libbpf_sys::BPF_TCX_INGRESS)),
                Hook::TcOut => fd(EGRESS).map(|f| (f, libbpf_sys::BPF_TCX_EGRESS)),
                Hook::Xdp => None,
            })
            .collect();
        // The descriptors belong to `self.object`, which outlives this call.
        ns.run_in(move || -> Result<Vec<OwnedFd>> {
            plan.iter()
                .map(|&(fd, attach_type)| {
                    link_create(fd, ifindex, attach_type, 0)
                        .context("attaching NetObserv's program")
                })
                .collect()
        })?
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        // The maps libbpf pinned for the peer: nothing of it outlives the benchmark.
        if let Ok(entries) = std::fs::read_dir(&self.pin_dir) {
            for e in entries.flatten() {
                let _ = std::fs::remove_file(e.path());
            }
        }
        let _ = std::fs::remove_dir(&self.pin_dir);
    }
}

fn is_bpffs(path: &Path) -> bool {
    const BPF_FS_MAGIC: i64 = 0xcafe_4a11;
    nix::sys::statfs::statfs(path).is_ok_and(|s| s.filesystem_type().0 == BPF_FS_MAGIC)
}

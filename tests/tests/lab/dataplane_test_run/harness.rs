//! The harness every group of cases runs on: one loaded [`Dataplane`], its maps emptied and
//! the loopback watched again before each case, the cases' failures reported together; test
//! runs of its programs; and what the tests read back (counters of the loopback).
//!
//! The netdoctor-free pieces (the test-run call, what the kernel refuses, map clearing)
//! live in the lab crate's `bpf` module; this module puts netdoctor's loader in front of
//! them.

use std::io;
use std::mem::MaybeUninit;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::fd::{AsFd, AsRawFd};
use std::panic::AssertUnwindSafe;

use anyhow::{ensure, Context, Result};
use libbpf_rs::MapHandle;
use netdoctor::kernel::packet::counters::{DirCounters, IfaceCounters, SIZE_BUCKET_BOUNDS};
use netdoctor::kernel::packet::LinkType;
use netdoctor::kernel::packet::{Dataplane, Options, ProgramKind};
use netdoctor::kernel::views::Direction;
use netdoctor_lab::bpf::maps;
use netdoctor_lab::bpf::test_run::{self as bpf_run, ProgType};
use netdoctor_lab::packet::model;

/// ifindex the kernel gives test-run packets when no context names another device: the
/// loopback of the current network namespace.
pub(crate) const LO: u32 = 1;
/// A second watched ifindex that test runs never report (they always use the loopback).
pub(crate) const UNWATCHED_PROBE_IFINDEX: u32 = 4242;
pub(crate) const PROGRAMS: [ProgramKind; 3] = [
    ProgramKind::XdpIngress,
    ProgramKind::TcIngress,
    ProgramKind::TcEgress,
];
pub(crate) const TC_PROGRAMS: [ProgramKind; 2] = [ProgramKind::TcIngress, ProgramKind::TcEgress];
pub(crate) const BUCKETS: usize = SIZE_BUCKET_BOUNDS.len() + 1;

/// What kind of program `kind` is, for the test-run rules of [`bpf_run`].
fn prog_type(kind: ProgramKind) -> ProgType {
    match kind {
        ProgramKind::XdpIngress => ProgType::Xdp,
        ProgramKind::TcIngress | ProgramKind::TcEgress => ProgType::Tc,
    }
}

/// The verdict that lets a packet through: XDP_PASS (2) or TCX_NEXT (-1).
pub(crate) fn pass_code(kind: ProgramKind) -> u32 {
    prog_type(kind).pass_code()
}

pub(crate) fn direction(kind: ProgramKind) -> Direction {
    match kind {
        ProgramKind::XdpIngress | ProgramKind::TcIngress => Direction::Ingress,
        ProgramKind::TcEgress => Direction::Egress,
    }
}

pub(crate) fn is_tc(kind: ProgramKind) -> bool {
    kind != ProgramKind::XdpIngress
}

/// Whether the kernel's test-run code refuses `frame` for `kind` before the program runs
/// (see [`bpf_run::kernel_rejects`]).
pub(crate) fn kernel_rejects(kind: ProgramKind, frame: &[u8]) -> bool {
    bpf_run::kernel_rejects(prog_type(kind), frame)
}

/// An IPv4 TCP segment 10.0.0.1:`sport` -> 10.0.0.2:80 with `len` bytes of payload.
pub(crate) fn tcp_seg(sport: u16, seq: u32, flags: u8, len: usize) -> Vec<u8> {
    use netdoctor_lab::packet::builder::{self as pkt, Tcp};
    pkt::v4(
        pkt::TCP,
        &Tcp::new(sport, 80, seq, flags).build(&pkt::data(len)),
    )
}

/// Runs the rest of the calling thread on `cpu` (test runs execute on the caller's CPU).
pub(crate) fn pin(cpu: usize) -> Result<()> {
    use nix::sched::{sched_setaffinity, CpuSet};
    let mut set = CpuSet::new();
    set.set(cpu)?;
    sched_setaffinity(nix::unistd::Pid::from_raw(0), &set)?;
    Ok(())
}

/// Lets the calling thread run anywhere again.
pub(crate) fn unpin() -> Result<()> {
    use nix::sched::{sched_setaffinity, CpuSet};
    let mut set = CpuSet::new();
    for cpu in 0..CpuSet::count() {
        let _ = set.set(cpu);
    }
    sched_setaffinity(nix::unistd::Pid::from_raw(0), &set)?;
    Ok(())
}

/// Whether the thread can run on CPUs 0 and 1 (the cross-CPU cases need two).
pub(crate) fn two_cpus() -> bool {
    let ok = pin(1).is_ok() && pin(0).is_ok();
    let _ = unpin();
    ok
}

/// Loads a fresh data plane, watches the loopback with `mtu`/`link` and hands it to `f`.
pub(crate) fn with_dp<F>(options: Options, mtu: u32, link: LinkType, f: F) -> Result<()>
where
    F: FnOnce(&Dataplane<'_>) -> Result<()>,
{
    let mut storage = MaybeUninit::uninit();
    let dp = Dataplane::load(&mut storage, options).context("load data plane")?;
    dp.watch(LO, mtu, link).context("watch loopback")?;
    f(&dp)
}

/// The data plane's own maps, found through the XDP program's map ids (the loader keeps
/// them private), so a test can empty them between cases.
struct Maps {
    flows: MapHandle,
    ptb_events: MapHandle,
    /// The per-CPU flow cache in front of `flows` and the shared TCP sequence state: arrays,
    /// emptied by zeroing every entry.
    flow_cache: MapHandle,
    flow_seq: MapHandle,
    /// The local path's sequence entries (tc programs only).
    local_seq: MapHandle,
    /// WireGuard sessions received (the table; the rest is in the flow cache's slots) and
    /// handshakes sent (wg_path.bpf.h).
    wg_rx: MapHandle,
    wg_hs: MapHandle,
}

impl Maps {
    fn of(dp: &Dataplane<'_>) -> Result<Self> {
        let fd = dp.program(ProgramKind::XdpIngress).as_fd().as_raw_fd();
        let mut by_name = maps::program_maps(fd).context("our XDP program's maps")?;
        let tc = dp.program(ProgramKind::TcIngress).as_fd().as_raw_fd();
        by_name.extend(maps::program_maps(tc).context("our tc program's maps")?);
        let mut take = |name: &str| {
            by_name
                .remove(name)
                .with_context(|| format!("map {name} among {:?}", by_name.keys()))
        };
        Ok(Maps {
            flows: take("flows")?,
            ptb_events: take("ptb_events")?,
            flow_cache: take("flow_cache")?,
            flow_seq: take("flow_seq")?,
            local_seq: take("local_seq")?,
            wg_rx: take("wg_rx")?,
            wg_hs: take("wg_hs")?,
        })
    }

    /// Empties the hash maps and the flow cache and unwatches every interface a case may
    /// have watched (which frees and zeroes its counter slot): no interface watched, no
    /// flows, no too-big entries.
    fn clear(&self, dp: &Dataplane<'_>) -> Result<()> {
        for index in [LO, UNWATCHED_PROBE_IFINDEX] {
            dp.unwatch(index);
        }
        for map in [&self.flows, &self.ptb_events, &self.wg_rx, &self.wg_hs] {
            maps::delete_all(map)?;
        }
        maps::zero_array(&self.flow_cache)?;
        maps::zero_array(&self.flow_seq)?;
        maps::zero_array(&self.local_seq)?;
        ensure!(dp.flows()?.is_empty(), "flows left after clearing");
        Ok(())
    }
}

/// A test case: expects a data plane with empty maps, the loopback watched as given
/// (or not at all for `None`).
pub(crate) type Case = (
    &'static str,
    Option<(u32, LinkType)>,
    fn(&Dataplane<'_>) -> Result<()>,
);

/// Loads one data plane and runs every case on it in turn, each starting from empty maps, so
/// cases are as independent as separate loads would be. All cases run; the failures (errors
/// and panics) are reported together.
pub(crate) fn run_cases(options: Options, cases: &[Case]) -> Result<()> {
    let mut storage = MaybeUninit::uninit();
    let dp = Dataplane::load(&mut storage, options).context("load data plane")?;
    let maps = Maps::of(&dp)?;
    let mut failures = Vec::new();
    for (name, watch, case) in cases {
        maps.clear(&dp)?;
        if let Some((mtu, link)) = watch {
            dp.watch(LO, *mtu, *link)?;
        }
        match std::panic::catch_unwind(AssertUnwindSafe(|| case(&dp))) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => failures.push(format!("case {name}: {e:#}")),
            Err(panic) => {
                let msg = panic
                    .downcast_ref::<String>()
                    .map(String::as_str)
                    .or_else(|| panic.downcast_ref::<&str>().copied())
                    .unwrap_or("(non-string panic)");
                failures.push(format!("case {name} panicked: {msg}"));
            }
        }
    }
    ensure!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
    Ok(())
}

pub(crate) const ETHER_1500: Option<(u32, LinkType)> = Some((1500, LinkType::Ether));

/// One BPF_PROG_TEST_RUN (repeat 0 = one run) of `kind`; returns the program's return value,
/// or the kernel's refusal as its errno.
pub(crate) fn test_run(
    dp: &Dataplane<'_>,
    kind: ProgramKind,
    data: &[u8],
    ctx: Option<&[u8]>,
) -> io::Result<u32> {
    test_run_repeat(dp, kind, data, ctx, 0)
}

/// [`test_run`] with `repeat` runs of the program on the same input in one call.
pub(crate) fn test_run_repeat(
    dp: &Dataplane<'_>,
    kind: ProgramKind,
    data: &[u8],
    ctx: Option<&[u8]>,
    repeat: u32,
) -> io::Result<u32> {
    let fd = dp.program(kind).as_fd().as_raw_fd();
    Ok(bpf_run::test_run(fd, data, ctx, repeat)?.retval)
}

/// Runs `kind` once on `data` (with an optional context) and checks the verdict is "pass".
pub(crate) fn run_ctx(
    dp: &Dataplane<'_>,
    kind: ProgramKind,
    data: &[u8],
    ctx: Option<&[u8]>,
) -> Result<()> {
    let ret = test_run(dp, kind, data, ctx)
        .with_context(|| format!("{kind:?}: test_run of {} bytes", data.len()))?;
    ensure!(
        ret == pass_code(kind),
        "{kind:?} returned {ret:#x} (want {:#x}) for {data:02x?}",
        pass_code(kind),
    );
    Ok(())
}

pub(crate) fn run(dp: &Dataplane<'_>, kind: ProgramKind, data: &[u8]) -> Result<()> {
    run_ctx(dp, kind, data, None)
}

pub(crate) fn zero_dir() -> DirCounters {
    DirCounters {
        size_buckets: vec![0; BUCKETS],
        ..Default::default()
    }
}

/// Size bucket of an IP length, as `size_bucket()` in packet.bpf.c.
pub(crate) fn bucket(ip_len: u32) -> usize {
    model::size_bucket(&SIZE_BUCKET_BOUNDS, ip_len)
}

pub(crate) fn counters(dp: &Dataplane<'_>) -> Result<IfaceCounters> {
    dp.counters(LO)?.context("loopback is watched")
}

pub(crate) fn dir_of(c: &IfaceCounters, dir: Direction) -> &DirCounters {
    match dir {
        Direction::Ingress => &c.ingress,
        Direction::Egress => &c.egress,
    }
}

// Addresses used throughout (the packet builder's defaults).
pub(crate) const A: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
pub(crate) const B: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));
pub(crate) const A6: IpAddr = IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1));
pub(crate) const B6: IpAddr = IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2));
pub(crate) const V4_ANY: IpAddr = IpAddr::V4(Ipv4Addr::UNSPECIFIED);
pub(crate) const V6_ANY: IpAddr = IpAddr::V6(Ipv6Addr::UNSPECIFIED);

pub(crate) fn v4(last: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(10, 0, 0, last))
}

pub(crate) fn v6(last: u16) -> IpAddr {
    IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, last))
}

pub(crate) fn v4_octets(a: IpAddr) -> [u8; 4] {
    match a {
        IpAddr::V4(a) => a.octets(),
        IpAddr::V6(_) => [0; 4],
    }
}

pub(crate) fn v6_octets(a: IpAddr) -> [u8; 16] {
    match a {
        IpAddr::V6(a) => a.octets(),
        IpAddr::V4(_) => [0; 16],
    }
}

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

use std::collections::BTreeMap;
use std::io::ErrorKind;
use std::mem::MaybeUninit;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::fd::{AsFd, AsRawFd};
use std::panic::AssertUnwindSafe;

use anyhow::{ensure, Context, Result};
use libbpf_rs::query::{ProgInfoIter, ProgInfoQueryOptions};
use libbpf_rs::{libbpf_sys, MapCore, MapFlags, MapHandle};
use netdoctor::kernel::packet::counters::{DirCounters, IfaceCounters, SIZE_BUCKET_BOUNDS};
use netdoctor::kernel::packet::flows::{Flow, WireguardMessages};
use netdoctor::kernel::packet::too_big::TooBig;
use netdoctor::kernel::packet::LinkType;
use netdoctor::kernel::packet::{Dataplane, Options, ProgramKind, TunnelPort};
use netdoctor::kernel::views::{Direction, Encap};
use netdoctor_lab::ci;

use pkt::{Ext, Ipv4, Ipv6, Tcp};

// ---------------------------------------------------------------------------------------------
// Harness
// ---------------------------------------------------------------------------------------------

/// ifindex the kernel gives test-run packets when no context names another device: the
/// loopback of the current network namespace.
const LO: u32 = 1;
/// A second watched ifindex that test runs never report (they always use the loopback).
const UNWATCHED_PROBE_IFINDEX: u32 = 4242;
const XDP_PASS: u32 = 2;
/// tc programs return -1 (TCX_NEXT / TC_ACT_UNSPEC).
const TC_NEXT: u32 = u32::MAX;
const PROGRAMS: [ProgramKind; 3] = [
    ProgramKind::XdpIngress,
    ProgramKind::TcIngress,
    ProgramKind::TcEgress,
];
const TC_PROGRAMS: [ProgramKind; 2] = [ProgramKind::TcIngress, ProgramKind::TcEgress];
const BUCKETS: usize = SIZE_BUCKET_BOUNDS.len() + 1;

/// Root plus what loading BPF needs; skips on a laptop, panics under CI=true.
fn ready() -> bool {
    ci::require_root_or_skip() && ci::require_bpf_or_skip()
}

fn pass_code(kind: ProgramKind) -> u32 {
    match kind {
        ProgramKind::XdpIngress => XDP_PASS,
        ProgramKind::TcIngress | ProgramKind::TcEgress => TC_NEXT,
    }
}

fn direction(kind: ProgramKind) -> Direction {
    match kind {
        ProgramKind::XdpIngress | ProgramKind::TcIngress => Direction::Ingress,
        ProgramKind::TcEgress => Direction::Egress,
    }
}

fn is_tc(kind: ProgramKind) -> bool {
    kind != ProgramKind::XdpIngress
}

/// Whether the kernel's test-run code refuses `frame` before the program runs (EINVAL):
/// every hook needs at least an Ethernet header (14 bytes), and skb test runs on this kernel
/// (6.18, measured) also refuse frames whose EtherType is IPv4 or IPv6 but which are too
/// short for the fixed IPv4 (20) or IPv6 (40) header. VLAN-tagged frames are not checked.
fn kernel_rejects(kind: ProgramKind, frame: &[u8]) -> bool {
    if frame.len() < 14 {
        return true;
    }
    if !is_tc(kind) {
        return false;
    }
    match u16::from_be_bytes([frame[12], frame[13]]) {
        0x0800 => frame.len() < 14 + 20,
        0x86DD => frame.len() < 14 + 40,
        _ => false,
    }
}

/// Loads a fresh data plane, watches the loopback with `mtu`/`link` and hands it to `f`.
fn with_dp<F>(options: Options, mtu: u32, link: LinkType, f: F) -> Result<()>
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
}

/// The kernel id of one of `dp`'s programs, from its fd's fdinfo ("prog_id:\t<id>").
fn prog_id(dp: &Dataplane<'_>, kind: ProgramKind) -> Result<u32> {
    let fd = dp.program(kind).as_fd().as_raw_fd();
    let fdinfo = std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}"))?;
    Ok(fdinfo
        .lines()
        .find_map(|l| l.strip_prefix("prog_id:"))
        .context("prog_id in fdinfo")?
        .trim()
        .parse()?)
}

impl Maps {
    fn of(dp: &Dataplane<'_>) -> Result<Self> {
        let id = prog_id(dp, ProgramKind::XdpIngress)?;
        let opts = ProgInfoQueryOptions::default().include_map_ids(true);
        let info = ProgInfoIter::with_query_opts(opts)
            .find(|p| p.id == id)
            .context("our XDP program is loaded")?;
        let mut by_name = BTreeMap::new();
        for map_id in info.map_ids {
            let map = MapHandle::from_map_id(map_id)?;
            by_name.insert(map.name().to_string_lossy().into_owned(), map);
        }
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
        })
    }

    /// Zeroes every entry of an array map.
    fn zero_array(map: &MapHandle) -> Result<()> {
        let n = map.max_entries();
        let keys: Vec<u8> = (0..n).flat_map(u32::to_ne_bytes).collect();
        let values = vec![0u8; n as usize * map.value_size() as usize];
        map.update_batch(&keys, &values, n, MapFlags::ANY, MapFlags::ANY)?;
        Ok(())
    }

    /// Empties the hash maps and the flow cache and unwatches every interface a case may
    /// have watched (which frees and zeroes its counter slot): no interface watched, no
    /// flows, no too-big entries.
    fn clear(&self, dp: &Dataplane<'_>) -> Result<()> {
        for index in [LO, UNWATCHED_PROBE_IFINDEX] {
            dp.unwatch(index);
        }
        for map in [&self.flows, &self.ptb_events] {
            let keys: Vec<Vec<u8>> = map.keys().collect();
            for key in keys {
                map.delete(&key)?;
            }
            ensure!(map.keys().next().is_none(), "{:?} not empty", map.name());
        }
        Self::zero_array(&self.flow_cache)?;
        Self::zero_array(&self.flow_seq)?;
        ensure!(dp.flows()?.is_empty(), "flows left after clearing");
        Ok(())
    }
}

/// A test case: expects a data plane with empty maps, the loopback watched as given
/// (or not at all for `None`).
type Case = (
    &'static str,
    Option<(u32, LinkType)>,
    fn(&Dataplane<'_>) -> Result<()>,
);

/// Loads one data plane and runs every case on it in turn, each starting from empty maps, so
/// cases are as independent as separate loads would be. All cases run; the failures (errors
/// and panics) are reported together.
fn run_cases(options: Options, cases: &[Case]) -> Result<()> {
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

const ETHER_1500: Option<(u32, LinkType)> = Some((1500, LinkType::Ether));

/// One BPF_PROG_TEST_RUN (repeat 0 = one run) of `kind`; returns the program's return value.
///
/// Calls libbpf directly on the program's fd (rather than `ProgramMut::test_run`) so that a
/// refusal comes back as the kernel's errno in a `std::io::Error`, whose kind the tests check.
fn test_run(
    dp: &Dataplane<'_>,
    kind: ProgramKind,
    data: &[u8],
    ctx: Option<&[u8]>,
) -> std::io::Result<u32> {
    test_run_repeat(dp, kind, data, ctx, 0)
}

/// [`test_run`] with `repeat` runs of the program on the same input in one call.
fn test_run_repeat(
    dp: &Dataplane<'_>,
    kind: ProgramKind,
    data: &[u8],
    ctx: Option<&[u8]>,
    repeat: i32,
) -> std::io::Result<u32> {
    let mut opts = libbpf_sys::bpf_test_run_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_test_run_opts>() as _,
        data_in: data.as_ptr().cast(),
        data_size_in: u32::try_from(data.len()).expect("test input fits in u32"),
        repeat,
        ..Default::default()
    };
    if let Some(ctx) = ctx {
        opts.ctx_in = ctx.as_ptr().cast();
        opts.ctx_size_in = u32::try_from(ctx.len()).expect("context fits in u32");
    }
    let fd = dp.program(kind).as_fd().as_raw_fd();
    // SAFETY: `opts` is a zero-initialised bpf_test_run_opts with its own size in `sz`; its
    // only pointers are `data_in`/`ctx_in`, which borrow `data`/`ctx` for the whole call, and
    // no output buffers are given, so libbpf and the kernel write into `opts` alone. `fd` is a
    // loaded program owned by `dp`, which outlives the call.
    let rc = unsafe { libbpf_sys::bpf_prog_test_run_opts(fd, &mut opts) };
    if rc < 0 {
        return Err(std::io::Error::from_raw_os_error(-rc));
    }
    Ok(opts.retval)
}

/// Runs `kind` once on `data` (with an optional context) and checks the verdict is "pass".
fn run_ctx(dp: &Dataplane<'_>, kind: ProgramKind, data: &[u8], ctx: Option<&[u8]>) -> Result<()> {
    let ret = test_run(dp, kind, data, ctx)
        .with_context(|| format!("{kind:?}: test_run of {} bytes", data.len()))?;
    ensure!(
        ret == pass_code(kind),
        "{kind:?} returned {ret:#x} (want {:#x}) for {data:02x?}",
        pass_code(kind),
    );
    Ok(())
}

fn run(dp: &Dataplane<'_>, kind: ProgramKind, data: &[u8]) -> Result<()> {
    run_ctx(dp, kind, data, None)
}

/// A `struct __sk_buff` context for a tc test run with GSO fields set (UAPI layout, see
/// ebpf/vmlinux/x86/vmlinux.h: gso_segs at offset 164, gso_size at 176, size 192).
fn skb_ctx(gso_segs: u32, gso_size: u32) -> Vec<u8> {
    let mut ctx = vec![0u8; 192];
    ctx[164..168].copy_from_slice(&gso_segs.to_ne_bytes());
    ctx[176..180].copy_from_slice(&gso_size.to_ne_bytes());
    ctx
}

fn zero_dir() -> DirCounters {
    DirCounters {
        size_buckets: vec![0; BUCKETS],
        ..Default::default()
    }
}

/// Size bucket of an IP length, as `size_bucket()` in packet.bpf.c.
fn bucket(ip_len: u32) -> usize {
    SIZE_BUCKET_BOUNDS
        .iter()
        .position(|&b| ip_len <= b)
        .unwrap_or(SIZE_BUCKET_BOUNDS.len())
}

fn counters(dp: &Dataplane<'_>) -> Result<IfaceCounters> {
    dp.counters(LO)?.context("loopback is watched")
}

fn dir_of(c: &IfaceCounters, dir: Direction) -> &DirCounters {
    match dir {
        Direction::Ingress => &c.ingress,
        Direction::Egress => &c.egress,
    }
}

type FlowId = (Direction, u8, IpAddr, u16, IpAddr, u16);
type PtbId = (Direction, IpAddr, u8, IpAddr, u16, IpAddr, u16);

fn flow_id(f: &Flow) -> FlowId {
    (
        f.direction,
        f.protocol,
        f.src,
        f.src_port,
        f.dst,
        f.dst_port,
    )
}

fn ptb_id(t: &TooBig) -> PtbId {
    (
        t.direction,
        t.from,
        t.protocol,
        t.src,
        t.src_port,
        t.dst,
        t.dst_port,
    )
}

/// All flows, timestamps checked for sanity and then zeroed so records compare exactly.
fn normalised_flows(dp: &Dataplane<'_>) -> Result<Vec<Flow>> {
    let mut flows = dp.flows()?;
    for f in &mut flows {
        ensure!(
            f.first_seen_ms > 0 && f.first_seen_ms <= f.last_seen_ms,
            "bad timestamps in {f:?}"
        );
        f.first_seen_ms = 0;
        f.last_seen_ms = 0;
    }
    flows.sort_by_key(flow_id);
    Ok(flows)
}

fn normalised_too_big(dp: &Dataplane<'_>) -> Result<Vec<TooBig>> {
    let mut all = dp.too_big()?;
    for t in &mut all {
        ensure!(t.last_seen_ms > 0, "no timestamp in {t:?}");
        t.last_seen_ms = 0;
    }
    all.sort_by_key(ptb_id);
    Ok(all)
}

/// A flow's identity without the direction: (protocol, src, sport, dst, dport).
type Key = (u8, IpAddr, u16, IpAddr, u16);

fn new_flow(dir: Direction, key: Key) -> Flow {
    Flow {
        ifindex: LO,
        direction: dir,
        protocol: key.0,
        src: key.1,
        src_port: key.2,
        dst: key.3,
        dst_port: key.4,
        packets: 0,
        segments: 0,
        bytes: 0,
        first_seen_ms: 0,
        last_seen_ms: 0,
        tcp_flags: 0,
        syn_mss: None,
        max_segment: 0,
        retransmits: 0,
        encap: Encap::None,
        wireguard: WireguardMessages::default(),
    }
}

/// Expected state of the loopback's counters, flows and too-big entries, built up while
/// sending frames through the current program (`kind`).
struct Expect<'a, 'obj> {
    dp: &'a Dataplane<'obj>,
    kind: ProgramKind,
    dirs: [DirCounters; 2],
    flows: BTreeMap<FlowId, Flow>,
    too_big: BTreeMap<PtbId, TooBig>,
}

impl<'a, 'obj> Expect<'a, 'obj> {
    fn new(dp: &'a Dataplane<'obj>) -> Self {
        Expect {
            dp,
            kind: ProgramKind::XdpIngress,
            dirs: [zero_dir(), zero_dir()],
            flows: BTreeMap::new(),
            too_big: BTreeMap::new(),
        }
    }

    /// Selects the program the next frames go through.
    fn on(&mut self, kind: ProgramKind) {
        self.kind = kind;
    }

    fn dir(&mut self) -> &mut DirCounters {
        &mut self.dirs[direction(self.kind) as usize]
    }

    /// Runs the program on `frame`; counts packets, segments and bytes.
    fn send(&mut self, frame: &[u8]) -> Result<()> {
        run(self.dp, self.kind, frame)?;
        let d = self.dir();
        d.packets += 1;
        d.segments += 1;
        d.bytes += frame.len() as u64;
        Ok(())
    }

    /// A frame that is not IPv4/IPv6.
    fn non_ip(&mut self, frame: &[u8]) -> Result<()> {
        self.send(frame)?;
        self.dir().non_ip += 1;
        Ok(())
    }

    /// A frame whose L2/L3 headers are cut or invalid: counted truncated, nothing else.
    fn truncated(&mut self, frame: &[u8]) -> Result<()> {
        self.send(frame)?;
        self.dir().truncated += 1;
        Ok(())
    }

    /// An IP packet of (effective) IP length `ip_len`: a size bucket and a flow record.
    fn ip(&mut self, frame: &[u8], ip_len: u32, key: Key) -> Result<&mut Flow> {
        self.send(frame)?;
        self.dir().size_buckets[bucket(ip_len)] += 1;
        let f = self.flow(key);
        f.packets += 1;
        f.segments += 1;
        f.bytes += frame.len() as u64;
        f.max_segment = f.max_segment.max(ip_len.min(0xffff) as u16);
        Ok(f)
    }

    /// tc ingress after XDP: both count ingress into the same flow record, so a TCP segment
    /// with data that XDP already saw is, by the sequence rule, seen again (retransmitted).
    fn seen_again(&mut self, key: Key) {
        if self.kind == ProgramKind::TcIngress {
            self.flow(key).retransmits += 1;
        }
    }

    fn flow(&mut self, key: Key) -> &mut Flow {
        let dir = direction(self.kind);
        self.flows
            .entry((dir, key.0, key.1, key.2, key.3, key.4))
            .or_insert_with(|| new_flow(dir, key))
    }

    /// One more too-big message from `from` announcing `mtu`, quoting `inner`.
    fn ptb(&mut self, from: IpAddr, mtu: u32, proto: u8, inner: (IpAddr, u16, IpAddr, u16)) {
        let dir = direction(self.kind);
        let t = self
            .too_big
            .entry((dir, from, proto, inner.0, inner.1, inner.2, inner.3))
            .or_insert_with(|| TooBig {
                ifindex: LO,
                direction: dir,
                from,
                mtu: 0,
                count: 0,
                last_seen_ms: 0,
                protocol: proto,
                src: inner.0,
                src_port: inner.1,
                dst: inner.2,
                dst_port: inner.3,
            });
        t.count += 1;
        t.mtu = mtu;
    }

    /// Compares both directions' counters, every flow and every too-big entry.
    fn check(&self) -> Result<()> {
        let c = counters(self.dp)?;
        assert_eq!(
            c.ingress, self.dirs[0],
            "ingress counters after {:?}",
            self.kind
        );
        assert_eq!(
            c.egress, self.dirs[1],
            "egress counters after {:?}",
            self.kind
        );
        let got = normalised_flows(self.dp)?;
        let want: Vec<Flow> = self.flows.values().cloned().collect();
        assert_eq!(got, want, "flows after {:?}", self.kind);
        let got = normalised_too_big(self.dp)?;
        let want: Vec<TooBig> = self.too_big.values().cloned().collect();
        assert_eq!(got, want, "too-big entries after {:?}", self.kind);
        Ok(())
    }
}

// Addresses used throughout.
const A: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
const B: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));
const A6: IpAddr = IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1));
const B6: IpAddr = IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2));
const V4_ANY: IpAddr = IpAddr::V4(Ipv4Addr::UNSPECIFIED);
const V6_ANY: IpAddr = IpAddr::V6(Ipv6Addr::UNSPECIFIED);

fn v4(last: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(10, 0, 0, last))
}

fn v6(last: u16) -> IpAddr {
    IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, last))
}

fn v4_octets(a: IpAddr) -> [u8; 4] {
    match a {
        IpAddr::V4(a) => a.octets(),
        IpAddr::V6(_) => [0; 4],
    }
}

fn v6_octets(a: IpAddr) -> [u8; 16] {
    match a {
        IpAddr::V6(a) => a.octets(),
        IpAddr::V4(_) => [0; 16],
    }
}

// ---------------------------------------------------------------------------------------------
// Packet builder
// ---------------------------------------------------------------------------------------------

mod pkt {
    //! Minimal packet construction. Checksums are left zero: the programs never read them.

    pub const ETH_IPV4: u16 = 0x0800;
    pub const ETH_IPV6: u16 = 0x86DD;
    pub const ETH_ARP: u16 = 0x0806;
    pub const ETH_LLDP: u16 = 0x88CC;
    pub const VLAN_Q: u16 = 0x8100;
    pub const VLAN_AD: u16 = 0x88A8;

    pub const ICMP: u8 = 1;
    pub const TCP: u8 = 6;
    pub const UDP: u8 = 17;
    pub const ICMPV6: u8 = 58;
    pub const HOPOPTS: u8 = 0;
    pub const ROUTING: u8 = 43;
    pub const FRAGMENT: u8 = 44;
    pub const NONXT: u8 = 59;
    pub const DSTOPTS: u8 = 60;

    pub const FIN: u8 = 0x01;
    pub const SYN: u8 = 0x02;
    pub const PSH: u8 = 0x08;
    pub const ACK: u8 = 0x10;

    /// Ethernet frame (no VLAN).
    pub fn eth(ethertype: u16, payload: &[u8]) -> Vec<u8> {
        eth_tagged(&[], ethertype, payload)
    }

    /// Ethernet frame with one VLAN tag per TPID in `tpids`, outermost first.
    pub fn eth_tagged(tpids: &[u16], ethertype: u16, payload: &[u8]) -> Vec<u8> {
        let mut f = vec![0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01];
        let types: Vec<u16> = tpids.iter().copied().chain([ethertype]).collect();
        f.extend(types[0].to_be_bytes());
        for (i, t) in types.iter().enumerate().skip(1) {
            f.extend((100 + i as u16).to_be_bytes()); // TCI: VLAN id
            f.extend(t.to_be_bytes());
        }
        f.extend(payload);
        f
    }

    #[derive(Clone, Debug)]
    pub struct Ipv4 {
        pub src: [u8; 4],
        pub dst: [u8; 4],
        pub proto: u8,
        pub df: bool,
        pub mf: bool,
        /// In 8-byte units.
        pub frag_offset: u16,
        /// Padded with zeros (EOL) to a multiple of 4.
        pub options: Vec<u8>,
        /// Overrides the IHL computed from the options.
        pub ihl: Option<u8>,
        /// Overrides the total length computed from header + payload.
        pub tot_len: Option<u16>,
        pub version: u8,
    }

    impl Ipv4 {
        pub fn new(proto: u8) -> Self {
            Ipv4 {
                src: [10, 0, 0, 1],
                dst: [10, 0, 0, 2],
                proto,
                df: false,
                mf: false,
                frag_offset: 0,
                options: Vec::new(),
                ihl: None,
                tot_len: None,
                version: 4,
            }
        }

        pub fn build(&self, payload: &[u8]) -> Vec<u8> {
            let mut opts = self.options.clone();
            while opts.len() % 4 != 0 {
                opts.push(0);
            }
            let hlen = 20 + opts.len();
            let ihl = self.ihl.unwrap_or((hlen / 4) as u8);
            let tot = self.tot_len.unwrap_or((hlen + payload.len()) as u16);
            let frag = (u16::from(self.df) << 14)
                | (u16::from(self.mf) << 13)
                | (self.frag_offset & 0x1fff);
            let mut h = vec![(self.version << 4) | (ihl & 0xf), 0];
            h.extend(tot.to_be_bytes());
            h.extend([0x12, 0x34]);
            h.extend(frag.to_be_bytes());
            h.extend([64, self.proto, 0, 0]);
            h.extend(self.src);
            h.extend(self.dst);
            h.extend(opts);
            h.extend(payload);
            h
        }
    }

    /// An IPv6 extension header.
    #[derive(Clone, Copy, Debug)]
    pub enum Ext {
        /// Hop-by-hop options with this Hdr Ext Len (8-byte units beyond the first 8).
        Hop(u8),
        Routing(u8),
        Dest(u8),
        /// Fragment header: offset in 8-byte units, M flag.
        Frag {
            offset: u16,
            more: bool,
        },
    }

    impl Ext {
        pub fn kind(self) -> u8 {
            match self {
                Ext::Hop(_) => HOPOPTS,
                Ext::Routing(_) => ROUTING,
                Ext::Dest(_) => DSTOPTS,
                Ext::Frag { .. } => FRAGMENT,
            }
        }
    }

    #[derive(Clone, Debug)]
    pub struct Ipv6 {
        pub src: [u8; 16],
        pub dst: [u8; 16],
        pub exts: Vec<Ext>,
        /// Overrides the payload length computed from extension headers + payload.
        pub payload_len: Option<u16>,
        pub version: u8,
    }

    impl Ipv6 {
        /// fd00::1 -> fd00::2, no extension headers.
        pub fn new() -> Self {
            let mut src = [0u8; 16];
            src[0] = 0xfd;
            src[15] = 1;
            let mut dst = src;
            dst[15] = 2;
            Ipv6 {
                src,
                dst,
                exts: Vec::new(),
                payload_len: None,
                version: 6,
            }
        }

        pub fn exts(mut self, exts: &[Ext]) -> Self {
            self.exts = exts.to_vec();
            self
        }

        /// The packet: fixed header, extension headers (chained to `proto`), payload.
        pub fn build(&self, proto: u8, payload: &[u8]) -> Vec<u8> {
            let mut body = Vec::new();
            for (i, e) in self.exts.iter().enumerate() {
                let next = self.exts.get(i + 1).map_or(proto, |n| n.kind());
                match *e {
                    Ext::Hop(l) | Ext::Routing(l) | Ext::Dest(l) => {
                        body.extend([next, l]);
                        body.extend(vec![0u8; (usize::from(l) + 1) * 8 - 2]);
                    }
                    Ext::Frag { offset, more } => {
                        body.extend([next, 0]);
                        body.extend(((offset << 3) | u16::from(more)).to_be_bytes());
                        body.extend([0xde, 0xad, 0xbe, 0xef]);
                    }
                }
            }
            body.extend(payload);
            let first = self.exts.first().map_or(proto, |e| e.kind());
            let plen = self.payload_len.unwrap_or(body.len() as u16);
            let mut h = vec![self.version << 4, 0, 0, 0];
            h.extend(plen.to_be_bytes());
            h.extend([first, 64]);
            h.extend(self.src);
            h.extend(self.dst);
            h.extend(body);
            h
        }
    }

    #[derive(Clone, Debug)]
    pub struct Tcp {
        pub sport: u16,
        pub dport: u16,
        pub seq: u32,
        pub flags: u8,
        /// Padded with zeros (EOL) to a multiple of 4.
        pub options: Vec<u8>,
        /// Overrides the data offset computed from the options.
        pub doff: Option<u8>,
    }

    impl Tcp {
        pub fn new(sport: u16, dport: u16, seq: u32, flags: u8) -> Self {
            Tcp {
                sport,
                dport,
                seq,
                flags,
                options: Vec::new(),
                doff: None,
            }
        }

        pub fn opts(mut self, options: &[u8]) -> Self {
            self.options = options.to_vec();
            self
        }

        pub fn build(&self, payload: &[u8]) -> Vec<u8> {
            let mut opts = self.options.clone();
            while opts.len() % 4 != 0 {
                opts.push(0);
            }
            let doff = self.doff.unwrap_or(((20 + opts.len()) / 4) as u8);
            let mut h = Vec::with_capacity(20 + opts.len() + payload.len());
            h.extend(self.sport.to_be_bytes());
            h.extend(self.dport.to_be_bytes());
            h.extend(self.seq.to_be_bytes());
            h.extend(0u32.to_be_bytes());
            h.extend([doff << 4, self.flags, 0xff, 0xff, 0, 0, 0, 0]);
            h.extend(opts);
            h.extend(payload);
            h
        }
    }

    pub fn udp(sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
        let mut h = Vec::with_capacity(8 + payload.len());
        h.extend(sport.to_be_bytes());
        h.extend(dport.to_be_bytes());
        h.extend(((8 + payload.len()) as u16).to_be_bytes());
        h.extend([0, 0]);
        h.extend(payload);
        h
    }

    /// ICMP / ICMPv6: type, code, checksum, 4 type-specific bytes, body.
    pub fn icmp(ty: u8, code: u8, rest: [u8; 4], body: &[u8]) -> Vec<u8> {
        let mut h = vec![ty, code, 0, 0];
        h.extend(rest);
        h.extend(body);
        h
    }

    /// Ethernet + IPv4 (10.0.0.1 -> 10.0.0.2) + `l4`.
    pub fn v4(proto: u8, l4: &[u8]) -> Vec<u8> {
        eth(ETH_IPV4, &Ipv4::new(proto).build(l4))
    }

    /// Ethernet + IPv6 (fd00::1 -> fd00::2) + `l4`.
    pub fn v6(proto: u8, l4: &[u8]) -> Vec<u8> {
        eth(ETH_IPV6, &Ipv6::new().build(proto, l4))
    }

    /// A payload of `n` bytes that no classifier recognises (first byte 0x55).
    pub fn data(n: usize) -> Vec<u8> {
        vec![0x55; n]
    }

    /// A WireGuard-shaped UDP payload: type, three zero bytes, filler up to `len`.
    pub fn wg(ty: u8, len: usize) -> Vec<u8> {
        let mut p = vec![0xaa; len];
        let head = [ty, 0, 0, 0];
        let n = len.min(4);
        p[..n].copy_from_slice(&head[..n]);
        p
    }
}

// ---------------------------------------------------------------------------------------------
// 0. Hooks, ifindex, direction, rejected inputs
// ---------------------------------------------------------------------------------------------

/// Test runs report the loopback (ifindex 1) in every hook: watching ifindex 1 moves its
/// counters, in the program's direction only; another watched ifindex stays untouched.
fn hooks_count_loopback_ifindex_in_their_direction(dp: &Dataplane<'_>) -> Result<()> {
    if let Ok(idx) = std::fs::read_to_string("/sys/class/net/lo/ifindex") {
        assert_eq!(idx.trim(), "1", "loopback of this namespace");
    }
    dp.watch(UNWATCHED_PROBE_IFINDEX, 1500, LinkType::Ether)?;
    let mut e = Expect::new(dp);
    udp_through_every_program(&mut e, || {
        let untouched = dp
            .counters(UNWATCHED_PROBE_IFINDEX)?
            .context("second interface watched")?;
        assert_eq!(untouched.ingress, zero_dir());
        assert_eq!(untouched.egress, zero_dir());
        Ok(())
    })?;
    let c = counters(dp)?;
    assert_eq!((c.ingress.packets, c.egress.packets), (2, 1));
    // No interface has index 0; the flow cache takes a key with ifindex 0 for an empty slot.
    assert!(matches!(
        dp.watch(0, 1500, LinkType::Ether),
        Err(netdoctor::kernel::Error::NoInterfaceIndex)
    ));
    Ok(())
}

/// Packets on an interface without an `iface_stats` entry are passed and ignored entirely.
fn unwatched_interfaces_are_not_counted(dp: &Dataplane<'_>) -> Result<()> {
    let quote = Ipv4::new(pkt::TCP).build(&Tcp::new(1, 2, 3, 0).build(&[])[..8]);
    let frames = [
        pkt::v4(
            pkt::TCP,
            &Tcp::new(40000, 443, 1, pkt::SYN)
                .opts(&[2, 4, 5, 0xb4])
                .build(&[]),
        ),
        pkt::eth(pkt::ETH_ARP, &[0; 28]),
        pkt::v4(pkt::ICMP, &pkt::icmp(3, 4, [0, 0, 5, 0], &quote)),
    ];
    for kind in PROGRAMS {
        for frame in &frames {
            run(dp, kind, frame)?;
        }
    }
    assert_eq!(dp.counters(LO)?, None);
    assert!(dp.flows()?.is_empty());
    assert!(dp.too_big()?.is_empty());
    Ok(())
}

/// An interface finds its counters in slot ifindex % 256 unless another watched interface
/// took that slot first; then through `iface_slot` (ifindex below 65536) or `iface_slot_big`.
/// Either way each interface counts only its own packets, and an interface keeps its slot
/// and counters when the others go.
fn slot_taken_by_same_remainder_falls_back(dp: &Dataplane<'_>) -> Result<()> {
    let same_remainder = [LO + 256, LO + 65536];
    for index in same_remainder {
        dp.watch(index, 1500, LinkType::Ether)?;
    }
    dp.watch(LO, 1500, LinkType::Ether)?;
    let mut e = Expect::new(dp);
    udp_through_every_program(&mut e, || Ok(()))?;
    for index in same_remainder {
        let c = dp.counters(index)?.context("watched")?;
        assert_eq!(
            (c.ingress, c.egress),
            (zero_dir(), zero_dir()),
            "ifindex {index}"
        );
        dp.unwatch(index);
    }
    udp_through_every_program(&mut e, || Ok(()))
}

/// One small UDP packet through every program, each followed by a check of every counter
/// and flow record and by `after`.
fn udp_through_every_program(
    e: &mut Expect<'_, '_>,
    mut after: impl FnMut() -> Result<()>,
) -> Result<()> {
    let frame = pkt::v4(pkt::UDP, &pkt::udp(5000, 6000, &pkt::data(10)));
    for kind in PROGRAMS {
        e.on(kind);
        e.ip(&frame, 38, (pkt::UDP, A, 5000, B, 6000))?;
        e.check()?;
        after()?;
    }
    Ok(())
}

/// Inputs the kernel refuses (see [`kernel_rejects`]) answer EINVAL and move no counter;
/// the shortest accepted frames are counted.
fn inputs_shorter_than_headers_are_rejected_uncounted(dp: &Dataplane<'_>) -> Result<()> {
    let v4 = pkt::v4(pkt::UDP, &pkt::udp(1, 2, &pkt::data(40)));
    let v6 = pkt::v6(pkt::UDP, &pkt::udp(1, 2, &pkt::data(40)));
    for kind in PROGRAMS {
        let limit = |full: usize| if is_tc(kind) { full } else { 14 };
        for (frame, below) in [(&v4, limit(34)), (&v6, limit(54))] {
            for len in 0..below {
                assert!(kernel_rejects(kind, &frame[..len]));
                let err = test_run(dp, kind, &frame[..len], None)
                    .expect_err("short input must be rejected");
                assert_eq!(err.kind(), ErrorKind::InvalidInput, "{kind:?} len {len}");
            }
        }
    }
    let c = counters(dp)?;
    assert_eq!(
        (c.ingress.clone(), c.egress.clone()),
        (zero_dir(), zero_dir())
    );

    let mut e = Expect::new(dp);
    for kind in PROGRAMS {
        e.on(kind);
        e.non_ip(&pkt::eth(pkt::ETH_ARP, &[]))?; // 14 bytes
        e.truncated(&pkt::eth_tagged(&[pkt::VLAN_Q], pkt::ETH_IPV4, &[]))?; // 18 bytes
        if is_tc(kind) {
            e.truncated(&pkt::eth(pkt::ETH_IPV4, &[0x44; 20]))?; // IHL 4, 34 bytes
        } else {
            e.truncated(&v4[..14])?;
            e.truncated(&v6[..53])?;
        }
        e.check()?;
    }
    // Raw IP: 14 bytes of an IPv4 header is the shortest accepted input.
    dp.watch(LO, 1500, LinkType::RawIp)?;
    for len in 0..14 {
        let err = test_run(dp, ProgramKind::XdpIngress, &v4[14..14 + len], None)
            .expect_err("short input must be rejected");
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
    }
    e.on(ProgramKind::XdpIngress);
    e.truncated(&v4[14..28])?;
    e.check()
}

// ---------------------------------------------------------------------------------------------
// 1. Protocols and link types
// ---------------------------------------------------------------------------------------------

fn ethernet_ipv4_tcp_udp_icmp_echo(dp: &Dataplane<'_>) -> Result<()> {
    let mut e = Expect::new(dp);
    let tcp = pkt::v4(
        pkt::TCP,
        &Tcp::new(40000, 443, 1, pkt::ACK | pkt::PSH).build(&pkt::data(100)),
    );
    assert_eq!(tcp.len(), 14 + 20 + 20 + 100);
    let udp = pkt::v4(pkt::UDP, &pkt::udp(5353, 53, &pkt::data(30)));
    let echo = pkt::v4(
        pkt::ICMP,
        &pkt::icmp(8, 0, [0x12, 0x34, 0, 1], &pkt::data(56)),
    );
    let mut ip = Ipv4::new(pkt::ICMP);
    ip.src = v4_octets(B);
    ip.dst = v4_octets(A);
    let reply = pkt::eth(
        pkt::ETH_IPV4,
        &ip.build(&pkt::icmp(0, 0, [0x12, 0x34, 0, 1], &pkt::data(56))),
    );
    let ttl = pkt::v4(pkt::ICMP, &pkt::icmp(11, 0, [0xff; 4], &pkt::data(28)));
    for kind in PROGRAMS {
        e.on(kind);
        e.ip(&tcp, 140, (pkt::TCP, A, 40000, B, 443))?.tcp_flags = pkt::ACK | pkt::PSH;
        e.seen_again((pkt::TCP, A, 40000, B, 443));
        e.ip(&udp, 58, (pkt::UDP, A, 5353, B, 53))?;
        // Echo: sport = type << 8 | code, dport = identifier.
        e.ip(&echo, 84, (pkt::ICMP, A, 0x0800, B, 0x1234))?;
        e.ip(&reply, 84, (pkt::ICMP, B, 0x0000, A, 0x1234))?;
        // Other ICMP (time exceeded): no identifier.
        e.ip(&ttl, 56, (pkt::ICMP, A, 0x0b00, B, 0))?;
        e.check()?;
    }
    Ok(())
}

fn ethernet_ipv6_tcp_udp_icmpv6_echo(dp: &Dataplane<'_>) -> Result<()> {
    let mut e = Expect::new(dp);
    let tcp = pkt::v6(
        pkt::TCP,
        &Tcp::new(40000, 443, 7, pkt::ACK).build(&pkt::data(100)),
    );
    assert_eq!(tcp.len(), 14 + 40 + 20 + 100);
    let udp = pkt::v6(pkt::UDP, &pkt::udp(5353, 53, &pkt::data(30)));
    let echo = pkt::v6(
        pkt::ICMPV6,
        &pkt::icmp(128, 0, [0x43, 0x21, 0, 1], &pkt::data(56)),
    );
    let reply = pkt::v6(
        pkt::ICMPV6,
        &pkt::icmp(129, 0, [0x43, 0x21, 0, 1], &pkt::data(56)),
    );
    let ns = pkt::v6(pkt::ICMPV6, &pkt::icmp(135, 0, [0; 4], &[0; 16]));
    for kind in PROGRAMS {
        e.on(kind);
        e.ip(&tcp, 160, (pkt::TCP, A6, 40000, B6, 443))?.tcp_flags = pkt::ACK;
        e.seen_again((pkt::TCP, A6, 40000, B6, 443));
        e.ip(&udp, 78, (pkt::UDP, A6, 5353, B6, 53))?;
        e.ip(&echo, 104, (pkt::ICMPV6, A6, 0x8000, B6, 0x4321))?;
        e.ip(&reply, 104, (pkt::ICMPV6, A6, 0x8100, B6, 0x4321))?;
        // Neighbour solicitation: no identifier.
        e.ip(&ns, 64, (pkt::ICMPV6, A6, 0x8700, B6, 0))?;
        e.check()?;
    }
    Ok(())
}

/// Raw-IP interfaces (wg, tun): the packet starts with the IP header. Only XDP test runs can
/// feed such packets (skb test runs always parse an Ethernet header).
fn raw_ip_ipv4_ipv6_via_xdp(dp: &Dataplane<'_>) -> Result<()> {
    let mut e = Expect::new(dp);
    let tcp = Ipv4::new(pkt::TCP).build(&Tcp::new(40000, 443, 1, pkt::ACK).build(&pkt::data(100)));
    e.ip(&tcp, 140, (pkt::TCP, A, 40000, B, 443))?.tcp_flags = pkt::ACK;
    let udp = Ipv6::new().build(pkt::UDP, &pkt::udp(51820, 51820, &pkt::wg(4, 32)));
    let f = e.ip(&udp, 80, (pkt::UDP, A6, 51820, B6, 51820))?;
    f.encap = Encap::Wireguard;
    f.wireguard.data = 1;
    let icmp = Ipv4::new(pkt::ICMP).build(&pkt::icmp(8, 0, [0, 9, 0, 1], &pkt::data(56)));
    e.ip(&icmp, 84, (pkt::ICMP, A, 0x0800, B, 9))?;
    // First nibble neither 4 nor 6.
    e.non_ip(&[0x00; 20])?;
    e.non_ip(&[0x50; 40])?;
    // An Ethernet frame on a raw-IP device: first byte 0x02 -> nibble 0 -> not IP.
    e.non_ip(&pkt::v4(pkt::UDP, &pkt::udp(1, 2, &[])))?;
    // IPv4 header cut at 19 bytes; IPv6 header cut at 39 bytes; IPv4 with IHL 4.
    e.truncated(&tcp[..19])?;
    e.truncated(&udp[..39])?;
    let mut bad = tcp.clone();
    bad[0] = 0x44;
    e.truncated(&bad)?;
    // Over the 1420 MTU: IPv6 always, IPv4 only with DF.
    let big6 = Ipv6::new().build(pkt::UDP, &pkt::udp(1, 2, &[0; 1373]));
    e.ip(&big6, 1421, (pkt::UDP, A6, 1, B6, 2))?;
    e.dir().df_over_mtu += 1;
    e.check()?;
    // The same bytes on an Ethernet interface are parsed from a MAC header: the bytes
    // at offset 12..14 of the IPv4 packet (source address 10.0.x.x) are no EtherType.
    dp.watch(LO, 1420, LinkType::Ether)?;
    e.non_ip(&tcp)?;
    e.check()
}

/// ARP, LLDP and 802.3/LLC frames are counted as non-IP and not parsed.
fn non_ip_frames_arp_lldp_llc(dp: &Dataplane<'_>) -> Result<()> {
    let mut e = Expect::new(dp);
    let mut arp = vec![0, 1, 8, 0, 6, 4, 0, 1];
    arp.extend([
        0x02, 0, 0, 0, 0, 1, 10, 0, 0, 1, 0, 0, 0, 0, 0, 0, 10, 0, 0, 2,
    ]);
    let arp = pkt::eth(pkt::ETH_ARP, &arp);
    assert_eq!(arp.len(), 42);
    for kind in PROGRAMS {
        e.on(kind);
        e.non_ip(&arp)?;
        e.non_ip(&pkt::eth(pkt::ETH_LLDP, &[0; 46]))?;
        // 802.3 length field 0x0026 + LLC.
        e.non_ip(&pkt::eth(0x0026, &[0x42, 0x42, 0x03, 0, 0, 0]))?;
        // Exactly an Ethernet header.
        e.non_ip(&pkt::eth(pkt::ETH_ARP, &[]))?;
        e.check()?;
    }
    Ok(())
}

/// EtherType 0x0000 on a complete frame, untagged or behind a VLAN tag, is an EtherType like
/// any other that is not IP: non-IP, not truncated.
fn ethertype_zero_is_non_ip(dp: &Dataplane<'_>) -> Result<()> {
    let mut e = Expect::new(dp);
    for kind in PROGRAMS {
        e.on(kind);
        e.non_ip(&pkt::eth(0x0000, &[0; 46]))?;
        e.non_ip(&pkt::eth_tagged(&[pkt::VLAN_Q], 0x0000, &[0; 42]))?;
        // Nothing after the EtherType.
        e.non_ip(&pkt::eth(0x0000, &[]))?;
        e.non_ip(&pkt::eth_tagged(&[pkt::VLAN_AD, pkt::VLAN_Q], 0x0000, &[]))?;
        e.check()?;
    }
    Ok(())
}

/// One 802.1Q tag, 802.1ad + 802.1Q (QinQ) and double 802.1Q are parsed; a third tag is past
/// ND_MAX_VLAN and leaves a VLAN EtherType, i.e. non-IP; a cut tag is truncated.
fn vlan_single_qinq_and_too_deep(dp: &Dataplane<'_>) -> Result<()> {
    let mut e = Expect::new(dp);
    let udp4 = Ipv4::new(pkt::UDP).build(&pkt::udp(5000, 6000, &pkt::data(30)));
    let tcp6 = Ipv6::new().build(
        pkt::TCP,
        &Tcp::new(1000, 22, 5, pkt::ACK).build(&pkt::data(20)),
    );
    let single = pkt::eth_tagged(&[pkt::VLAN_Q], pkt::ETH_IPV4, &udp4);
    assert_eq!(single.len(), 18 + 58);
    let qinq = pkt::eth_tagged(&[pkt::VLAN_AD, pkt::VLAN_Q], pkt::ETH_IPV6, &tcp6);
    let double_q = pkt::eth_tagged(&[pkt::VLAN_Q, pkt::VLAN_Q], pkt::ETH_IPV4, &udp4);
    let three = pkt::eth_tagged(
        &[pkt::VLAN_AD, pkt::VLAN_Q, pkt::VLAN_Q],
        pkt::ETH_IPV4,
        &udp4,
    );
    for kind in PROGRAMS {
        e.on(kind);
        e.ip(&single, 58, (pkt::UDP, A, 5000, B, 6000))?;
        e.ip(&qinq, 80, (pkt::TCP, A6, 1000, B6, 22))?.tcp_flags = pkt::ACK;
        e.seen_again((pkt::TCP, A6, 1000, B6, 22));
        e.ip(&double_q, 58, (pkt::UDP, A, 5000, B, 6000))?;
        e.non_ip(&pkt::eth_tagged(&[pkt::VLAN_Q], pkt::ETH_ARP, &[0; 28]))?;
        // Three tags: the parser stops after two with EtherType 0x8100 left.
        e.non_ip(&three)?;
        // Tag cut (16 bytes, EtherType 0x8100); QinQ whose inner tag is cut.
        e.truncated(&single[..16])?;
        e.truncated(&qinq[..20])?;
        // Tags complete, IP header cut.
        e.truncated(&single[..18 + 10])?;
        e.truncated(&qinq[..22 + 39])?;
        e.check()?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// 2. Malformed packets
// ---------------------------------------------------------------------------------------------

/// Headers cut before the transport layer: only `truncated` (no size bucket, no flow).
/// Untagged cuts inside the IP header are refused by skb test runs, so tc sees them tagged.
fn truncated_l2_l3_headers(dp: &Dataplane<'_>) -> Result<()> {
    let mut e = Expect::new(dp);
    let ip4 = Ipv4::new(pkt::UDP).build(&pkt::udp(1, 2, &pkt::data(20)));
    let ip6 = Ipv6::new().build(pkt::UDP, &pkt::udp(1, 2, &pkt::data(20)));
    let v4 = pkt::eth(pkt::ETH_IPV4, &ip4);
    let v6 = pkt::eth(pkt::ETH_IPV6, &ip6);
    let t4 = pkt::eth_tagged(&[pkt::VLAN_Q], pkt::ETH_IPV4, &ip4);
    let t6 = pkt::eth_tagged(&[pkt::VLAN_Q], pkt::ETH_IPV6, &ip6);
    for kind in PROGRAMS {
        e.on(kind);
        if !is_tc(kind) {
            e.truncated(&v4[..14])?; // EtherType IPv4, nothing after
            e.truncated(&v4[..14 + 19])?; // IPv4 header one byte short
            e.truncated(&v6[..14])?;
            e.truncated(&v6[..14 + 39])?; // IPv6 header one byte short
        }
        e.truncated(&t4[..18])?;
        e.truncated(&t4[..18 + 19])?;
        e.truncated(&t6[..18])?;
        e.truncated(&t6[..18 + 39])?;
        // Version field disagreeing with the EtherType.
        e.truncated(&pkt::eth(pkt::ETH_IPV4, &ip6))?;
        e.truncated(&pkt::eth(
            pkt::ETH_IPV6,
            &[&ip4[..], &[0u8; 40][..]].concat(),
        ))?;
        e.check()?;
    }
    Ok(())
}

/// Transport headers cut short: counted truncated, yet still an IP packet: a size bucket and
/// a flow record whose ports stay 0 (l4_parse returns before setting them).
fn truncated_l4_headers_still_create_flow(dp: &Dataplane<'_>) -> Result<()> {
    let mut e = Expect::new(dp);
    let tcp = pkt::v4(pkt::TCP, &Tcp::new(40000, 443, 1, pkt::SYN).build(&[]));
    let udp = pkt::v4(pkt::UDP, &pkt::udp(5000, 6000, &pkt::data(10)));
    let icmp = pkt::v4(pkt::ICMP, &pkt::icmp(3, 4, [0, 0, 5, 0], &[]));
    let tcp6 = pkt::v6(pkt::TCP, &Tcp::new(40000, 443, 1, pkt::SYN).build(&[]));
    let icmp6 = pkt::v6(pkt::ICMPV6, &pkt::icmp(2, 0, [0, 0, 5, 0], &[]));
    for kind in PROGRAMS {
        e.on(kind);
        e.ip(&tcp[..14 + 20 + 19], 39, (pkt::TCP, A, 0, B, 0))?;
        e.dir().truncated += 1;
        e.ip(&udp[..14 + 20 + 7], 27, (pkt::UDP, A, 0, B, 0))?;
        e.dir().truncated += 1;
        // A frag-needed cut inside the ICMP header is neither counted nor recorded.
        e.ip(&icmp[..14 + 20 + 7], 27, (pkt::ICMP, A, 0, B, 0))?;
        e.dir().truncated += 1;
        e.ip(&tcp6[..14 + 40 + 10], 50, (pkt::TCP, A6, 0, B6, 0))?;
        e.dir().truncated += 1;
        e.ip(&icmp6[..14 + 40 + 4], 44, (pkt::ICMPV6, A6, 0, B6, 0))?;
        e.dir().truncated += 1;
        e.check()?;
    }
    Ok(())
}

/// IHL < 5 and IHL beyond the frame are truncated; valid options shift the transport header.
fn ipv4_ihl_and_options(dp: &Dataplane<'_>) -> Result<()> {
    let mut e = Expect::new(dp);
    let l4 = pkt::udp(5000, 6000, &pkt::data(20));
    let with_ihl = |ihl: u8, payload: &[u8]| {
        let mut ip = Ipv4::new(pkt::UDP);
        ip.ihl = Some(ihl);
        pkt::eth(pkt::ETH_IPV4, &ip.build(payload))
    };
    let mut ip = Ipv4::new(pkt::UDP);
    ip.options = vec![0x94, 0x04, 0, 0]; // Router Alert: IHL 6
    let router_alert = pkt::eth(pkt::ETH_IPV4, &ip.build(&l4));
    let mut ip = Ipv4::new(pkt::TCP);
    ip.options = vec![1; 40]; // IHL 15
    let nops = pkt::eth(
        pkt::ETH_IPV4,
        &ip.build(
            &Tcp::new(7, 8, 9, pkt::SYN)
                .opts(&[2, 4, 5, 0xb4])
                .build(&[]),
        ),
    );
    for kind in PROGRAMS {
        e.on(kind);
        for ihl in [0u8, 1, 4] {
            e.truncated(&with_ihl(ihl, &l4))?;
        }
        // IHL 15 (60 bytes) with 40 bytes of IP packet in the frame.
        e.truncated(&with_ihl(15, &pkt::data(20)))?;
        e.ip(&router_alert, 24 + 28, (pkt::UDP, A, 5000, B, 6000))?;
        let f = e.ip(&nops, 60 + 24, (pkt::TCP, A, 7, B, 8))?;
        f.tcp_flags = pkt::SYN;
        f.syn_mss = Some(1460);
        e.check()?;
    }
    Ok(())
}

/// The effective IP length is min(total length, frame bytes from the IP header); a total
/// length of 0 (BIG TCP) means "use the frame". See also
/// `ip_length_field_below_header_length_uses_frame_length`.
fn ipv4_total_length_vs_frame_length(dp: &Dataplane<'_>) -> Result<()> {
    let mut e = Expect::new(dp);
    let mut ip = Ipv4::new(pkt::UDP);
    ip.tot_len = Some(1400);
    let claims_more = pkt::eth(
        pkt::ETH_IPV4,
        &ip.build(&pkt::udp(5000, 6000, &pkt::data(30))),
    );
    let mut padded = pkt::v4(pkt::UDP, &pkt::udp(5001, 6000, &[]));
    padded.resize(60, 0);
    let mut ip = Ipv4::new(pkt::UDP);
    ip.tot_len = Some(0);
    let zero = pkt::eth(
        pkt::ETH_IPV4,
        &ip.build(&pkt::udp(5002, 6000, &pkt::data(972))),
    );
    for kind in PROGRAMS {
        e.on(kind);
        // Claims 1400 bytes, frame carries 58: bucket and max_segment from the frame.
        e.ip(&claims_more, 58, (pkt::UDP, A, 5000, B, 6000))?;
        // Ethernet padding: a 28-byte datagram in a 60-byte frame -> 28; bytes stay 60.
        e.ip(&padded, 28, (pkt::UDP, A, 5001, B, 6000))?;
        // Total length 0: the frame decides (1000 bytes of IP, bucket 1).
        e.ip(&zero, 1000, (pkt::UDP, A, 5002, B, 6000))?;
        e.check()?;
    }
    Ok(())
}

/// IP length fields are used only if they cover at least the network header (IPv4: IHL * 4;
/// IPv6: 40 bytes plus the extension headers walked) and are below the frame; otherwise the
/// frame decides, as for a length of 0.
fn ip_length_field_below_header_length_uses_frame_length(dp: &Dataplane<'_>) -> Result<()> {
    let mut e = Expect::new(dp);
    let v4 = |sport: u16, tot_len: u16| {
        let mut ip = Ipv4::new(pkt::UDP);
        ip.tot_len = Some(tot_len);
        pkt::eth(
            pkt::ETH_IPV4,
            &ip.build(&pkt::udp(sport, 6000, &pkt::data(30))),
        )
    };
    // IPv6 with an 8-byte hop-by-hop header: 48 bytes of network header.
    let v6 = |sport: u16, payload_len: u16| {
        let mut ip = Ipv6::new().exts(&[Ext::Hop(0)]);
        ip.payload_len = Some(payload_len);
        pkt::eth(
            pkt::ETH_IPV6,
            &ip.build(pkt::UDP, &pkt::udp(sport, 6000, &pkt::data(10))),
        )
    };
    for kind in PROGRAMS {
        e.on(kind);
        // Total length 10 and 19, below the 20-byte header: the frame's 58 bytes.
        e.ip(&v4(5000, 10), 58, (pkt::UDP, A, 5000, B, 6000))?;
        e.ip(&v4(5001, 19), 58, (pkt::UDP, A, 5001, B, 6000))?;
        // Exactly the header: taken as is (max_segment 20).
        e.ip(&v4(5002, 20), 20, (pkt::UDP, A, 5002, B, 6000))?;
        // Payload length 7 (IP length 47 < 48): the frame's 66 bytes; 8 (48): taken.
        e.ip(&v6(5003, 7), 66, (pkt::UDP, A6, 5003, B6, 6000))?;
        e.ip(&v6(5004, 8), 48, (pkt::UDP, A6, 5004, B6, 6000))?;
        e.check()?;
    }
    Ok(())
}

/// IPv6 payload length 0 (BIG TCP GSO packets, jumbograms) means "use the frame", as IPv4
/// total length 0 does: size bucket and max_segment from the frame, and so is the TCP
/// payload, so retransmissions of such packets are seen.
fn ipv6_payload_length_zero_uses_frame_length(dp: &Dataplane<'_>) -> Result<()> {
    let mut e = Expect::new(dp);
    let zero = |sport: u16, seq: u32| {
        let mut ip = Ipv6::new();
        ip.payload_len = Some(0);
        let tcp = Tcp::new(sport, 443, seq, pkt::ACK).build(&pkt::data(1000));
        pkt::eth(pkt::ETH_IPV6, &ip.build(pkt::TCP, &tcp))
    };
    for kind in PROGRAMS {
        e.on(kind);
        // Fresh flows per program (XDP and tc ingress would share ingress records).
        let key = (pkt::TCP, A6, 40000 + kind as u16, B6, 443);
        for seq in [1000, 2000, 1000] {
            e.ip(&zero(key.2, seq), 1060, key)?;
        }
        let f = e.flow(key);
        f.tcp_flags = pkt::ACK;
        f.retransmits = 1;
        e.check()?;
    }
    Ok(())
}

/// A TCP data offset reaching past the end of the packet is a header shorter than it claims:
/// truncated. The fixed header is whole, though, so ports, flags and an MSS option that is
/// present are still recorded.
fn tcp_data_offset_past_frame_is_truncated_but_recorded(dp: &Dataplane<'_>) -> Result<()> {
    let mut e = Expect::new(dp);
    let mut ack = Tcp::new(40000, 443, 1, pkt::ACK);
    ack.doff = Some(15); // 60 bytes claimed, 20 present
    let ack = pkt::v4(pkt::TCP, &ack.build(&[]));
    let mut syn = Tcp::new(40001, 443, 1, pkt::SYN).opts(&[2, 4, 5, 0xb4]);
    syn.doff = Some(15); // 60 bytes claimed, 24 present
    let syn = pkt::v4(pkt::TCP, &syn.build(&[]));
    let mut syn6 = Tcp::new(40002, 443, 1, pkt::SYN).opts(&[2, 4, 5, 0x8c]);
    syn6.doff = Some(7); // 28 bytes claimed, 24 present
    let syn6 = pkt::v6(pkt::TCP, &syn6.build(&[]));
    for kind in PROGRAMS {
        e.on(kind);
        e.ip(&ack, 40, (pkt::TCP, A, 40000, B, 443))?.tcp_flags = pkt::ACK;
        e.dir().truncated += 1;
        let f = e.ip(&syn, 44, (pkt::TCP, A, 40001, B, 443))?;
        f.tcp_flags = pkt::SYN;
        f.syn_mss = Some(1460);
        e.dir().truncated += 1;
        let f = e.ip(&syn6, 64, (pkt::TCP, A6, 40002, B6, 443))?;
        f.tcp_flags = pkt::SYN;
        f.syn_mss = Some(1420);
        e.dir().truncated += 1;
        e.check()?;
    }
    Ok(())
}

/// TCP data offset below 5 is truncated (flow with ports 0 and no TCP facts).
fn tcp_data_offset_below_five(dp: &Dataplane<'_>) -> Result<()> {
    let mut e = Expect::new(dp);
    let frames: Vec<Vec<u8>> = [0u8, 1, 4]
        .iter()
        .map(|&doff| {
            let mut t = Tcp::new(40000, 443, 1, pkt::SYN).opts(&[2, 4, 5, 0xb4]);
            t.doff = Some(doff);
            pkt::v4(pkt::TCP, &t.build(&pkt::data(10)))
        })
        .collect();
    let ok = pkt::v4(
        pkt::TCP,
        &Tcp::new(40000, 443, 1, pkt::SYN)
            .opts(&[2, 4, 5, 0xb4])
            .build(&pkt::data(10)),
    );
    for kind in PROGRAMS {
        e.on(kind);
        for f in &frames {
            e.ip(f, 54, (pkt::TCP, A, 0, B, 0))?;
            e.dir().truncated += 1;
        }
        let f = e.ip(&ok, 54, (pkt::TCP, A, 40000, B, 443))?;
        f.tcp_flags = pkt::SYN;
        f.syn_mss = Some(1460);
        e.seen_again((pkt::TCP, A, 40000, B, 443));
        e.check()?;
    }
    Ok(())
}

/// IPv6 extension header chains: walked up to ND_MAX_EXTHDR (6) headers; a header cut short
/// is truncated; after six, the seventh header's type is left as the "protocol".
fn ipv6_extension_header_chains(dp: &Dataplane<'_>) -> Result<()> {
    let mut e = Expect::new(dp);
    let tcp = Tcp::new(40000, 443, 1, pkt::ACK).build(&pkt::data(10));
    let udp = pkt::udp(5000, 6000, &pkt::data(8));
    // HBH (8) + routing (24) + destination options (16), then TCP.
    let three = Ipv6::new().exts(&[Ext::Hop(0), Ext::Routing(2), Ext::Dest(1)]);
    let three = pkt::eth(pkt::ETH_IPV6, &three.build(pkt::TCP, &tcp));
    // Six headers (8+8+8+8+16+8 = 56 bytes), the most the parser walks, then UDP.
    let six_exts = [
        Ext::Hop(0),
        Ext::Dest(0),
        Ext::Routing(0),
        Ext::Frag {
            offset: 0,
            more: true,
        },
        Ext::Dest(1),
        Ext::Dest(0),
    ];
    let six = pkt::eth(
        pkt::ETH_IPV6,
        &Ipv6::new().exts(&six_exts).build(pkt::UDP, &udp),
    );
    let mut seven_exts = six_exts.to_vec();
    seven_exts.push(Ext::Dest(0));
    let seven = pkt::eth(
        pkt::ETH_IPV6,
        &Ipv6::new().exts(&seven_exts).build(pkt::UDP, &udp),
    );
    let no_next = pkt::eth(
        pkt::ETH_IPV6,
        &Ipv6::new().exts(&[Ext::Dest(0)]).build(pkt::NONXT, &[]),
    );
    // Destination options of 32 bytes after a HBH header, for cutting.
    let cut = Ipv6::new()
        .exts(&[Ext::Hop(0), Ext::Dest(3)])
        .build(pkt::TCP, &tcp);
    let mut long = Ipv6::new().exts(&[Ext::Routing(0)]).build(pkt::TCP, &tcp);
    long[41] = 255; // Hdr Ext Len 255 -> 2048 bytes
    let frag = Ipv6::new()
        .exts(&[Ext::Frag {
            offset: 0,
            more: true,
        }])
        .build(pkt::UDP, &udp);
    for kind in PROGRAMS {
        e.on(kind);
        e.ip(&three, 40 + 48 + 30, (pkt::TCP, A6, 40000, B6, 443))?
            .tcp_flags = pkt::ACK;
        e.seen_again((pkt::TCP, A6, 40000, B6, 443));
        e.ip(&six, 40 + 56 + 16, (pkt::UDP, A6, 5000, B6, 6000))?;
        e.dir().fragments_first += 1;
        // Seven: after six the walk stops with next header = destination options (60).
        e.ip(&seven, 40 + 64 + 16, (pkt::DSTOPTS, A6, 0, B6, 0))?;
        e.dir().fragments_first += 1;
        e.ip(&no_next, 48, (pkt::NONXT, A6, 0, B6, 0))?;
        // Cut 10 bytes into the 32-byte header; cut after its first byte.
        e.truncated(&pkt::eth(pkt::ETH_IPV6, &cut[..40 + 8 + 10]))?;
        e.truncated(&pkt::eth(pkt::ETH_IPV6, &cut[..40 + 8 + 1]))?;
        e.truncated(&pkt::eth(pkt::ETH_IPV6, &long))?;
        // Fragment header cut after 4 bytes.
        e.truncated(&pkt::eth(pkt::ETH_IPV6, &frag[..44]))?;
        e.check()?;
    }
    Ok(())
}

/// IPv4 fragments: offset 0 + MF is a first fragment (ports parsed), any nonzero offset is a
/// later fragment (no transport header: ports 0, no TCP/UDP facts).
fn ipv4_fragments_first_and_later(dp: &Dataplane<'_>) -> Result<()> {
    let mut e = Expect::new(dp);
    let mut ip = Ipv4::new(pkt::UDP);
    ip.mf = true;
    let first = pkt::eth(
        pkt::ETH_IPV4,
        &ip.build(&pkt::udp(5000, 6000, &pkt::data(1472))),
    );
    // Middle fragment (offset 185, MF) and last fragment (offset 370, no MF).
    let later: Vec<Vec<u8>> = [(185u16, true), (370, false)]
        .iter()
        .map(|&(offset, mf)| {
            let mut ip = Ipv4::new(pkt::UDP);
            ip.mf = mf;
            ip.frag_offset = offset;
            pkt::eth(pkt::ETH_IPV4, &ip.build(&pkt::data(200)))
        })
        .collect();
    let mut ip = Ipv4::new(pkt::TCP);
    ip.frag_offset = 1;
    let tcp_later = pkt::eth(
        pkt::ETH_IPV4,
        &ip.build(
            &Tcp::new(1, 2, 3, pkt::SYN)
                .opts(&[2, 4, 5, 0xb4])
                .build(&[]),
        ),
    );
    let mut ip = Ipv4::new(pkt::UDP);
    ip.df = true;
    let df_only = pkt::eth(pkt::ETH_IPV4, &ip.build(&pkt::udp(5001, 6000, &[])));
    for kind in PROGRAMS {
        e.on(kind);
        e.ip(&first, 1500, (pkt::UDP, A, 5000, B, 6000))?;
        e.dir().fragments_first += 1;
        for f in &later {
            e.ip(f, 220, (pkt::UDP, A, 0, B, 0))?;
            e.dir().fragments_later += 1;
        }
        // A later fragment with TCP-looking bytes: no flags, no MSS.
        e.ip(&tcp_later, 44, (pkt::TCP, A, 0, B, 0))?;
        e.dir().fragments_later += 1;
        // DF alone is not a fragment.
        e.ip(&df_only, 28, (pkt::UDP, A, 5001, B, 6000))?;
        e.check()?;
    }
    Ok(())
}

/// IPv6 fragment header: offset 0 with M set is a first fragment, offset > 0 a later one.
fn ipv6_fragment_header_first_and_later(dp: &Dataplane<'_>) -> Result<()> {
    let mut e = Expect::new(dp);
    let udp = pkt::udp(5000, 6000, &pkt::data(100));
    let first = Ipv6::new().exts(&[Ext::Frag {
        offset: 0,
        more: true,
    }]);
    let first = pkt::eth(pkt::ETH_IPV6, &first.build(pkt::UDP, &udp));
    let later = Ipv6::new().exts(&[Ext::Frag {
        offset: 185,
        more: false,
    }]);
    let later = pkt::eth(pkt::ETH_IPV6, &later.build(pkt::UDP, &pkt::data(100)));
    let middle = Ipv6::new().exts(&[
        Ext::Hop(0),
        Ext::Frag {
            offset: 1,
            more: true,
        },
    ]);
    let middle = pkt::eth(pkt::ETH_IPV6, &middle.build(pkt::TCP, &pkt::data(24)));
    let hbh_first = Ipv6::new().exts(&[
        Ext::Hop(0),
        Ext::Frag {
            offset: 0,
            more: true,
        },
    ]);
    let hbh_first = pkt::eth(
        pkt::ETH_IPV6,
        &hbh_first.build(
            pkt::TCP,
            &Tcp::new(40000, 443, 1, pkt::ACK).build(&pkt::data(8)),
        ),
    );
    for kind in PROGRAMS {
        e.on(kind);
        e.ip(&first, 156, (pkt::UDP, A6, 5000, B6, 6000))?;
        e.dir().fragments_first += 1;
        e.ip(&later, 148, (pkt::UDP, A6, 0, B6, 0))?;
        e.dir().fragments_later += 1;
        e.ip(&middle, 80, (pkt::TCP, A6, 0, B6, 0))?;
        e.dir().fragments_later += 1;
        // Hop-by-hop before a first fragment of TCP: ports and flags parsed.
        e.ip(&hbh_first, 84, (pkt::TCP, A6, 40000, B6, 443))?
            .tcp_flags = pkt::ACK;
        e.seen_again((pkt::TCP, A6, 40000, B6, 443));
        e.dir().fragments_first += 1;
        e.check()?;
    }
    Ok(())
}

/// A later fragment's fragment header ends the extension-header walk. RFC 8200 makes the Next
/// Header of every fragment the first header of the fragmentable part, e.g. destination
/// options (60), but in a later fragment what follows is payload: it is not read as headers,
/// whatever it looks like, and the flow's protocol is that Next Header.
fn ipv6_later_fragment_stops_extension_header_walk(dp: &Dataplane<'_>) -> Result<()> {
    let mut e = Expect::new(dp);
    let later = Ipv6::new().exts(&[Ext::Frag {
        offset: 185,
        more: false,
    }]);
    // Payload bytes that read as a header length of 255 (2048 bytes) ...
    let mut payload = pkt::data(200);
    payload[1] = 0xff;
    let a = pkt::eth(pkt::ETH_IPV6, &later.build(pkt::DSTOPTS, &payload));
    // ... or as an 8-byte header followed by "TCP".
    payload[0] = pkt::TCP;
    payload[1] = 0;
    let b = pkt::eth(pkt::ETH_IPV6, &later.build(pkt::DSTOPTS, &payload));
    for kind in PROGRAMS {
        e.on(kind);
        for frame in [&a, &b] {
            e.ip(frame, 248, (pkt::DSTOPTS, A6, 0, B6, 0))?;
            e.dir().fragments_later += 1;
        }
        e.check()?;
    }
    Ok(())
}

/// A fragment header with offset 0 and M = 0 (an atomic fragment, RFC 6946) is no fragment,
/// as IPv4 offset 0 without MF is none: no fragment counter, and the walk goes on to the
/// transport header.
fn ipv6_atomic_fragment_is_not_a_fragment(dp: &Dataplane<'_>) -> Result<()> {
    let mut e = Expect::new(dp);
    let atomic = Ext::Frag {
        offset: 0,
        more: false,
    };
    let udp = pkt::eth(
        pkt::ETH_IPV6,
        &Ipv6::new()
            .exts(&[atomic])
            .build(pkt::UDP, &pkt::udp(5000, 6000, &pkt::data(10))),
    );
    // Hop-by-hop, atomic fragment, destination options, then TCP.
    let tcp = pkt::eth(
        pkt::ETH_IPV6,
        &Ipv6::new()
            .exts(&[Ext::Hop(0), atomic, Ext::Dest(0)])
            .build(
                pkt::TCP,
                &Tcp::new(40000, 443, 1, pkt::ACK).build(&pkt::data(8)),
            ),
    );
    for kind in PROGRAMS {
        e.on(kind);
        e.ip(&udp, 66, (pkt::UDP, A6, 5000, B6, 6000))?;
        e.ip(&tcp, 92, (pkt::TCP, A6, 40000, B6, 443))?.tcp_flags = pkt::ACK;
        e.seen_again((pkt::TCP, A6, 40000, B6, 443));
        e.check()?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// 3. TCP: MSS, flags, max segment, retransmissions
// ---------------------------------------------------------------------------------------------

fn tcp_syn_mss_extraction(dp: &Dataplane<'_>) -> Result<()> {
    let mut e = Expect::new(dp);
    let ts = [8, 10, 1, 2, 3, 4, 0, 0, 0, 0];
    let mut nops_then_mss = vec![1u8; 12];
    nops_then_mss.extend([2, 4, 5, 0xb4]);
    let cases: Vec<(u8, Vec<u8>, Option<u16>)> = vec![
        (pkt::SYN, vec![2, 4, 0x05, 0xb4], Some(1460)),
        (pkt::SYN, vec![1, 1, 2, 4, 0x05, 0x78], Some(1400)),
        (
            pkt::SYN,
            [&ts[..], &[1, 1, 2, 4, 0x04, 0xd8]].concat(),
            Some(1240),
        ),
        // Window scale (3 bytes), SACK permitted (2 bytes), then MSS.
        (pkt::SYN, vec![3, 3, 7, 4, 2, 2, 4, 0x05, 0x64], Some(1380)),
        (pkt::SYN | pkt::ACK, vec![2, 4, 0x05, 0x50], Some(1360)),
        // No MSS option / no options at all.
        (pkt::SYN, vec![4, 2, 1, 1], None),
        (pkt::SYN, vec![], None),
        // Not a SYN: the option is ignored.
        (pkt::ACK, vec![2, 4, 0x05, 0xb4], None),
        // End-of-list before the MSS.
        (pkt::SYN, vec![0, 0, 0, 0, 2, 4, 0x05, 0xb4], None),
        // An option of length 0 stops the walk.
        (pkt::SYN, vec![8, 0, 2, 4, 0x05, 0xb4], None),
        // Past the walk limit (10 steps): 12 NOPs first.
        (pkt::SYN, nops_then_mss, None),
    ];
    let frames: Vec<Vec<u8>> = cases
        .iter()
        .enumerate()
        .map(|(i, (flags, opts, _))| {
            pkt::v4(
                pkt::TCP,
                &Tcp::new(41000 + i as u16, 443, 1, *flags)
                    .opts(opts)
                    .build(&[]),
            )
        })
        .collect();
    // MSS option cut by the end of the frame (data offset claims 24 bytes, 22 present):
    // truncated, flags recorded, no MSS.
    let cut = pkt::v4(
        pkt::TCP,
        &Tcp::new(42000, 443, 1, pkt::SYN)
            .opts(&[2, 4, 5, 0xb4])
            .build(&[]),
    );
    let cut = &cut[..cut.len() - 2];
    // The last SYN with an MSS wins; a SYN without one leaves it.
    let repeated: Vec<Vec<u8>> = [&[2u8, 4, 5, 0xb4][..], &[2, 4, 5, 0x78], &[1, 1, 1, 1]]
        .iter()
        .map(|opts| {
            pkt::v4(
                pkt::TCP,
                &Tcp::new(42001, 443, 1, pkt::SYN).opts(opts).build(&[]),
            )
        })
        .collect();
    let v6_syn = pkt::v6(
        pkt::TCP,
        &Tcp::new(42002, 443, 1, pkt::SYN)
            .opts(&[2, 4, 0x05, 0x8c])
            .build(&[]),
    );
    for kind in PROGRAMS {
        e.on(kind);
        for (i, ((flags, _, mss), frame)) in cases.iter().zip(&frames).enumerate() {
            let ip_len = (frame.len() - 14) as u32;
            let f = e.ip(frame, ip_len, (pkt::TCP, A, 41000 + i as u16, B, 443))?;
            f.tcp_flags = *flags;
            f.syn_mss = *mss;
        }
        e.ip(cut, 42, (pkt::TCP, A, 42000, B, 443))?.tcp_flags = pkt::SYN;
        e.dir().truncated += 1;
        for frame in &repeated {
            e.ip(frame, 44, (pkt::TCP, A, 42001, B, 443))?;
        }
        let f = e.flow((pkt::TCP, A, 42001, B, 443));
        f.tcp_flags = pkt::SYN;
        f.syn_mss = Some(1400);
        let f = e.ip(&v6_syn, 64, (pkt::TCP, A6, 42002, B6, 443))?;
        f.tcp_flags = pkt::SYN;
        f.syn_mss = Some(1420);
        e.check()?;
    }
    Ok(())
}

fn tcp_flags_max_segment_and_passive_retransmits(dp: &Dataplane<'_>) -> Result<()> {
    let mut e = Expect::new(dp);
    let seg = |sport: u16, seq: u32, flags: u8, len: usize| {
        pkt::v4(
            pkt::TCP,
            &Tcp::new(sport, 80, seq, flags).build(&pkt::data(len)),
        )
    };
    for kind in PROGRAMS {
        e.on(kind);
        // Fresh flows per program (XDP and tc ingress would share ingress records).
        let base = 40000 + kind as u16 * 10;
        // The brief's sequence, plus a SYN, a bigger segment, pure ACKs and a FIN.
        let key = (pkt::TCP, A, base, B, 80);
        let syn = Tcp::new(base, 80, 999, pkt::SYN).opts(&[2, 4, 5, 0xb4]);
        e.ip(&pkt::v4(pkt::TCP, &syn.build(&[])), 44, key)?;
        e.ip(&seg(base, 1000, pkt::ACK, 100), 140, key)?;
        e.ip(&seg(base, 1100, pkt::ACK | pkt::PSH, 100), 140, key)?;
        e.ip(&seg(base, 1000, pkt::ACK, 100), 140, key)?; // retransmission
        e.ip(&seg(base, 1200, pkt::ACK, 300), 340, key)?;
        e.ip(&seg(base, 1500, pkt::ACK, 0), 40, key)?; // no data: never counted
        e.ip(&seg(base, 1400, pkt::ACK, 0), 40, key)?; // old seq, no data
        e.ip(&seg(base, 1500, pkt::FIN | pkt::ACK, 0), 40, key)?;
        let f = e.flow(key);
        f.tcp_flags = pkt::SYN | pkt::ACK | pkt::PSH | pkt::FIN;
        f.syn_mss = Some(1460);
        assert_eq!(f.max_segment, 340);
        f.retransmits = 1;

        // In order across the 32-bit wrap: never counted.
        let key = (pkt::TCP, A, base + 1, B, 80);
        for i in 0..10u32 {
            let s = seg(key.2, 0xffff_fe00u32.wrapping_add(i * 100), pkt::ACK, 100);
            e.ip(&s, 140, key)?;
        }
        e.flow(key).tcp_flags = pkt::ACK;

        // Reordering counts like a retransmission; so does a duplicate.
        let key = (pkt::TCP, A, base + 2, B, 80);
        for seq in [1000u32, 1200, 1100, 1200] {
            e.ip(&seg(key.2, seq, pkt::ACK, 100), 140, key)?;
        }
        let f = e.flow(key);
        f.tcp_flags = pkt::ACK;
        f.retransmits = 2;

        // IPv6: same rule.
        let key = (pkt::TCP, A6, base + 3, B6, 80);
        for seq in [1000u32, 1100, 1000] {
            let frame = pkt::v6(
                pkt::TCP,
                &Tcp::new(key.2, 80, seq, pkt::ACK).build(&pkt::data(100)),
            );
            e.ip(&frame, 160, key)?;
        }
        let f = e.flow(key);
        f.tcp_flags = pkt::ACK;
        f.retransmits = 1;
        e.check()?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// 4. Size histogram and DF over MTU
// ---------------------------------------------------------------------------------------------

fn udp4_of_ip_len(sport: u16, ip_len: usize) -> Vec<u8> {
    pkt::v4(pkt::UDP, &pkt::udp(sport, 7000, &vec![0u8; ip_len - 28]))
}

/// IP lengths at and one above every bucket bound land in adjacent buckets. XDP (multi-buffer
/// test runs) also covers 9000/9001 and a 66000-byte frame with total length 0, whose flow
/// max_segment saturates at 65535; skb test runs are limited to about one page.
fn size_histogram_bucket_boundaries(dp: &Dataplane<'_>) -> Result<()> {
    let mut e = Expect::new(dp);
    let mut ip = Ipv4::new(pkt::UDP);
    ip.tot_len = Some(0);
    let huge = pkt::eth(
        pkt::ETH_IPV4,
        &ip.build(&pkt::udp(1, 7000, &vec![0u8; 66_000 - 28])),
    );
    for kind in PROGRAMS {
        e.on(kind);
        let before = e.dir().size_buckets.clone();
        let mut want = vec![0u64; BUCKETS];
        for (i, &b) in SIZE_BUCKET_BOUNDS.iter().enumerate() {
            if b > 1500 && is_tc(kind) {
                continue;
            }
            for (len, idx) in [(b, i), (b + 1, i + 1)] {
                let sport = len as u16;
                e.ip(
                    &udp4_of_ip_len(sport, len as usize),
                    len,
                    (pkt::UDP, A, sport, B, 7000),
                )?;
                want[idx] += 1;
            }
        }
        // Smallest UDP datagram and an IPv6 pair around 1420.
        e.ip(&udp4_of_ip_len(28, 28), 28, (pkt::UDP, A, 28, B, 7000))?;
        want[0] += 1;
        for (len, idx) in [(1420usize, 3usize), (1421, 4)] {
            let frame = pkt::v6(pkt::UDP, &pkt::udp(len as u16, 7000, &vec![0u8; len - 48]));
            e.ip(&frame, len as u32, (pkt::UDP, A6, len as u16, B6, 7000))?;
            want[idx] += 1;
        }
        if !is_tc(kind) {
            e.ip(&huge, 66_000, (pkt::UDP, A, 1, B, 7000))?;
            want[9] += 1;
            assert_eq!(e.flow((pkt::UDP, A, 1, B, 7000)).max_segment, 0xffff);
        }
        let added: Vec<u64> = e
            .dir()
            .size_buckets
            .iter()
            .zip(&before)
            .map(|(a, b)| a - b)
            .collect();
        assert_eq!(added, want, "expectation bookkeeping");
        e.check()?;
    }
    Ok(())
}

/// df_over_mtu counts DF IPv4 and all IPv6 segments whose IP length exceeds the MTU set by
/// `watch`; re-watching with a larger MTU keeps the counters and stops the counting.
fn df_over_mtu_ipv4_df_and_ipv6(dp: &Dataplane<'_>) -> Result<()> {
    let mut e = Expect::new(dp);
    let v4 = |df: bool, len: usize| {
        let mut ip = Ipv4::new(pkt::UDP);
        ip.df = df;
        pkt::eth(
            pkt::ETH_IPV4,
            &ip.build(&pkt::udp(5000, 6000, &vec![0u8; len - 28])),
        )
    };
    let v6 = |len: usize| pkt::v6(pkt::UDP, &pkt::udp(5000, 6000, &vec![0u8; len - 48]));
    let k4 = (pkt::UDP, A, 5000, B, 6000);
    let k6 = (pkt::UDP, A6, 5000, B6, 6000);
    for kind in PROGRAMS {
        e.on(kind);
        dp.watch(LO, 1400, LinkType::Ether)?;
        e.ip(&v4(true, 1400), 1400, k4)?;
        e.ip(&v4(true, 1401), 1401, k4)?;
        e.dir().df_over_mtu += 1;
        e.ip(&v4(false, 1401), 1401, k4)?;
        e.ip(&v4(false, 1500), 1500, k4)?;
        e.ip(&v4(true, 1500), 1500, k4)?;
        e.dir().df_over_mtu += 1;
        e.ip(&v6(1400), 1400, k6)?;
        e.ip(&v6(1401), 1401, k6)?;
        e.dir().df_over_mtu += 1;
        e.check()?;
        dp.watch(LO, 1500, LinkType::Ether)?;
        e.ip(&v4(true, 1401), 1401, k4)?;
        e.ip(&v6(1500), 1500, k6)?;
        e.check()?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// 5. Encapsulations
// ---------------------------------------------------------------------------------------------

fn wireguard_messages_by_shape(dp: &Dataplane<'_>) -> Result<()> {
    let mut e = Expect::new(dp);
    let wg4 = |sport: u16, dport: u16, payload: &[u8]| {
        pkt::v4(pkt::UDP, &pkt::udp(sport, dport, payload))
    };
    let mut trailer = wg4(51821, 51820, &pkt::wg(4, 48));
    trailer.extend([0xee; 6]);
    let v6_response = pkt::v6(pkt::UDP, &pkt::udp(51820, 51820, &pkt::wg(2, 92)));
    let mut reserved = pkt::wg(1, 148);
    reserved[2] = 1;
    let mut reserved3 = pkt::wg(4, 32);
    reserved3[3] = 0x80;
    let negatives: Vec<Vec<u8>> = vec![
        pkt::wg(1, 149),
        pkt::wg(1, 147),
        pkt::wg(2, 148),
        pkt::wg(3, 92),
        pkt::wg(4, 40),
        pkt::wg(4, 16),
        pkt::wg(4, 31),
        reserved,
        reserved3,
        pkt::wg(0, 32),
        pkt::wg(5, 32),
        pkt::wg(4, 3),
    ];
    let mut ip = Ipv4::new(pkt::UDP);
    ip.frag_offset = 10;
    let later = pkt::eth(
        pkt::ETH_IPV4,
        &ip.build(&pkt::udp(51820, 51820, &pkt::wg(4, 32))),
    );
    for kind in PROGRAMS {
        e.on(kind);
        let key = (pkt::UDP, A, 51820, B, 51820);
        for (ty, len) in [
            (1u8, 148usize),
            (2, 92),
            (3, 64),
            (4, 32),
            (4, 48),
            (4, 1440),
        ] {
            e.ip(&wg4(51820, 51820, &pkt::wg(ty, len)), 28 + len as u32, key)?;
        }
        let f = e.flow(key);
        f.encap = Encap::Wireguard;
        f.wireguard.initiation += 1;
        f.wireguard.response += 1;
        f.wireguard.cookie += 1;
        f.wireguard.data += 3;
        // Any port.
        let key = (pkt::UDP, A, 443, B, 40000);
        e.ip(&wg4(443, 40000, &pkt::wg(1, 148)), 176, key)?;
        let f = e.flow(key);
        f.encap = Encap::Wireguard;
        f.wireguard.initiation += 1;
        // Trailing bytes after the datagram: the UDP length comes from the IP header.
        let f = e.ip(&trailer, 76, (pkt::UDP, A, 51821, B, 51820))?;
        f.encap = Encap::Wireguard;
        f.wireguard.data += 1;
        let f = e.ip(&v6_response, 140, (pkt::UDP, A6, 51820, B6, 51820))?;
        f.encap = Encap::Wireguard;
        f.wireguard.response += 1;
        // Not WireGuard: wrong lengths, nonzero reserved bytes, unknown types, < 4 bytes.
        for (i, p) in negatives.iter().enumerate() {
            let sport = 30000 + i as u16;
            e.ip(
                &wg4(sport, 51820, p),
                28 + p.len() as u32,
                (pkt::UDP, A, sport, B, 51820),
            )?;
        }
        // A WireGuard shape inside a later fragment is not looked at.
        e.ip(&later, 60, (pkt::UDP, A, 0, B, 0))?;
        e.dir().fragments_later += 1;
        e.check()?;
    }
    Ok(())
}

fn vxlan_and_geneve(dp: &Dataplane<'_>) -> Result<()> {
    let mut e = Expect::new(dp);
    let inner = pkt::v4(pkt::ICMP, &pkt::icmp(8, 0, [0, 1, 0, 1], &pkt::data(16)));
    let vxlan = |flags: u8| [&[flags, 0, 0, 0, 0, 0, 42, 0][..], &inner[..]].concat();
    let geneve = |first: u8| [&[first, 0, 0x65, 0x58, 0, 0, 42, 0][..], &inner[..]].concat();
    let cases: Vec<(u16, u16, Vec<u8>, Encap)> = vec![
        (50000, 4789, vxlan(0x08), Encap::Vxlan),
        (50001, 8472, vxlan(0x08), Encap::Vxlan),
        (50002, 4789, vxlan(0x00), Encap::None), // I flag clear
        (50003, 4789, vxlan(0x0c), Encap::None), // a reserved bit set
        (50004, 4789, vec![0x08, 0, 0, 0, 0, 0, 42], Encap::None), // 7 bytes
        (4789, 50005, vxlan(0x08), Encap::None), // only the destination port counts
        (50006, 6081, geneve(0x00), Encap::Geneve),
        (50007, 6081, geneve(0x3f), Encap::Geneve), // option length bits, version 0
        (50008, 6081, geneve(0x40), Encap::None),   // version 1
        (50009, 6081, vec![0; 7], Encap::None),
        // A WireGuard shape on the VXLAN port is not WireGuard.
        (50010, 4789, pkt::wg(4, 32), Encap::None),
    ];
    let v6 = pkt::v6(pkt::UDP, &pkt::udp(50011, 4789, &vxlan(0x08)));
    for kind in PROGRAMS {
        e.on(kind);
        for (sport, dport, payload, encap) in &cases {
            let frame = pkt::v4(pkt::UDP, &pkt::udp(*sport, *dport, payload));
            let key = (pkt::UDP, A, *sport, B, *dport);
            e.ip(&frame, 28 + payload.len() as u32, key)?.encap = *encap;
        }
        let key = (pkt::UDP, A6, 50011, B6, 4789);
        e.ip(&v6, 48 + 8 + inner.len() as u32, key)?.encap = Encap::Vxlan;
        e.check()?;
    }
    Ok(())
}

#[test]
fn user_tunnel_ports() -> Result<()> {
    if !ready() {
        return Ok(());
    }
    let other = |port| TunnelPort {
        port,
        encap: Encap::Other,
    };
    let ports = vec![
        TunnelPort {
            port: 10000,
            encap: Encap::Fastd,
        },
        TunnelPort {
            port: 655,
            encap: Encap::Tinc,
        },
        other(1194),
        other(20001),
        other(20002),
        other(20003),
        other(20004),
        // Last slot; configured ports are checked before VXLAN.
        TunnelPort {
            port: 4789,
            encap: Encap::Tinc,
        },
    ];
    // A ninth port is refused at load.
    let mut storage = MaybeUninit::uninit();
    let mut nine = ports.clone();
    nine.push(other(1));
    let too_many = Dataplane::load(
        &mut storage,
        Options {
            tunnel_ports: nine,
            ..Default::default()
        },
    );
    assert!(too_many.is_err(), "nine tunnel ports must be refused");

    let options = Options {
        tunnel_ports: ports,
        ..Default::default()
    };
    with_dp(options, 1500, LinkType::Ether, |dp| {
        let mut e = Expect::new(dp);
        let vxlan = [&[0x08u8, 0, 0, 0, 0, 0, 1, 0][..], &pkt::data(20)].concat();
        let cases: Vec<(u16, u16, Vec<u8>, Encap)> = vec![
            (40000, 10000, pkt::data(50), Encap::Fastd),
            (10000, 40001, pkt::data(50), Encap::Fastd), // the source port matches too
            (40002, 655, pkt::data(50), Encap::Tinc),
            (40003, 1194, pkt::data(50), Encap::Other),
            (40004, 10001, pkt::data(50), Encap::None),
            (40005, 4789, vxlan, Encap::Tinc),
            // WireGuard-shaped on a configured port: the port wins, no WireGuard counts.
            (40006, 10000, pkt::wg(1, 148), Encap::Fastd),
        ];
        let tcp = pkt::v4(
            pkt::TCP,
            &Tcp::new(40007, 655, 1, pkt::ACK).build(&pkt::data(10)),
        );
        for kind in PROGRAMS {
            e.on(kind);
            for (sport, dport, payload, encap) in &cases {
                let frame = pkt::v4(pkt::UDP, &pkt::udp(*sport, *dport, payload));
                let key = (pkt::UDP, A, *sport, B, *dport);
                e.ip(&frame, 28 + payload.len() as u32, key)?.encap = *encap;
            }
            // TCP to a tunnel port is not classified.
            e.ip(&tcp, 50, (pkt::TCP, A, 40007, B, 655))?.tcp_flags = pkt::ACK;
            e.seen_again((pkt::TCP, A, 40007, B, 655));
            e.check()?;
        }
        Ok(())
    })
}

// ---------------------------------------------------------------------------------------------
// 6. ICMP fragmentation needed / ICMPv6 packet too big
// ---------------------------------------------------------------------------------------------

fn icmp_frag_needed_records_too_big(dp: &Dataplane<'_>) -> Result<()> {
    let mut e = Expect::new(dp);
    // Router 10.0.0.<r> -> 10.0.0.1, quoting a packet 10.0.0.1 -> 10.0.0.2.
    let from = |r: u8, icmp: &[u8]| {
        let mut ip = Ipv4::new(pkt::ICMP);
        ip.src = [10, 0, 0, r];
        ip.dst = v4_octets(A);
        pkt::eth(pkt::ETH_IPV4, &ip.build(icmp))
    };
    let mtu = |m: u16| {
        let b = m.to_be_bytes();
        [0, 0, b[0], b[1]]
    };
    let mut quoted = Ipv4::new(pkt::TCP);
    quoted.df = true;
    quoted.tot_len = Some(1500);
    let tcp_quote = quoted.build(&Tcp::new(40000, 443, 1, pkt::ACK).build(&[])[..8]);
    let mut q = Ipv4::new(pkt::UDP);
    q.options = vec![0x94, 4, 0, 0];
    let udp_quote = q.build(&pkt::udp(5000, 6000, &pkt::data(100))[..8]);
    let icmp_key = |r: u8, code: u8| (pkt::ICMP, v4(r), 0x0300 | u16::from(code), A, 0);
    for kind in PROGRAMS {
        e.on(kind);
        // Full quote, twice, MTU 1400 then 1380: one entry, count 2, the last MTU.
        for m in [1400, 1380] {
            let frame = from(254, &pkt::icmp(3, 4, mtu(m), &tcp_quote));
            e.ip(&frame, 20 + 8 + 28, icmp_key(254, 4))?;
            e.dir().icmp_frag_needed += 1;
            e.ptb(v4(254), u32::from(m), pkt::TCP, (A, 40000, B, 443));
        }
        // Quoted header with options: ports read after them.
        let frame = from(253, &pkt::icmp(3, 4, mtu(1280), &udp_quote));
        e.ip(&frame, 20 + 8 + 32, icmp_key(253, 4))?;
        e.dir().icmp_frag_needed += 1;
        e.ptb(v4(253), 1280, pkt::UDP, (A, 5000, B, 6000));
        // Quote cut 2 bytes after the IP header: addresses, protocol, no ports.
        let frame = from(252, &pkt::icmp(3, 4, mtu(1000), &tcp_quote[..22]));
        e.ip(&frame, 50, icmp_key(252, 4))?;
        e.dir().icmp_frag_needed += 1;
        e.ptb(v4(252), 1000, pkt::TCP, (A, 0, B, 0));
        // Quote cut inside the IP header, or no quote at all: counted, inner fields zero.
        let frame = from(251, &pkt::icmp(3, 4, mtu(900), &tcp_quote[..10]));
        e.ip(&frame, 38, icmp_key(251, 4))?;
        e.dir().icmp_frag_needed += 1;
        e.ptb(v4(251), 900, 0, (V4_ANY, 0, V4_ANY, 0));
        e.ip(
            &from(250, &pkt::icmp(3, 4, mtu(576), &[])),
            28,
            icmp_key(250, 4),
        )?;
        e.dir().icmp_frag_needed += 1;
        e.ptb(v4(250), 576, 0, (V4_ANY, 0, V4_ANY, 0));
        // Port unreachable (code 3) and host unreachable (code 1): nothing recorded.
        let frame = from(249, &pkt::icmp(3, 3, mtu(1400), &tcp_quote));
        e.ip(&frame, 56, icmp_key(249, 3))?;
        let frame = from(249, &pkt::icmp(3, 1, mtu(1400), &tcp_quote));
        e.ip(&frame, 56, icmp_key(249, 1))?;
        // A frag-needed whose ICMP header is cut: truncated, neither counted nor recorded.
        let frame = from(248, &pkt::icmp(3, 4, mtu(1400), &[]));
        e.ip(&frame[..14 + 20 + 6], 26, (pkt::ICMP, v4(248), 0, A, 0))?;
        e.dir().truncated += 1;
        e.check()?;
    }
    Ok(())
}

fn icmpv6_packet_too_big_records_too_big(dp: &Dataplane<'_>) -> Result<()> {
    let mut e = Expect::new(dp);
    let from = |r: u16, icmp: &[u8]| {
        let mut ip = Ipv6::new();
        ip.src = v6_octets(v6(r));
        ip.dst = v6_octets(A6);
        pkt::eth(pkt::ETH_IPV6, &ip.build(pkt::ICMPV6, icmp))
    };
    let key = |r: u16, ty: u8| (pkt::ICMPV6, v6(r), u16::from(ty) << 8, A6, 0);
    let mut q = Ipv6::new();
    q.payload_len = Some(1452);
    let udp_quote = q.build(pkt::UDP, &pkt::udp(5000, 6000, &[])[..8]);
    let tcp_quote = q.build(pkt::TCP, &Tcp::new(40000, 443, 1, pkt::ACK).build(&[])[..8]);
    let hbh_quote = q
        .clone()
        .exts(&[Ext::Hop(0)])
        .build(pkt::UDP, &pkt::udp(5000, 6000, &[]));
    let ptb = |r: u16, mtu: u32, quote: &[u8]| from(r, &pkt::icmp(2, 0, mtu.to_be_bytes(), quote));
    for kind in PROGRAMS {
        e.on(kind);
        e.ip(&ptb(0xfe, 1280, &udp_quote), 40 + 8 + 48, key(0xfe, 2))?;
        e.dir().icmp6_packet_too_big += 1;
        e.ptb(v6(0xfe), 1280, pkt::UDP, (A6, 5000, B6, 6000));
        // A 32-bit MTU above 65535 is kept whole.
        e.ip(&ptb(0xfd, 70_000, &tcp_quote), 96, key(0xfd, 2))?;
        e.dir().icmp6_packet_too_big += 1;
        e.ptb(v6(0xfd), 70_000, pkt::TCP, (A6, 40000, B6, 443));
        // Quoted extension headers are not walked: protocol = HBH (0), no ports.
        e.ip(&ptb(0xfc, 1400, &hbh_quote), 48 + 56, key(0xfc, 2))?;
        e.dir().icmp6_packet_too_big += 1;
        e.ptb(v6(0xfc), 1400, pkt::HOPOPTS, (A6, 0, B6, 0));
        // Quote cut inside the IPv6 header: counted, inner fields zero.
        e.ip(&ptb(0xfb, 1300, &udp_quote[..20]), 68, key(0xfb, 2))?;
        e.dir().icmp6_packet_too_big += 1;
        e.ptb(v6(0xfb), 1300, 0, (V6_ANY, 0, V6_ANY, 0));
        // Quote cut 3 bytes into the TCP header: addresses and protocol, no ports.
        e.ip(&ptb(0xfa, 1350, &tcp_quote[..43]), 91, key(0xfa, 2))?;
        e.dir().icmp6_packet_too_big += 1;
        e.ptb(v6(0xfa), 1350, pkt::TCP, (A6, 0, B6, 0));
        // Destination unreachable (type 1): nothing recorded.
        let frame = from(0xf9, &pkt::icmp(1, 0, [0; 4], &udp_quote));
        e.ip(&frame, 96, key(0xf9, 1))?;
        e.check()?;
    }
    Ok(())
}

/// ICMP (1) is interpreted only inside IPv4 and ICMPv6 (58) only inside IPv6; the other way
/// round they are unknown transport protocols: ports 0 (no type/code/identifier), no
/// too-big counter or entry, and a body shorter than 8 bytes is not truncated.
fn icmp_protocols_only_in_their_ip_version(dp: &Dataplane<'_>) -> Result<()> {
    let mut e = Expect::new(dp);
    let frag_needed = pkt::icmp(
        3,
        4,
        [0, 0, 5, 0x78],
        &Ipv4::new(pkt::TCP).build(&Tcp::new(40000, 443, 1, pkt::ACK).build(&[])[..8]),
    );
    let too_big = pkt::icmp(
        2,
        0,
        1280u32.to_be_bytes(),
        &Ipv6::new().build(pkt::UDP, &pkt::udp(5000, 6000, &[])[..8]),
    );
    let echo = |ty: u8| pkt::icmp(ty, 0, [0x12, 0x34, 0, 1], &pkt::data(8));
    let k6 = (pkt::ICMP, A6, 0, B6, 0);
    let k4 = (pkt::ICMPV6, A, 0, B, 0);
    for kind in PROGRAMS {
        e.on(kind);
        // IPv6 carrying ICMP: a frag-needed, an echo request, 4 bytes.
        e.ip(&pkt::v6(pkt::ICMP, &frag_needed), 40 + 36, k6)?;
        e.ip(&pkt::v6(pkt::ICMP, &echo(8)), 40 + 16, k6)?;
        e.ip(&pkt::v6(pkt::ICMP, &frag_needed[..4]), 40 + 4, k6)?;
        // IPv4 carrying ICMPv6: a packet too big, an echo request, 4 bytes.
        e.ip(&pkt::v4(pkt::ICMPV6, &too_big), 20 + 56, k4)?;
        e.ip(&pkt::v4(pkt::ICMPV6, &echo(128)), 20 + 16, k4)?;
        e.ip(&pkt::v4(pkt::ICMPV6, &too_big[..4]), 20 + 4, k4)?;
        e.check()?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// GSO (tc only: the __sk_buff context carries gso_segs / gso_size into the test run)
// ---------------------------------------------------------------------------------------------

/// A GSO super-packet counts once in `packets` and gso_segs times in segments, size buckets,
/// df_over_mtu and retransmits; its segment size is headers + gso_size. With total length 0
/// (BIG TCP) the payload comes from the frame, so retransmissions are still seen.
fn gso_super_packets_from_skb_context(dp: &Dataplane<'_>) -> Result<()> {
    let mut e = Expect::new(dp);
    let seg = |tot_len: Option<u16>| {
        let mut ip = Ipv4::new(pkt::TCP);
        ip.df = true;
        ip.tot_len = tot_len;
        let tcp = Tcp::new(40000, 443, 5000, pkt::ACK).build(&pkt::data(3000));
        pkt::eth(pkt::ETH_IPV4, &ip.build(&tcp))
    };
    let (normal, big_tcp) = (seg(None), seg(Some(0)));
    let key = (pkt::TCP, A, 40000, B, 443);
    for kind in TC_PROGRAMS {
        e.on(kind);
        for frame in [&normal, &big_tcp] {
            run_ctx(dp, kind, frame, Some(&skb_ctx(3, 1000)))?;
            let d = e.dir();
            d.packets += 1;
            d.segments += 3;
            d.gso_packets += 1;
            d.bytes += frame.len() as u64;
            d.size_buckets[bucket(20 + 20 + 1000)] += 3;
            d.df_over_mtu += 3; // 1040 > 1000
            let f = e.flow(key);
            f.packets += 1;
            f.segments += 3;
            f.bytes += frame.len() as u64;
            f.max_segment = 1040;
            f.tcp_flags = pkt::ACK;
        }
        // The second super-packet resent seq 5000: three retransmitted segments.
        e.flow(key).retransmits = 3;
        e.check()?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// The tests: one data plane load each, cases run on empty maps
// ---------------------------------------------------------------------------------------------

/// Which ifindex and direction each hook reports; unwatched interfaces; refused inputs;
/// 7. the verdict of every program on every crafted input.
#[test]
fn hooks_verdicts_and_refused_inputs() -> Result<()> {
    if !ready() {
        return Ok(());
    }
    run_cases(
        Options::default(),
        &[
            (
                "hooks_count_loopback_ifindex_in_their_direction",
                ETHER_1500,
                hooks_count_loopback_ifindex_in_their_direction,
            ),
            (
                "unwatched_interfaces_are_not_counted",
                None,
                unwatched_interfaces_are_not_counted,
            ),
            (
                "slot_taken_by_same_remainder_falls_back",
                None,
                slot_taken_by_same_remainder_falls_back,
            ),
            (
                "inputs_shorter_than_headers_are_rejected_uncounted",
                ETHER_1500,
                inputs_shorter_than_headers_are_rejected_uncounted,
            ),
            (
                "every_program_passes_every_crafted_packet",
                ETHER_1500,
                every_program_passes_every_crafted_packet,
            ),
        ],
    )
}

/// 1. Every protocol and link type.
#[test]
fn protocols_and_link_types() -> Result<()> {
    if !ready() {
        return Ok(());
    }
    run_cases(
        Options::default(),
        &[
            (
                "ethernet_ipv4_tcp_udp_icmp_echo",
                ETHER_1500,
                ethernet_ipv4_tcp_udp_icmp_echo,
            ),
            (
                "ethernet_ipv6_tcp_udp_icmpv6_echo",
                ETHER_1500,
                ethernet_ipv6_tcp_udp_icmpv6_echo,
            ),
            (
                "raw_ip_ipv4_ipv6_via_xdp",
                Some((1420, LinkType::RawIp)),
                raw_ip_ipv4_ipv6_via_xdp,
            ),
            (
                "non_ip_frames_arp_lldp_llc",
                ETHER_1500,
                non_ip_frames_arp_lldp_llc,
            ),
            (
                "ethertype_zero_is_non_ip",
                ETHER_1500,
                ethertype_zero_is_non_ip,
            ),
            (
                "vlan_single_qinq_and_too_deep",
                ETHER_1500,
                vlan_single_qinq_and_too_deep,
            ),
        ],
    )
}

/// 2. Malformed headers.
#[test]
fn malformed_headers() -> Result<()> {
    if !ready() {
        return Ok(());
    }
    run_cases(
        Options::default(),
        &[
            (
                "truncated_l2_l3_headers",
                ETHER_1500,
                truncated_l2_l3_headers,
            ),
            (
                "truncated_l4_headers_still_create_flow",
                ETHER_1500,
                truncated_l4_headers_still_create_flow,
            ),
            ("ipv4_ihl_and_options", ETHER_1500, ipv4_ihl_and_options),
            (
                "ipv4_total_length_vs_frame_length",
                ETHER_1500,
                ipv4_total_length_vs_frame_length,
            ),
            (
                "ip_length_field_below_header_length_uses_frame_length",
                ETHER_1500,
                ip_length_field_below_header_length_uses_frame_length,
            ),
            (
                "ipv6_payload_length_zero_uses_frame_length",
                ETHER_1500,
                ipv6_payload_length_zero_uses_frame_length,
            ),
            (
                "tcp_data_offset_below_five",
                ETHER_1500,
                tcp_data_offset_below_five,
            ),
            (
                "tcp_data_offset_past_frame_is_truncated_but_recorded",
                ETHER_1500,
                tcp_data_offset_past_frame_is_truncated_but_recorded,
            ),
            (
                "ipv6_extension_header_chains",
                ETHER_1500,
                ipv6_extension_header_chains,
            ),
        ],
    )
}

/// 2. IPv4 and IPv6 fragments.
#[test]
fn fragments_first_and_later() -> Result<()> {
    if !ready() {
        return Ok(());
    }
    run_cases(
        Options::default(),
        &[
            (
                "ipv4_fragments_first_and_later",
                ETHER_1500,
                ipv4_fragments_first_and_later,
            ),
            (
                "ipv6_fragment_header_first_and_later",
                ETHER_1500,
                ipv6_fragment_header_first_and_later,
            ),
            (
                "ipv6_later_fragment_stops_extension_header_walk",
                ETHER_1500,
                ipv6_later_fragment_stops_extension_header_walk,
            ),
            (
                "ipv6_atomic_fragment_is_not_a_fragment",
                ETHER_1500,
                ipv6_atomic_fragment_is_not_a_fragment,
            ),
        ],
    )
}

/// 3. SYN MSS, TCP flags, max segment, passive retransmission detection.
#[test]
fn tcp_mss_flags_and_retransmits() -> Result<()> {
    if !ready() {
        return Ok(());
    }
    run_cases(
        Options::default(),
        &[
            ("tcp_syn_mss_extraction", ETHER_1500, tcp_syn_mss_extraction),
            (
                "tcp_flags_max_segment_and_passive_retransmits",
                ETHER_1500,
                tcp_flags_max_segment_and_passive_retransmits,
            ),
        ],
    )
}

/// 4. Size histogram boundaries, DF over MTU, GSO segment accounting.
#[test]
fn sizes_mtu_and_gso() -> Result<()> {
    if !ready() {
        return Ok(());
    }
    run_cases(
        Options::default(),
        &[
            (
                "size_histogram_bucket_boundaries",
                ETHER_1500,
                size_histogram_bucket_boundaries,
            ),
            (
                "df_over_mtu_ipv4_df_and_ipv6",
                Some((1400, LinkType::Ether)),
                df_over_mtu_ipv4_df_and_ipv6,
            ),
            (
                "gso_super_packets_from_skb_context",
                Some((1000, LinkType::Ether)),
                gso_super_packets_from_skb_context,
            ),
        ],
    )
}

/// 5. WireGuard by shape, VXLAN and GENEVE by port and header bits.
#[test]
fn encapsulations() -> Result<()> {
    if !ready() {
        return Ok(());
    }
    run_cases(
        Options::default(),
        &[
            (
                "wireguard_messages_by_shape",
                ETHER_1500,
                wireguard_messages_by_shape,
            ),
            ("vxlan_and_geneve", ETHER_1500, vxlan_and_geneve),
        ],
    )
}

/// 6. ICMP fragmentation needed and ICMPv6 packet too big.
#[test]
fn icmp_too_big_messages() -> Result<()> {
    if !ready() {
        return Ok(());
    }
    run_cases(
        Options::default(),
        &[
            (
                "icmp_frag_needed_records_too_big",
                ETHER_1500,
                icmp_frag_needed_records_too_big,
            ),
            (
                "icmpv6_packet_too_big_records_too_big",
                ETHER_1500,
                icmpv6_packet_too_big_records_too_big,
            ),
            (
                "icmp_protocols_only_in_their_ip_version",
                ETHER_1500,
                icmp_protocols_only_in_their_ip_version,
            ),
        ],
    )
}

// ---------------------------------------------------------------------------------------------
// 7. Every program passes every input
// ---------------------------------------------------------------------------------------------

/// Crafted frames from all categories above, whole and cut at header boundaries.
fn corpus() -> Vec<Vec<u8>> {
    let mut c = Vec::new();
    let tcp = Tcp::new(1, 2, 3, pkt::SYN)
        .opts(&[2, 4, 5, 0xb4])
        .build(&pkt::data(10));
    let udp = pkt::udp(51820, 51820, &pkt::wg(1, 148));
    let icmp = pkt::icmp(3, 4, [0, 0, 5, 0], &Ipv4::new(pkt::TCP).build(&tcp[..8]));
    let icmp6 = pkt::icmp(2, 0, [0, 0, 5, 0], &Ipv6::new().build(pkt::UDP, &udp[..8]));
    for (proto, l4) in [(pkt::TCP, &tcp), (pkt::UDP, &udp), (pkt::ICMP, &icmp)] {
        let f = pkt::v4(proto, l4);
        for cut in 0..=f.len().min(80) {
            c.push(f[..cut].to_vec());
        }
        c.push(f);
        let mut ip = Ipv4::new(proto);
        ip.mf = true;
        ip.df = true;
        ip.options = vec![1; 8];
        c.push(pkt::eth_tagged(
            &[pkt::VLAN_AD, pkt::VLAN_Q],
            pkt::ETH_IPV4,
            &ip.build(l4),
        ));
    }
    for (proto, l4) in [(pkt::TCP, &tcp), (pkt::UDP, &udp), (pkt::ICMPV6, &icmp6)] {
        let exts = [
            Ext::Hop(0),
            Ext::Frag {
                offset: 3,
                more: false,
            },
            Ext::Dest(2),
        ];
        let f = pkt::eth(pkt::ETH_IPV6, &Ipv6::new().exts(&exts).build(proto, l4));
        for cut in 0..=f.len().min(120) {
            c.push(f[..cut].to_vec());
        }
        c.push(f);
        c.push(pkt::v6(proto, l4));
    }
    c.push(pkt::eth(pkt::ETH_ARP, &[0; 28]));
    c.push(pkt::eth(0, &[0; 46]));
    c.push(vec![0xff; 14]);
    c.push(vec![0; 1514]);
    c
}

/// XDP returns XDP_PASS (2) and tc returns TCX_NEXT (-1) for every input the kernel accepts;
/// the kernel refuses exactly what [`kernel_rejects`] predicts.
fn every_program_passes_every_crafted_packet(dp: &Dataplane<'_>) -> Result<()> {
    let frames = corpus();
    {
        let mut accepted = [0u64; 2];
        for kind in PROGRAMS {
            for f in &frames {
                match test_run(dp, kind, f, None) {
                    Ok(ret) => {
                        assert!(!kernel_rejects(kind, f), "{kind:?} accepted {f:02x?}");
                        assert_eq!(ret, pass_code(kind), "{kind:?} on {f:02x?}");
                        accepted[direction(kind) as usize] += 1;
                    }
                    Err(err) => {
                        assert!(kernel_rejects(kind, f), "{kind:?} refused {f:02x?}: {err}");
                        assert_eq!(err.kind(), ErrorKind::InvalidInput);
                    }
                }
            }
        }
        let c = counters(dp)?;
        assert_eq!([c.ingress.packets, c.egress.packets], accepted);
        // Raw IP: the same frames without their Ethernet header.
        dp.watch(LO, 1500, LinkType::RawIp)?;
        let mut raw_accepted = 0;
        for f in frames.iter().filter(|f| f.len() >= 14) {
            let raw = &f[14..];
            match test_run(dp, ProgramKind::XdpIngress, raw, None) {
                Ok(ret) => {
                    assert!(raw.len() >= 14, "accepted {raw:02x?}");
                    assert_eq!(ret, XDP_PASS);
                    raw_accepted += 1;
                }
                Err(err) => {
                    assert!(raw.len() < 14, "refused {raw:02x?}: {err}");
                }
            }
        }
        assert_eq!(counters(dp)?.ingress.packets, accepted[0] + raw_accepted);
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// 8. Randomised batches, checked against a model of the C parser
// ---------------------------------------------------------------------------------------------

/// xorshift64*: tiny, deterministic, good enough for fuzzing headers.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed.max(1))
    }
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
    fn u8(&mut self) -> u8 {
        self.next() as u8
    }
    fn u16(&mut self) -> u16 {
        self.next() as u16
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.u8()).collect()
    }
    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())]
    }
}

mod model {
    //! What packet.bpf.c does to the counters for one frame (no GSO), written independently
    //! from the C code's documented rules (l3_parse, l4_parse, account).

    use super::bucket;
    use netdoctor::kernel::packet::counters::DirCounters;

    fn be16(p: &[u8], at: usize) -> u16 {
        u16::from_be_bytes([p[at], p[at + 1]])
    }

    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Frag {
        None,
        First,
        Later,
    }

    struct L3 {
        /// Network header offset in the frame.
        off: usize,
        /// Transport header offset in the frame.
        l4: usize,
        /// Network header length (IPv6: with the extension headers walked).
        hdr_len: u32,
        /// IP length the header declares; 0 for IPv6 payload length 0.
        ip_len: u32,
        family: u8,
        proto: u8,
        frag: Frag,
        df: bool,
    }

    fn ipv4(p: &[u8], off: usize) -> Option<L3> {
        if off + 20 > p.len() || p[off] >> 4 != 4 || p[off] & 0xf < 5 {
            return None;
        }
        let hlen = usize::from(p[off] & 0xf) * 4;
        if off + hlen > p.len() {
            return None;
        }
        let frag = be16(p, off + 6);
        Some(L3 {
            off,
            l4: off + hlen,
            hdr_len: hlen as u32,
            ip_len: u32::from(be16(p, off + 2)),
            family: 4,
            proto: p[off + 9],
            frag: if frag & 0x1fff != 0 {
                Frag::Later
            } else if frag & 0x2000 != 0 {
                Frag::First
            } else {
                Frag::None
            },
            df: frag & 0x4000 != 0,
        })
    }

    fn ipv6(p: &[u8], off: usize) -> Option<L3> {
        if off + 40 > p.len() || p[off] >> 4 != 6 {
            return None;
        }
        let mut pos = off + 40;
        let mut next = p[off + 6];
        let mut frag = Frag::None;
        // At most six extension headers, fragment headers included.
        for _ in 0..6 {
            if next == 44 {
                if pos + 8 > p.len() {
                    return None;
                }
                let offset_m = be16(p, pos + 2);
                if offset_m & !7 != 0 {
                    frag = Frag::Later;
                } else if offset_m & 1 != 0 {
                    frag = Frag::First;
                } // else atomic: no change
                next = p[pos];
                pos += 8;
                if frag == Frag::Later {
                    break; // the rest is payload
                }
                continue;
            }
            if !matches!(next, 0 | 43 | 60) {
                break;
            }
            if pos + 2 > p.len() {
                return None;
            }
            let len = (usize::from(p[pos + 1]) + 1) * 8;
            next = p[pos];
            if pos + len > p.len() {
                return None;
            }
            pos += len;
        }
        let payload_len = u32::from(be16(p, off + 4));
        Some(L3 {
            off,
            l4: pos,
            hdr_len: (pos - off) as u32,
            ip_len: if payload_len == 0 {
                0
            } else {
                payload_len + 40
            },
            family: 6,
            proto: next,
            frag,
            df: true,
        })
    }

    /// What one accepted run does.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Outcome {
        NonIp,
        /// L2/L3 headers cut or invalid.
        Truncated,
        /// Parsed as IP: reaches the size histogram and the flow table.
        Ip,
    }

    /// The network layer of a frame, or why it has none (l3_parse's status).
    fn network(p: &[u8], raw_ip: bool) -> Result<L3, Outcome> {
        let (v4, off) = if raw_ip {
            // The kernel refuses inputs shorter than 14 bytes.
            match p[0] >> 4 {
                4 => (true, 0),
                6 => (false, 0),
                _ => return Err(Outcome::NonIp),
            }
        } else {
            if p.len() < 14 {
                return Err(Outcome::Truncated);
            }
            let mut proto = be16(p, 12);
            let mut pos = 14;
            for _ in 0..2 {
                if proto != 0x8100 && proto != 0x88a8 {
                    break;
                }
                if pos + 4 > p.len() {
                    return Err(Outcome::Truncated);
                }
                proto = be16(p, pos + 2);
                pos += 4;
            }
            match proto {
                0x0800 => (true, pos),
                0x86dd => (false, pos),
                _ => return Err(Outcome::NonIp),
            }
        };
        let l3 = if v4 { ipv4(p, off) } else { ipv6(p, off) };
        l3.ok_or(Outcome::Truncated)
    }

    /// Applies one frame (accepted by the kernel) to `d`; `xdp` when an XDP program saw it.
    pub fn apply(p: &[u8], raw_ip: bool, xdp: bool, mtu: u32, d: &mut DirCounters) -> Outcome {
        d.packets += 1;
        d.segments += 1;
        d.bytes += p.len() as u64;
        let l3 = match network(p, raw_ip) {
            Ok(l3) => l3,
            Err(outcome) => {
                if outcome == Outcome::NonIp {
                    d.non_ip += 1;
                } else {
                    d.truncated += 1;
                }
                return outcome;
            }
        };
        // The header's length only if it covers the network header and is below the frame.
        let frame_l3 = (p.len() - l3.off) as u32;
        let ip_len = if l3.ip_len >= l3.hdr_len && l3.ip_len < frame_l3 {
            l3.ip_len
        } else {
            frame_l3
        };
        // Segment size and count; XDP has no GSO metadata, so an oversized TCP frame there
        // is taken for a GRO aggregate of MTU-sized segments.
        let (mut seg_len, mut segs) = (ip_len, 1u64);
        // A later fragment carries no transport header.
        if l3.frag != Frag::Later {
            let l4 = &p[l3.l4..];
            let tcp_ok = l3.proto == 6 && l4.len() >= 20 && l4[12] >> 4 >= 5;
            if xdp && tcp_ok {
                let tcp_hdr = u32::from(l4[12] >> 4) * 4;
                let l4_len = ip_len.saturating_sub(l3.hdr_len);
                let payload = l4_len.saturating_sub(tcp_hdr);
                if seg_len > mtu && mtu > l3.hdr_len + tcp_hdr {
                    let mss = mtu - l3.hdr_len - tcp_hdr;
                    segs = u64::from(payload.div_ceil(mss).max(1));
                    seg_len = mtu;
                    d.segments += segs - 1;
                }
            }
            let icmp4 = l3.family == 4 && l3.proto == 1;
            let icmp6 = l3.family == 6 && l3.proto == 58;
            let cut = match l3.proto {
                // Fixed header cut, data offset below 5, or options cut (the last one still
                // records ports and flags, which the counters do not show).
                6 => l4.len() < 20 || l4[12] >> 4 < 5 || usize::from(l4[12] >> 4) * 4 > l4.len(),
                17 => l4.len() < 8,
                _ if icmp4 || icmp6 => l4.len() < 8,
                _ => false,
            };
            if cut {
                d.truncated += 1;
            } else if icmp4 && l4[0] == 3 && l4[1] == 4 {
                d.icmp_frag_needed += 1;
            } else if icmp6 && l4[0] == 2 {
                d.icmp6_packet_too_big += 1;
            }
        }
        d.size_buckets[bucket(seg_len)] += segs;
        match l3.frag {
            Frag::First => d.fragments_first += 1,
            Frag::Later => d.fragments_later += 1,
            Frag::None => {}
        }
        if l3.df && seg_len > mtu {
            d.df_over_mtu += segs;
        }
        Outcome::Ip
    }
}

/// Ports from a small set, so the flow table stays far below its per-CPU LRU capacity.
fn random_port(rng: &mut Rng) -> u16 {
    rng.pick(&[
        4789, 8472, 6081, 51820, 53, 443, 10000, 0, 1, 2, 3, 4, 5, 6, 7, 8,
    ])
}

fn random_l4(rng: &mut Rng, proto: u8, wild: bool) -> Vec<u8> {
    let payload_len = if rng.chance(70) {
        rng.below(64)
    } else {
        rng.below(400)
    };
    match proto {
        pkt::TCP => {
            let (sport, dport) = (random_port(rng), random_port(rng));
            let mut t = Tcp::new(sport, dport, rng.next() as u32, rng.u8());
            for _ in 0..rng.below(5) {
                match rng.below(5) {
                    0 => t.options.extend([2, 4, rng.u8(), rng.u8()]),
                    1 => t.options.push(1),
                    2 => t.options.extend([3, 3, rng.u8()]),
                    3 => t.options.extend([8, 10, 0, 0, 0, 1, 0, 0, 0, 2]),
                    _ => {
                        let n = rng.below(6);
                        t.options.extend(rng.bytes(n));
                    }
                }
            }
            if wild && rng.chance(25) {
                t.doff = Some(rng.below(16) as u8);
            }
            t.build(&rng.bytes(payload_len))
        }
        pkt::UDP => {
            let (sport, dport) = (random_port(rng), random_port(rng));
            let payload = match rng.below(4) {
                0 => {
                    let len = rng.pick(&[148, 92, 64, 32, 48, 33, 4, 2]);
                    pkt::wg(1 + rng.below(4) as u8, len)
                }
                1 => {
                    let mut v = rng.bytes(8 + payload_len);
                    v[0] = rng.pick(&[0x08, 0x00, 0x40, 0x0c]);
                    v
                }
                _ => rng.bytes(payload_len),
            };
            pkt::udp(sport, dport, &payload)
        }
        pkt::ICMP | pkt::ICMPV6 => {
            // Mostly the protocol's own types, frag-needed / packet-too-big most often; a few
            // of the other version's, which must not count.
            let known: &[(u8, u8)] = if proto == pkt::ICMP {
                &[
                    (3, 4),
                    (3, 4),
                    (8, 0),
                    (0, 0),
                    (3, 3),
                    (11, 0),
                    (2, 0),
                    (128, 0),
                ]
            } else {
                &[
                    (2, 0),
                    (2, 0),
                    (128, 0),
                    (129, 0),
                    (1, 4),
                    (135, 0),
                    (3, 4),
                    (8, 0),
                ]
            };
            let (ty, code) = if rng.chance(20) {
                (rng.u8(), rng.u8())
            } else {
                rng.pick(known)
            };
            let quote = if rng.chance(50) {
                let b = rng.bytes(8);
                Ipv4::new(pkt::TCP).build(&b)
            } else {
                let b = rng.bytes(8);
                Ipv6::new().build(pkt::UDP, &b)
            };
            let cut = rng.below(quote.len() + 1);
            let rest = [rng.u8(), rng.u8(), rng.u8(), rng.u8()];
            pkt::icmp(ty, code, rest, &quote[..cut])
        }
        _ => rng.bytes(payload_len),
    }
}

/// A transport protocol for an IP packet whose own ICMP is `icmp` (ICMP for IPv4, ICMPv6 for
/// IPv6); now and then the other ICMP, which the data plane must treat as unknown.
fn random_proto(rng: &mut Rng, icmp: u8) -> u8 {
    let other_icmp = if icmp == pkt::ICMP {
        pkt::ICMPV6
    } else {
        pkt::ICMP
    };
    match rng.below(20) {
        0..=5 => pkt::TCP,
        6..=11 => pkt::UDP,
        12..=15 => icmp,
        16 => other_icmp,
        17..=18 => rng.pick(&[
            pkt::HOPOPTS,
            pkt::ROUTING,
            pkt::FRAGMENT,
            pkt::DSTOPTS,
            pkt::NONXT,
        ]),
        _ => rng.u8(),
    }
}

/// Pads an IP packet to a length around the MTU / bucket bounds now and then.
fn random_grow(rng: &mut Rng, pkt: &mut Vec<u8>) -> bool {
    if !rng.chance(12) {
        return false;
    }
    let total = rng.pick(&[
        576, 577, 1280, 1281, 1380, 1400, 1401, 1420, 1421, 1440, 1450, 1480, 1500, 1501,
    ]);
    if pkt.len() >= total {
        return false;
    }
    pkt.resize(total, 0);
    true
}

fn random_ipv4(rng: &mut Rng, wild: bool) -> Vec<u8> {
    let proto = random_proto(rng, pkt::ICMP);
    let mut ip = Ipv4::new(proto);
    ip.src[3] = rng.below(4) as u8;
    ip.df = rng.chance(50);
    ip.mf = rng.chance(15);
    if rng.chance(15) {
        ip.frag_offset = rng.u16() & 0x1fff;
    }
    if rng.chance(15) {
        let n = 4 * rng.below(11);
        ip.options = rng.bytes(n);
    }
    if wild {
        if rng.chance(20) {
            ip.ihl = Some(rng.below(16) as u8);
        }
        if rng.chance(25) {
            let choices = [0, rng.u16(), rng.below(64) as u16];
            ip.tot_len = Some(rng.pick(&choices));
        }
        if rng.chance(5) {
            ip.version = rng.below(16) as u8;
        }
    }
    let l4 = random_l4(rng, proto, wild);
    let mut p = ip.build(&l4);
    if random_grow(rng, &mut p) && ip.tot_len.is_none() {
        let t = (p.len() as u16).to_be_bytes();
        p[2..4].copy_from_slice(&t);
    }
    p
}

fn random_ipv6(rng: &mut Rng, wild: bool) -> Vec<u8> {
    let proto = random_proto(rng, pkt::ICMPV6);
    let n = rng.pick(&[0, 0, 0, 1, 1, 2, 3, 6, 7, 8]);
    let exts: Vec<Ext> = (0..n)
        .map(|_| match rng.below(4) {
            0 => Ext::Hop(rng.below(4) as u8),
            1 => Ext::Routing(rng.below(4) as u8),
            2 => Ext::Dest(rng.below(4) as u8),
            _ => Ext::Frag {
                offset: if rng.chance(50) {
                    0
                } else {
                    rng.u16() & 0x1fff
                },
                more: rng.chance(50),
            },
        })
        .collect();
    let mut ip = Ipv6::new().exts(&exts);
    ip.src[15] = rng.below(4) as u8;
    if wild && rng.chance(25) {
        let choices = [0, rng.u16(), rng.below(64) as u16];
        ip.payload_len = Some(rng.pick(&choices));
    }
    if wild && rng.chance(5) {
        ip.version = rng.below(16) as u8;
    }
    let l4 = random_l4(rng, proto, wild);
    let mut p = ip.build(proto, &l4);
    if random_grow(rng, &mut p) && ip.payload_len.is_none() {
        let t = ((p.len() - 40) as u16).to_be_bytes();
        p[4..6].copy_from_slice(&t);
    }
    p
}

/// One random input: random bytes (20 %), a valid packet truncated at a random point (40 %),
/// or headers with random lengths/flags/fields (40 %).
fn random_frame(rng: &mut Rng, raw_ip: bool) -> Vec<u8> {
    let class = rng.below(10);
    if class < 2 {
        let n = rng.below(120);
        return rng.bytes(n);
    }
    let wild = class >= 6;
    let (ethertype, l3) = match rng.below(12) {
        0..=5 => (pkt::ETH_IPV4, random_ipv4(rng, wild)),
        6..=9 => (pkt::ETH_IPV6, random_ipv6(rng, wild)),
        10 => (pkt::ETH_ARP, rng.bytes(28)),
        _ => {
            let n = rng.below(60);
            (rng.u16(), rng.bytes(n))
        }
    };
    let mut frame = if raw_ip {
        l3
    } else {
        let tags: Vec<u16> = (0..rng.pick(&[0, 0, 0, 0, 0, 1, 1, 2, 3]))
            .map(|_| rng.pick(&[pkt::VLAN_Q, pkt::VLAN_AD]))
            .collect();
        let ethertype = if wild && rng.chance(5) {
            rng.pick(&[pkt::ETH_IPV4, pkt::ETH_IPV6, 0])
        } else {
            ethertype
        };
        pkt::eth_tagged(&tags, ethertype, &l3)
    };
    if !wild {
        let cut = rng.below(frame.len() + 1);
        frame.truncate(cut);
    } else if rng.chance(20) {
        let n = rng.below(24);
        let pad = rng.bytes(n);
        frame.extend(pad);
    }
    frame
}

fn minus(a: &DirCounters, b: &DirCounters) -> DirCounters {
    DirCounters {
        packets: a.packets - b.packets,
        segments: a.segments - b.segments,
        bytes: a.bytes - b.bytes,
        size_buckets: a
            .size_buckets
            .iter()
            .zip(&b.size_buckets)
            .map(|(x, y)| x - y)
            .collect(),
        non_ip: a.non_ip - b.non_ip,
        truncated: a.truncated - b.truncated,
        gso_packets: a.gso_packets - b.gso_packets,
        fragments_first: a.fragments_first - b.fragments_first,
        fragments_later: a.fragments_later - b.fragments_later,
        df_over_mtu: a.df_over_mtu - b.df_over_mtu,
        icmp_frag_needed: a.icmp_frag_needed - b.icmp_frag_needed,
        icmp6_packet_too_big: a.icmp6_packet_too_big - b.icmp6_packet_too_big,
    }
}

/// 10,000 random inputs through one program: every run passes (or is refused exactly as
/// [`kernel_rejects`] predicts), and the counters equal the model's, field by field.
fn randomised_batch(dp: &Dataplane<'_>, kind: ProgramKind, raw_ip: bool, seed: u64) -> Result<()> {
    const RUNS: usize = 10_000;
    const MTU: u32 = 1400;
    let link = if raw_ip {
        LinkType::RawIp
    } else {
        LinkType::Ether
    };
    dp.watch(LO, MTU, link)?;
    let dir = direction(kind);
    let start = dir_of(&counters(dp)?, dir).clone();
    let flow_start: (u64, u64) = dp
        .flows()?
        .iter()
        .filter(|f| f.direction == dir)
        .fold((0, 0), |(p, b), f| (p + f.packets, b + f.bytes));
    let mut rng = Rng::new(seed);
    let mut want = start.clone();
    let (mut accepted, mut rejected, mut l3_truncated) = (0u64, 0u64, 0u64);
    let (mut flow_packets, mut flow_bytes) = (0u64, 0u64);
    for i in 0..RUNS {
        let frame = random_frame(&mut rng, raw_ip);
        let rejects = kernel_rejects(kind, &frame);
        match test_run(dp, kind, &frame, None) {
            Err(e) => {
                assert!(rejects, "{kind:?} run {i}: refused {frame:02x?}: {e}");
                assert_eq!(e.kind(), ErrorKind::InvalidInput);
                rejected += 1;
            }
            Ok(ret) => {
                assert!(!rejects, "{kind:?} run {i}: accepted {frame:02x?}");
                assert_eq!(ret, pass_code(kind), "{kind:?} run {i}: {frame:02x?}");
                accepted += 1;
                match model::apply(
                    &frame,
                    raw_ip,
                    kind == ProgramKind::XdpIngress,
                    MTU,
                    &mut want,
                ) {
                    model::Outcome::Ip => {
                        flow_packets += 1;
                        flow_bytes += frame.len() as u64;
                    }
                    model::Outcome::Truncated => l3_truncated += 1,
                    model::Outcome::NonIp => {}
                }
            }
        }
        // Compare the running totals now and then, so a mismatch points near its cause.
        if i % 500 == 499 {
            let c = counters(dp)?;
            assert_eq!(
                dir_of(&c, dir),
                &want,
                "{kind:?} (raw {raw_ip}) after run {i}, last input {frame:02x?}"
            );
        }
    }
    let c = counters(dp)?;
    assert_eq!(
        dir_of(&c, dir),
        &want,
        "{kind:?} (raw {raw_ip}) final counters"
    );
    // The accounting identities, on this batch alone.
    let got = minus(dir_of(&c, dir), &start);
    assert_eq!(accepted + rejected, RUNS as u64);
    assert!(
        rejected > 100 && accepted > 8000,
        "{kind:?}: mix of {accepted} accepted, {rejected} refused"
    );
    assert_eq!(got.packets, accepted);
    // Only XDP turns an oversized TCP frame into several (GRO) segments.
    let extra_segments = got.segments - got.packets;
    if kind != ProgramKind::XdpIngress {
        assert_eq!(extra_segments, 0, "{kind:?}: segments beyond packets");
    }
    let parsed_segments: u64 = got.size_buckets.iter().sum();
    let parsed = parsed_segments - extra_segments;
    assert_eq!(
        got.packets,
        got.non_ip + l3_truncated + parsed,
        "{kind:?} split"
    );
    assert_eq!(parsed, flow_packets);
    let flows = dp.flows()?;
    let mine: Vec<&Flow> = flows.iter().filter(|f| f.direction == dir).collect();
    assert!(mine.iter().all(|f| f.ifindex == LO));
    let packets: u64 = mine.iter().map(|f| f.packets).sum();
    let bytes: u64 = mine.iter().map(|f| f.bytes).sum();
    assert_eq!(
        packets - flow_start.0,
        flow_packets,
        "{kind:?} flow packets"
    );
    assert_eq!(bytes - flow_start.1, flow_bytes, "{kind:?} flow bytes");
    // The mix must reach every outcome.
    for (name, v) in [
        ("non_ip", got.non_ip),
        ("truncated", got.truncated),
        ("fragments_first", got.fragments_first),
        ("fragments_later", got.fragments_later),
        ("df_over_mtu", got.df_over_mtu),
        ("icmp_frag_needed", got.icmp_frag_needed),
        ("icmp6_packet_too_big", got.icmp6_packet_too_big),
    ] {
        assert!(v >= 20, "{kind:?} (raw {raw_ip}): only {v} {name}");
    }
    assert!(got.size_buckets.iter().take(9).all(|&b| b > 0), "{got:?}");
    Ok(())
}

/// Randomised batches of 10,000 inputs for each program (and XDP on a raw-IP interface),
/// seeded and deterministic.
#[test]
fn randomised_batches_match_model() -> Result<()> {
    if !ready() {
        return Ok(());
    }
    with_dp(Options::default(), 1400, LinkType::Ether, |dp| {
        randomised_batch(dp, ProgramKind::XdpIngress, false, 0x5eed_0001)?;
        randomised_batch(dp, ProgramKind::TcIngress, false, 0x5eed_0002)?;
        randomised_batch(dp, ProgramKind::TcEgress, false, 0x5eed_0003)?;
        randomised_batch(dp, ProgramKind::XdpIngress, true, 0x5eed_0004)
    })
}

// ---------------------------------------------------------------------------------------------
// 10. The per-CPU flow cache: flows split across CPUs, colliding slots, shared TCP sequence
// ---------------------------------------------------------------------------------------------

/// Runs the rest of the calling thread on `cpu` (test runs execute on the caller's CPU).
fn pin(cpu: usize) -> Result<()> {
    use nix::sched::{sched_setaffinity, CpuSet};
    let mut set = CpuSet::new();
    set.set(cpu)?;
    sched_setaffinity(nix::unistd::Pid::from_raw(0), &set)?;
    Ok(())
}

/// Lets the calling thread run anywhere again.
fn unpin() -> Result<()> {
    use nix::sched::{sched_setaffinity, CpuSet};
    let mut set = CpuSet::new();
    for cpu in 0..CpuSet::count() {
        let _ = set.set(cpu);
    }
    sched_setaffinity(nix::unistd::Pid::from_raw(0), &set)?;
    Ok(())
}

/// Whether the thread can run on CPUs 0 and 1 (the cross-CPU cases need two).
fn two_cpus() -> bool {
    let ok = pin(1).is_ok() && pin(0).is_ok();
    let _ = unpin();
    ok
}

/// `flow_hash()` of packet.bpf.c for an IPv4 TCP/UDP flow on the loopback (10.0.0.1 ->
/// 10.0.0.2, the packet builder's addresses): the key's five native-endian 64-bit words and
/// its ports' 32-bit word, each times its constant, summed, then mixed.
fn flow_hash(dir: Direction, proto: u8, sport: u16, dport: u16) -> u64 {
    let mut key = [0u8; 44];
    key[0..4].copy_from_slice(&LO.to_ne_bytes());
    key[4] = dir as u8;
    key[5] = proto;
    key[6] = 4;
    key[8..12].copy_from_slice(&[10, 0, 0, 1]);
    key[24..28].copy_from_slice(&[10, 0, 0, 2]);
    key[40..42].copy_from_slice(&sport.to_ne_bytes());
    key[42..44].copy_from_slice(&dport.to_ne_bytes());
    let word = |i: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&key[8 * i..8 * i + 8]);
        u64::from_ne_bytes(w)
    };
    let ports = u64::from(u32::from_ne_bytes([key[40], key[41], key[42], key[43]]));
    let constants: [u64; 5] = [
        0x9e37_79b9_7f4a_7c15,
        0xff51_afd7_ed55_8ccd,
        0xc4ce_b9fe_1a85_ec53,
        0xd6e8_feb8_6659_fd93,
        0xa076_1d64_78bd_642f,
    ];
    let mut h = (0..5).fold(ports.wrapping_mul(0xe703_7ed1_a0b4_28db), |h, i| {
        h.wrapping_add(word(i).wrapping_mul(constants[i]))
    });
    h ^= h >> 32;
    h = h.wrapping_mul(0x8ebc_6af0_9c88_c6e3);
    h ^= h >> 29;
    h
}

/// Mirrors ND_FLOW_CACHE_SLOTS and ND_SEQ_SLOTS in netdoctor.h.
const CACHE_SLOTS: u64 = 1024;
const SEQ_SLOTS: u64 = 4096;

/// Two source ports (from `from`) whose flows `same(hash_a, hash_b)` says collide.
fn colliding_ports(
    dir: Direction,
    proto: u8,
    from: u16,
    same: impl Fn(u64, u64) -> bool,
) -> (u16, u16) {
    let first = flow_hash(dir, proto, from, 80);
    let other = (from + 1..u16::MAX)
        .find(|&p| same(first, flow_hash(dir, proto, p, 80)))
        .expect("a colliding port");
    (from, other)
}

/// Longer than ND_SLOT_IDLE_J / ND_SEQ_IDLE_J (4 jiffies) at any HZ (100 to 1000).
const IDLE: std::time::Duration = std::time::Duration::from_millis(100);

fn tcp_seg(sport: u16, seq: u32, flags: u8, len: usize) -> Vec<u8> {
    pkt::v4(
        pkt::TCP,
        &Tcp::new(sport, 80, seq, flags).build(&pkt::data(len)),
    )
}

/// One flow's packets on two CPUs: the counts add up, and a retransmission is recognised on
/// a CPU that never saw the data beyond it (the sequence state is shared).
fn flow_split_across_cpus(dp: &Dataplane<'_>) -> Result<()> {
    let mut e = Expect::new(dp);
    e.on(ProgramKind::TcIngress);
    let key = (pkt::TCP, A, 45000, B, 80);
    let syn = Tcp::new(key.2, 80, 999, pkt::SYN).opts(&[2, 4, 5, 0xb4]);
    pin(0)?;
    e.ip(&pkt::v4(pkt::TCP, &syn.build(&[])), 44, key)?;
    e.ip(&tcp_seg(key.2, 1000, pkt::ACK, 100), 140, key)?;
    e.ip(&tcp_seg(key.2, 1100, pkt::ACK, 100), 140, key)?;
    pin(1)?;
    e.ip(&tcp_seg(key.2, 1200, pkt::ACK | pkt::PSH, 300), 340, key)?;
    e.ip(&tcp_seg(key.2, 1500, pkt::ACK, 100), 140, key)?;
    let f = e.flow(key);
    f.tcp_flags = pkt::SYN | pkt::ACK | pkt::PSH;
    f.syn_mss = Some(1460);
    e.check()?;
    pin(0)?;
    // CPU 0 saw data up to 1200 only; 1300 was sent (on CPU 1) before.
    e.ip(&tcp_seg(key.2, 1300, pkt::ACK, 100), 140, key)?;
    pin(1)?;
    e.ip(&tcp_seg(key.2, 1000, pkt::ACK, 100), 140, key)?;
    e.ip(&tcp_seg(key.2, 1600, pkt::FIN | pkt::ACK, 0), 40, key)?;
    let f = e.flow(key);
    f.tcp_flags |= pkt::FIN;
    f.retransmits = 2;
    e.check()?;
    unpin()
}

/// (CPU, slot, source port) of every flow the cache holds, in order.
fn cached_ports(dp: &Dataplane<'_>) -> Vec<(u32, u64, u16)> {
    let mut v: Vec<(u32, u64, u16)> = dp
        .cached_flows()
        .into_iter()
        .map(|(cpu, slot, f)| (cpu, u64::from(slot), f.src_port))
        .collect();
    v.sort_unstable();
    v
}

/// A slot counts bytes in 32 bits; a flow that carries 4 GiB through one CPU's slot has it
/// flushed to the table just before the count would wrap, and totals stay exact: 1.45
/// million runs of a 3 kB datagram (4.3 GB) through one program on one CPU.
fn slot_bytes_flushed_before_they_wrap(dp: &Dataplane<'_>) -> Result<()> {
    let frame = pkt::v4(pkt::UDP, &pkt::udp(45000, 80, &pkt::data(2958)));
    let len = frame.len() as u64;
    let runs = (1u64 << 32) / len + 1_000;
    pin(0)?;
    let ran = test_run_repeat(
        dp,
        ProgramKind::TcEgress,
        &frame,
        None,
        i32::try_from(runs)?,
    );
    unpin()?;
    ran.context("repeated test run")?;
    let flows = dp.flows()?;
    let f = flows
        .iter()
        .find(|f| f.src_port == 45000)
        .context("the flow")?;
    ensure!(
        (f.packets, f.segments, f.bytes) == (runs, runs, runs * len),
        "{runs} runs of {len} bytes: counted {} packets, {} segments, {} bytes",
        f.packets,
        f.segments,
        f.bytes
    );
    // The slot holds only what came after the flush.
    let cached = dp.cached_flows();
    let (_, _, slot) = cached
        .iter()
        .find(|(_, _, f)| f.src_port == 45000)
        .context("the flow's slot")?;
    ensure!(
        slot.packets < runs && slot.bytes == slot.packets * len,
        "no flush: the slot holds {} packets, {} bytes of {runs} packets",
        slot.packets,
        slot.bytes
    );
    Ok(())
}

/// Two flows in one slot of one CPU: while the first is busy the second is counted in the
/// table; once the first has been idle the second takes the slot, and the first's counts
/// move to the table. Totals stay exact throughout.
fn colliding_flows_share_a_slot(dp: &Dataplane<'_>) -> Result<()> {
    let mut e = Expect::new(dp);
    e.on(ProgramKind::TcEgress);
    let (a, b) = colliding_ports(Direction::Egress, pkt::UDP, 46000, |x, y| {
        x % CACHE_SLOTS == y % CACHE_SLOTS
    });
    let udp = |sport: u16, n: usize| pkt::v4(pkt::UDP, &pkt::udp(sport, 80, &pkt::data(n)));
    let ka = (pkt::UDP, A, a, B, 80);
    let kb = (pkt::UDP, A, b, B, 80);
    let slot = flow_hash(Direction::Egress, pkt::UDP, a, 80) % CACHE_SLOTS;
    pin(0)?;
    for n in [100, 200] {
        e.ip(&udp(a, n), 28 + n as u32, ka)?;
    }
    e.ip(&udp(b, 300), 328, kb)?; // slot busy with a: counted in the table
    e.ip(&udp(a, 50), 78, ka)?;
    e.check()?;
    // The mirror of flow_hash() is right and the two flows do collide: a holds the slot.
    ensure!(
        cached_ports(dp) == [(0, slot, a)],
        "a in slot {slot} of CPU 0, b not cached"
    );
    std::thread::sleep(IDLE);
    e.ip(&udp(b, 400), 428, kb)?; // a idle: retired into the table, b takes the slot
    e.ip(&udp(b, 10), 38, kb)?;
    e.check()?;
    ensure!(cached_ports(dp) == [(0, slot, b)], "b took slot {slot}");
    std::thread::sleep(IDLE);
    e.ip(&udp(a, 60), 88, ka)?; // and back
    e.check()?;
    unpin()
}

/// Two TCP flows whose sequence state would share an entry: the second keeps its state in
/// the table while the first is busy, takes the entry over once the first is idle (writing
/// the first's state back), and no retransmission is missed or invented on either.
fn colliding_flows_share_sequence_state(dp: &Dataplane<'_>) -> Result<()> {
    let mut e = Expect::new(dp);
    e.on(ProgramKind::TcIngress);
    let (c, d) = colliding_ports(Direction::Ingress, pkt::TCP, 47000, |x, y| {
        (x >> 16) % SEQ_SLOTS == (y >> 16) % SEQ_SLOTS && (x >> 32) | 1 != (y >> 32) | 1
    });
    let kc = (pkt::TCP, A, c, B, 80);
    let kd = (pkt::TCP, A, d, B, 80);
    for (sport, seq, key) in [
        (c, 1000, kc), // c owns the entry
        (c, 1100, kc),
        (d, 5000, kd), // busy: d's state goes to its table entry
        (d, 5100, kd),
        (d, 5000, kd), // retransmission, seen through the table state
        (c, 1000, kc), // retransmission, seen through the entry
    ] {
        e.ip(&tcp_seg(sport, seq, pkt::ACK, 100), 140, key)?;
    }
    e.flow(kc).retransmits = 1;
    e.flow(kd).retransmits = 1;
    std::thread::sleep(IDLE);
    for (sport, seq, key) in [
        (d, 5200, kd), // c idle: d takes the entry, c's state is written back
        (c, 1100, kc), // retransmission: c's state is in its table entry now
        (c, 1200, kc),
        (d, 5100, kd), // retransmission, through the entry
        (d, 5300, kd),
    ] {
        e.ip(&tcp_seg(sport, seq, pkt::ACK, 100), 140, key)?;
    }
    e.flow(kc).retransmits = 2;
    e.flow(kd).retransmits = 2;
    for key in [kc, kd] {
        e.flow(key).tcp_flags = pkt::ACK;
    }
    e.check()
}

/// 10. The flow cache: one flow on two CPUs, two flows in one slot, shared sequence state, and
///     32-bit slot counts flushed before they wrap.
#[test]
fn flow_cache_cpus_and_collisions() -> Result<()> {
    if !ready() {
        return Ok(());
    }
    let mut cases: Vec<Case> = vec![
        (
            "colliding_flows_share_a_slot",
            ETHER_1500,
            colliding_flows_share_a_slot,
        ),
        (
            "colliding_flows_share_sequence_state",
            ETHER_1500,
            colliding_flows_share_sequence_state,
        ),
        (
            "slot_bytes_flushed_before_they_wrap",
            ETHER_1500,
            slot_bytes_flushed_before_they_wrap,
        ),
    ];
    if two_cpus() {
        cases.push(("flow_split_across_cpus", ETHER_1500, flow_split_across_cpus));
    } else {
        println!("SKIP: flow_split_across_cpus needs CPUs 0 and 1");
    }
    run_cases(Options::default(), &cases)
}

// ---------------------------------------------------------------------------------------------
// 11. The fast path for plain TCP and UDP agrees with the stages
// ---------------------------------------------------------------------------------------------

/// Sequence state of the few flows [`tcp_traffic_frame`] draws from.
struct TcpFlows {
    next_seq: [u32; 8],
}

/// Traffic as a busy link or tunnel underlay carries it, mixed with what the fast path must
/// leave to the stages. TCP on eight flows (five IPv4, three IPv6) whose sequence numbers
/// mostly advance and now and then go back (retransmissions, reordering), with ACK/PSH/FIN
/// flags, timestamp options, SYNs with an MSS option; UDP with WireGuard, VXLAN, GENEVE,
/// tunnel-port or random payloads; now and then a VLAN tag, IPv4 options, a cut or
/// padding; and one input in six from the general generator. Also returns whether the frame
/// is plain TCP or UDP, which `fast_account` takes whole.
fn plain_traffic_frame(rng: &mut Rng, raw_ip: bool, flows: &mut TcpFlows) -> (Vec<u8>, bool) {
    if rng.chance(16) {
        return (random_frame(rng, raw_ip), false);
    }
    let flow = rng.below(flows.next_seq.len());
    let (proto, l4) = if rng.chance(25) {
        (pkt::UDP, random_l4(rng, pkt::UDP, false))
    } else {
        (pkt::TCP, tcp_segment(rng, flow, flows))
    };
    let mut plain = proto == pkt::UDP || l4[13] & pkt::SYN == 0;
    let (ethertype, l3) = if flow >= 5 {
        let mut ip = Ipv6::new();
        ip.src[15] = flow as u8;
        (pkt::ETH_IPV6, ip.build(proto, &l4))
    } else {
        let mut ip = Ipv4::new(proto);
        ip.src[3] = flow as u8;
        ip.df = rng.chance(70);
        if rng.chance(10) {
            ip.options = vec![1, 1, 1, 1];
            plain = false;
        }
        (pkt::ETH_IPV4, ip.build(&l4))
    };
    let mut frame = if raw_ip {
        l3
    } else if rng.chance(10) {
        plain = false;
        pkt::eth_tagged(&[pkt::VLAN_Q], ethertype, &l3)
    } else {
        pkt::eth(ethertype, &l3)
    };
    if rng.chance(8) {
        let cut = rng.below(frame.len() + 1);
        frame.truncate(cut);
        plain = false;
    } else if rng.chance(5) {
        let n = 1 + rng.below(20);
        frame.extend(rng.bytes(n));
    }
    (frame, plain)
}

/// A TCP segment of `flow` (see [`plain_traffic_frame`]).
fn tcp_segment(rng: &mut Rng, flow: usize, flows: &mut TcpFlows) -> Vec<u8> {
    let payload = rng.pick(&[0usize, 0, 0, 1, 100, 536, 1000, 1348, 1448, 2000]);
    let next = flows.next_seq[flow];
    let seq = if rng.chance(10) {
        next.wrapping_sub(rng.below(4000) as u32)
    } else {
        next
    };
    let end = seq.wrapping_add(payload as u32);
    if (end.wrapping_sub(next) as i32) > 0 {
        flows.next_seq[flow] = end;
    }
    let syn = rng.chance(4);
    let mut flags = pkt::ACK;
    if syn {
        flags = rng.pick(&[pkt::SYN, pkt::SYN | pkt::ACK]);
    } else {
        if rng.chance(30) {
            flags |= pkt::PSH;
        }
        if rng.chance(3) {
            flags |= pkt::FIN;
        }
    }
    let mut tcp = Tcp::new(40000 + flow as u16, 443, seq, flags);
    if syn {
        tcp.options.extend([2, 4, 0x05, 0x78 + flow as u8]);
    }
    if rng.chance(40) {
        tcp.options.extend([1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2]);
    }
    tcp.build(&rng.bytes(payload))
}

/// The flows of `dp`, times left out, in a stable order.
fn flows_untimed(dp: &Dataplane<'_>) -> Result<Vec<Flow>> {
    let mut flows = dp.flows()?;
    for f in &mut flows {
        f.first_seen_ms = 0;
        f.last_seen_ms = 0;
    }
    flows.sort_by_key(flow_id);
    Ok(flows)
}

/// `fast_account` (plain TCP and UDP, inline) and the general stages give the same figures:
/// two data planes, one parsing every packet with the stages only, run the same 6,000
/// inputs per program and link type (tc ones with GSO metadata now and then), and their
/// interface counters and every flow record (packets, segments, bytes, flags, SYN MSS,
/// largest segment, retransmissions, encapsulation, WireGuard messages) must be equal.
#[test]
fn fast_path_agrees_with_stages() -> Result<()> {
    if !ready() {
        return Ok(());
    }
    const RUNS: usize = 6_000;
    const MTU: u32 = 1400;
    for (link, raw_ip) in [(LinkType::Ether, false), (LinkType::RawIp, true)] {
        let mut fast_storage = MaybeUninit::uninit();
        let options = Options {
            tunnel_ports: vec![
                TunnelPort {
                    port: 10000,
                    encap: Encap::Fastd,
                },
                TunnelPort {
                    port: 53,
                    encap: Encap::Other,
                },
            ],
            ..Default::default()
        };
        let fast = Dataplane::load(&mut fast_storage, options.clone()).context("load")?;
        let mut stages_storage = MaybeUninit::uninit();
        let stages = Dataplane::load(
            &mut stages_storage,
            Options {
                stages_only: true,
                ..options
            },
        )
        .context("load stages-only")?;
        fast.watch(LO, MTU, link)?;
        stages.watch(LO, MTU, link)?;
        let mut rng = Rng::new(0xfa57_0001 + u64::from(raw_ip));
        for kind in PROGRAMS {
            let mut flows = TcpFlows {
                next_seq: [
                    1_000,
                    2_000_000,
                    3,
                    0xffff_f000,
                    7,
                    900_000,
                    42,
                    0x8000_0000,
                ],
            };
            let (mut plain, mut ran) = (0, 0);
            for i in 0..RUNS {
                let (frame, is_plain) = plain_traffic_frame(&mut rng, raw_ip, &mut flows);
                let ctx = (is_tc(kind) && rng.chance(20)).then(|| {
                    let segs = 2 + rng.below(40) as u32;
                    skb_ctx(segs, rng.pick(&[536, 1348, 1448]))
                });
                let a = test_run(&fast, kind, &frame, ctx.as_deref());
                let b = test_run(&stages, kind, &frame, ctx.as_deref());
                match (&a, &b) {
                    (Ok(x), Ok(y)) => {
                        ensure!(
                            x == y && *x == pass_code(kind),
                            "{kind:?} run {i}: {x} / {y}"
                        );
                        ran += 1;
                        plain += usize::from(is_plain);
                    }
                    (Err(x), Err(y)) => ensure!(x.kind() == y.kind(), "{kind:?} run {i}"),
                    _ => anyhow::bail!("{kind:?} run {i}: {a:?} vs {b:?} for {frame:02x?}"),
                }
                if i % 1000 == 999 {
                    assert_eq!(
                        counters(&fast)?,
                        counters(&stages)?,
                        "{kind:?} ({link:?}) counters after run {i}, last input {frame:02x?}"
                    );
                }
            }
            assert!(
                plain * 2 > ran,
                "{kind:?} ({link:?}): only {plain} of {ran} inputs were plain TCP or UDP"
            );
        }
        assert_eq!(counters(&fast)?, counters(&stages)?, "{link:?} counters");
        let (a, b) = (flows_untimed(&fast)?, flows_untimed(&stages)?);
        assert_eq!(a.len(), b.len(), "{link:?}: flow count");
        for (x, y) in a.iter().zip(&b) {
            assert_eq!(x, y, "{link:?}: fast path (left) vs stages (right)");
        }
        // The mix reached what the fast path must get right.
        let tcp: Vec<&Flow> = a.iter().filter(|f| f.protocol == pkt::TCP).collect();
        for dir in [Direction::Ingress, Direction::Egress] {
            let mine = || tcp.iter().filter(|f| f.direction == dir);
            ensure!(
                mine().any(|f| f.src.is_ipv6()),
                "{link:?} {dir:?}: no IPv6 TCP flow"
            );
            ensure!(
                mine().map(|f| f.retransmits).sum::<u32>() > 50,
                "{link:?} {dir:?}: too few retransmissions to compare"
            );
            ensure!(
                mine().any(|f| f.syn_mss.is_some()),
                "{link:?} {dir:?}: no SYN MSS"
            );
            ensure!(
                mine().any(|f| f.segments > f.packets) || dir == Direction::Ingress,
                "{link:?} {dir:?}: no GSO segments"
            );
        }
        for encap in [Encap::Wireguard, Encap::Vxlan, Encap::Geneve, Encap::Fastd] {
            ensure!(
                a.iter().any(|f| f.encap == encap),
                "{link:?}: no {encap:?} flow"
            );
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// 9. Verifier budget
// ---------------------------------------------------------------------------------------------

/// Instructions the verifier may process per packet program before this test fails: a
/// quarter of the kernel's limit (BPF_COMPLEXITY_LIMIT_INSNS, 1,000,000). Before the data
/// plane was split into global functions each program took about 750,000, and a small change
/// to the parser pushed them over the limit; this leaves room to notice growth early.
const VERIFIER_BUDGET: u32 = 250_000;

/// Each packet program's `verified_insns` (what the verifier processed for the program and
/// its global functions) stays below [`VERIFIER_BUDGET`].
#[test]
fn verifier_budget() -> Result<()> {
    if !ready() {
        return Ok(());
    }
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

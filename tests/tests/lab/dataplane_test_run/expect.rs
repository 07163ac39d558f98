//! What a case expects: the counters of both directions, every flow record and every
//! too-big entry, built up frame by frame while the case sends them ([`Expect`]), and
//! compared exactly with what the data plane holds.

use std::collections::BTreeMap;
use std::net::IpAddr;

use anyhow::{ensure, Result};
use netdoctor::kernel::packet::counters::DirCounters;
use netdoctor::kernel::packet::flows::{Flow, WireguardMessages};
use netdoctor::kernel::packet::too_big::TooBig;
use netdoctor::kernel::packet::{Dataplane, ProgramKind};
use netdoctor::kernel::views::{Direction, Encap};

use crate::dataplane_test_run::harness::{bucket, counters, direction, run, zero_dir, LO};

pub(crate) type FlowId = (Direction, u8, IpAddr, u16, IpAddr, u16);
pub(crate) type PtbId = (Direction, IpAddr, u8, IpAddr, u16, IpAddr, u16);

pub(crate) fn flow_id(f: &Flow) -> FlowId {
    (
        f.direction,
        f.protocol,
        f.src,
        f.src_port,
        f.dst,
        f.dst_port,
    )
}

pub(crate) fn ptb_id(t: &TooBig) -> PtbId {
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
pub(crate) fn normalised_flows(dp: &Dataplane<'_>) -> Result<Vec<Flow>> {
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

pub(crate) fn normalised_too_big(dp: &Dataplane<'_>) -> Result<Vec<TooBig>> {
    let mut all = dp.too_big()?;
    for t in &mut all {
        ensure!(t.last_seen_ms > 0, "no timestamp in {t:?}");
        t.last_seen_ms = 0;
    }
    all.sort_by_key(ptb_id);
    Ok(all)
}

/// A flow's identity without the direction: (protocol, src, sport, dst, dport).
pub(crate) type Key = (u8, IpAddr, u16, IpAddr, u16);

pub(crate) fn new_flow(dir: Direction, key: Key) -> Flow {
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
pub(crate) struct Expect<'a, 'obj> {
    dp: &'a Dataplane<'obj>,
    kind: ProgramKind,
    dirs: [DirCounters; 2],
    flows: BTreeMap<FlowId, Flow>,
    too_big: BTreeMap<PtbId, TooBig>,
}

impl<'a, 'obj> Expect<'a, 'obj> {
    pub(crate) fn new(dp: &'a Dataplane<'obj>) -> Self {
        Expect {
            dp,
            kind: ProgramKind::XdpIngress,
            dirs: [zero_dir(), zero_dir()],
            flows: BTreeMap::new(),
            too_big: BTreeMap::new(),
        }
    }

    /// Selects the program the next frames go through.
    pub(crate) fn on(&mut self, kind: ProgramKind) {
        self.kind = kind;
    }

    pub(crate) fn dir(&mut self) -> &mut DirCounters {
        &mut self.dirs[direction(self.kind) as usize]
    }

    /// Runs the program on `frame`; counts packets, segments and bytes.
    pub(crate) fn send(&mut self, frame: &[u8]) -> Result<()> {
        run(self.dp, self.kind, frame)?;
        let d = self.dir();
        d.packets += 1;
        d.segments += 1;
        d.bytes += frame.len() as u64;
        Ok(())
    }

    /// A frame that is not IPv4/IPv6.
    pub(crate) fn non_ip(&mut self, frame: &[u8]) -> Result<()> {
        self.send(frame)?;
        self.dir().non_ip += 1;
        Ok(())
    }

    /// A frame whose L2/L3 headers are cut or invalid: counted truncated, nothing else.
    pub(crate) fn truncated(&mut self, frame: &[u8]) -> Result<()> {
        self.send(frame)?;
        self.dir().truncated += 1;
        Ok(())
    }

    /// An IP packet of (effective) IP length `ip_len`: a size bucket and a flow record.
    pub(crate) fn ip(&mut self, frame: &[u8], ip_len: u32, key: Key) -> Result<&mut Flow> {
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
    pub(crate) fn seen_again(&mut self, key: Key) {
        if self.kind == ProgramKind::TcIngress {
            self.flow(key).retransmits += 1;
        }
    }

    pub(crate) fn flow(&mut self, key: Key) -> &mut Flow {
        let dir = direction(self.kind);
        self.flows
            .entry((dir, key.0, key.1, key.2, key.3, key.4))
            .or_insert_with(|| new_flow(dir, key))
    }

    /// One more too-big message from `from` announcing `mtu`, quoting `inner`.
    pub(crate) fn ptb(
        &mut self,
        from: IpAddr,
        mtu: u32,
        proto: u8,
        inner: (IpAddr, u16, IpAddr, u16),
    ) {
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
    pub(crate) fn check(&self) -> Result<()> {
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

//! The fast path for plain TCP and UDP agrees with the stages: two data planes, one parsing
//! every packet with the general stages only, fed the same traffic.

use std::mem::MaybeUninit;

use anyhow::{ensure, Context, Result};
use netdoctor::kernel::packet::flows::Flow;
use netdoctor::kernel::packet::LinkType;
use netdoctor::kernel::packet::{Dataplane, Options, TunnelPort};
use netdoctor::kernel::views::{Direction, Encap};
use netdoctor_lab::bpf::test_run::skb_ctx;
use netdoctor_lab::lab_guard;
use netdoctor_lab::packet::builder::{self as pkt, Ipv4, Ipv6, Tcp};
use netdoctor_lab::packet::random::{random_frame, random_l4, Rng};

use crate::dataplane_test_run::expect::flow_id;
use crate::dataplane_test_run::harness::{counters, is_tc, pass_code, test_run, LO, PROGRAMS};

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
    lab_guard!();
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

//! Randomised batches, checked against a model of the C parser: seeded random frames
//! (`netdoctor_lab::packet::random`) through each program, every verdict checked, and the
//! counters compared field by field with `netdoctor_lab::packet::model`.

use std::io::ErrorKind;

use anyhow::Result;
use netdoctor::kernel::packet::counters::{DirCounters, SIZE_BUCKET_BOUNDS};
use netdoctor::kernel::packet::flows::Flow;
use netdoctor::kernel::packet::LinkType;
use netdoctor::kernel::packet::{Dataplane, Options, ProgramKind};
use netdoctor_lab::lab_guard;
use netdoctor_lab::packet::model::{Model, Outcome};
use netdoctor_lab::packet::random::{random_frame, Rng};

use crate::dataplane_test_run::harness::{
    counters, dir_of, direction, kernel_rejects, pass_code, test_run, with_dp, LO,
};

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
        local_tcp_segments: a.local_tcp_segments - b.local_tcp_segments,
        local_tcp_retransmits: a.local_tcp_retransmits - b.local_tcp_retransmits,
        // The running maximum is not a count: no difference to take.
        local_tcp_max_segment: a.local_tcp_max_segment,
        local_tcp_max_segment_hits: a.local_tcp_max_segment_hits,
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
    let model = Model {
        raw_ip,
        xdp: kind == ProgramKind::XdpIngress,
        mtu: MTU,
        size_bounds: &SIZE_BUCKET_BOUNDS,
    };
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
                match model.apply(&frame, &mut want) {
                    Outcome::Ip => {
                        flow_packets += 1;
                        flow_bytes += frame.len() as u64;
                    }
                    Outcome::Truncated => l3_truncated += 1,
                    Outcome::NonIp => {}
                }
            }
        }
        // Compare the running totals now and then, so a mismatch points near its cause.
        if i % 500 == 499 {
            let c = counters(dp)?;
            assert_eq!(
                *dir_of(&c, dir),
                want,
                "{kind:?} (raw {raw_ip}) after run {i}, last input {frame:02x?}"
            );
        }
    }
    let c = counters(dp)?;
    assert_eq!(
        *dir_of(&c, dir),
        want,
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
    lab_guard!();
    with_dp(Options::default(), 1400, LinkType::Ether, |dp| {
        randomised_batch(dp, ProgramKind::XdpIngress, false, 0x5eed_0001)?;
        randomised_batch(dp, ProgramKind::TcIngress, false, 0x5eed_0002)?;
        randomised_batch(dp, ProgramKind::TcEgress, false, 0x5eed_0003)?;
        randomised_batch(dp, ProgramKind::XdpIngress, true, 0x5eed_0004)
    })
}

//! Which signals a diagnosis has on this kernel, and which facts it lacks without them.
//!
//! Every BPF program is optional: one that cannot load or attach costs its signal, named in
//! one warning line on stderr and one line in the report's notes, and the facts only it
//! gives become "missing", so the rules that need them are reported as not evaluated
//! (see `rules::evaluate_partial`) instead of passing on zeros.

use std::collections::HashSet;
use std::mem::MaybeUninit;

use super::target::Target;

use crate::config::iface::Interface;
use crate::kernel::drops::DropProbe;
use crate::kernel::packet::{Dataplane, LocalTcp, Options};
use crate::kernel::sockets::SocketProbes;

/// Facts only the packet data plane observes (rules' names for them).
const DATAPLANE_FACTS: &[&str] = &[
    "traffic",
    "tunnel.overhead_measured",
    "tunnel.underlay_fragments",
    "peer.initiations_sent",
    "peer.responses_received",
    "ecmp.measured",
    "ecmp.bytes",
    "ecmp.flows",
    "ecmp.busiest",
    "ecmp.busiest_percent",
    "ecmp.busiest_weight_percent",
    "nat.leaked_packets",
    "nat.leaked_flows",
    "nat.answered_flows",
    "nat.leaked_source",
    "nat.leaked_family",
    "peer.derp_bytes",
    "peer.udp_bytes",
    "bridge.oversize_segments",
    "bridge.max_segment",
    "peer.underlay_expected",
    "peer.underlay_received",
    "peer.underlay_lost",
    "peer.underlay_loss_percent",
    "peer.rx_sessions",
    "peer.rx_counter",
    "peer.tx_data_packets",
    "peer.rtt_ms",
    "peer.rtt_age_s",
    "peer.initiations_unanswered",
    "peer.responses_unconfirmed",
    "peer.handshakes_answered",
    "flow.underlay_loss_percent",
];

/// Facts that need the kernel's drop reasons (kfree_skb's `reason`, Linux 5.17).
const DROP_REASON_FACTS: [&str; 4] = [
    "drops.forwarding",
    "drops.rpfilter",
    "drops.too_big",
    "drops.by_reason",
];

/// Facts that need the retransmission tracepoint (full-size vs. short retransmissions).
const RETRANSMIT_FACTS: [&str; 2] = ["flow.full_size_retransmits", "flow.small_retransmits"];

/// Records an unavailable signal: one warning on stderr, one note in the report.
pub(crate) fn note(notes: &mut Vec<String>, text: String) {
    tracing::warn!("{text}");
    notes.push(text);
}

/// What the findings lose without the packet data plane.
const DATAPLANE_LOST: &str = "traffic counters, fragments, measured overhead, WireGuard handshakes and Tailscale's relayed bytes on the wire are not observed";

/// The packet data plane attached to every target (and each one's underlay candidates and
/// the interfaces watched with it), each interface once (`attached` records them), or
/// `None`, noted, when it cannot load or attach to any target here. A target it cannot
/// attach to gets the note and `has_dataplane` false; the others keep it.
pub(super) fn packet_dataplane<'obj>(
    storage: &'obj mut MaybeUninit<libbpf_rs::OpenObject>,
    options: Options,
    targets: &mut [Target],
    attached: &mut HashSet<u32>,
) -> Option<Dataplane<'obj>> {
    let mut dp = match Dataplane::load(storage, options) {
        Ok(dp) => dp,
        Err(e) => {
            let text = format!("packet data plane unavailable (loading: {e}): {DATAPLANE_LOST}");
            tracing::warn!("{text}");
            for t in targets.iter_mut() {
                t.notes.push(text.clone());
            }
            return None;
        }
    };
    for t in targets.iter_mut() {
        t.has_dataplane = attach_target(&mut dp, t, attached);
    }
    targets.iter().any(|t| t.has_dataplane).then_some(dp)
}

/// Attaches `dp` to the interfaces of `t` not attached yet; false (noted) when it cannot
/// attach to the target itself.
fn attach_target(dp: &mut Dataplane<'_>, t: &mut Target, attached: &mut HashSet<u32>) -> bool {
    if !attached.contains(&t.me.index) {
        match dp.attach(&t.me.target()) {
            Ok(hooks) => {
                t.notes.extend(hooks.note);
                attached.insert(t.me.index);
            }
            Err(e) => {
                note(
                    &mut t.notes,
                    format!("packet data plane unavailable ({e}): {DATAPLANE_LOST}"),
                );
                return false;
            }
        }
    }
    let me = t.me.index;
    let underlays = t.underlay.watch.iter().filter(|u| u.index != me);
    let watched: Vec<(Interface, bool)> = underlays
        .map(|u| (u.clone(), true))
        .chain(t.also.iter().map(|i| (i.clone(), false)))
        .collect();
    for (i, is_underlay) in watched {
        if attached.contains(&i.index) {
            continue;
        }
        match dp.attach(&i.target()) {
            Ok(hooks) => {
                t.notes.extend(hooks.note);
                attached.insert(i.index);
            }
            Err(e) if is_underlay => t.notes.push(format!(
                "could not watch the underlay candidate {}: {e}",
                i.name
            )),
            Err(e) => t.notes.push(format!(
                "could not watch {} (a multipath nexthop or the uplink): {e}",
                i.name
            )),
        }
    }
    true
}

/// Attaches the data plane to the interfaces of `wanted` it does not watch yet (`also`
/// holds those it does for this target, `attached` those of every target),
/// mid-observation: a gateway's uplinks found from the window so far.
pub(super) fn watch_more(
    dp: &mut Dataplane<'_>,
    also: &mut Vec<Interface>,
    attached: &mut HashSet<u32>,
    wanted: Vec<Interface>,
    notes: &mut Vec<String>,
) {
    for i in wanted {
        if also.iter().any(|a| a.index == i.index) {
            continue;
        }
        if attached.insert(i.index) {
            match dp.attach(&i.target()) {
                Ok(hooks) => notes.extend(hooks.note),
                Err(e) => notes.push(format!("could not watch the uplink {}: {e}", i.name)),
            }
        }
        also.push(i);
    }
}

/// The data-plane options to load with, given the socket probes that loaded: the local
/// path needs socket telemetry to describe the connections it stops recording per flow,
/// so without it every segment gets its flow record (said once, in the log).
pub(crate) fn with_sockets(mut options: Options, sockets: Option<&SocketProbes<'_>>) -> Options {
    let described = sockets.is_some_and(|s| s.signals().snapshots);
    if options.local_tcp == LocalTcp::Sockets && !described {
        tracing::info!("no socket telemetry: local TCP connections are recorded per flow");
        options.local_tcp = LocalTcp::Packets;
    }
    options
}

/// Loads the socket and drop probes, each optional: what this kernel lacks becomes a note
/// saying what the findings lose (the agent shows the same notes in `/readyz`).
pub(crate) fn load_probes<'obj>(
    sock_storage: &'obj mut MaybeUninit<libbpf_rs::OpenObject>,
    drop_storage: &'obj mut MaybeUninit<libbpf_rs::OpenObject>,
    notes: &mut Vec<String>,
) -> (Option<SocketProbes<'obj>>, Option<DropProbe<'obj>>) {
    let sockets = match SocketProbes::load(sock_storage) {
        Ok(s) => {
            for what in s.signals().missing() {
                note(notes, format!("{what} on this kernel"));
            }
            Some(s)
        }
        Err(e) => {
            note(
                notes,
                format!(
                    "socket telemetry unavailable ({e}): flow findings are based on packets only"
                ),
            );
            None
        }
    };
    let drops = match DropProbe::load(drop_storage) {
        Ok(Some(d)) => {
            if !d.has_reasons() {
                note(notes, "drop reasons unavailable: this kernel's kfree_skb tracepoint reports no reason (Linux < 5.17); drops are counted without reasons".into());
            }
            Some(d)
        }
        Ok(None) => {
            note(
                notes,
                "this kernel has no kfree_skb BTF tracepoint: drop reasons unavailable".into(),
            );
            None
        }
        Err(e) => {
            note(notes, format!("drop reasons unavailable: {e}"));
            None
        }
    };
    (sockets, drops)
}

/// The facts a diagnosis (or the agent) lacks, given the signals it has.
pub(crate) fn missing_facts(
    dataplane: bool,
    sockets: Option<&SocketProbes<'_>>,
    drops: Option<&DropProbe<'_>>,
) -> Vec<String> {
    let mut missing: Vec<&str> = Vec::new();
    if !dataplane {
        missing.extend(DATAPLANE_FACTS.iter().copied());
    }
    match sockets.map(SocketProbes::signals) {
        Some(s) if s.snapshots => {
            if !s.retransmits {
                missing.extend(RETRANSMIT_FACTS);
            }
        }
        _ => missing.push("flows"),
    }
    match drops {
        None => missing.extend(["drops", "bridge.oversize_drops"]),
        Some(d) if !d.has_reasons() => missing.extend(DROP_REASON_FACTS),
        Some(_) => {}
    }
    missing.into_iter().map(String::from).collect()
}

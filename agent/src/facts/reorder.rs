//! Reordering against loss on an interface: of the retransmissions its local connections
//! sent, those their peers reported as needless (DSACK, RFC 2883: the original arrived after
//! all, late rather than lost), and the reordering the connections detected
//! (`tcpi_reord_seen`, and the reordering metric that grows past its default of 3).
//!
//! Per-packet load balancing (a bond in balance-rr, paths of different delay) delivers a
//! connection's segments out of order; TCP first reads that as loss and retransmits, then
//! learns from the DSACK that it was not. Counting those retransmissions as loss blames the
//! path for loss it does not have.

use super::{FlowFacts, TrafficFacts};

/// The kernel's default reordering metric (`net.ipv4.tcp_reordering`).
pub const DEFAULT_REORDERING: i64 = 3;

/// The local connections' retransmissions and reordering on one interface.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Local {
    /// Retransmissions they sent (counted where the interface carried what they sent).
    pub retransmits: u64,
    /// Of those, the ones their peers reported as needless.
    pub spurious: u64,
    /// Reordering events they detected.
    pub reord_seen: u64,
    /// Connections that detected reordering.
    pub connections: u64,
    /// The largest reordering metric among them.
    pub max_reordering: i64,
}

/// What `flows` (the interface's local connections) say; `counted` when the interface
/// carried what they sent (their retransmissions count in the interface's figures).
pub fn local(flows: &[FlowFacts], counted: bool) -> Local {
    let sum = |f: fn(&FlowFacts) -> i64| -> u64 {
        flows.iter().map(|x| u64::try_from(f(x)).unwrap_or(0)).sum()
    };
    let reordered = |f: &&FlowFacts| f.reord_seen > 0 || f.reordering > DEFAULT_REORDERING;
    Local {
        retransmits: if counted { sum(|f| f.retransmits) } else { 0 },
        spurious: if counted {
            sum(|f| f.spurious_retransmits)
        } else {
            0
        },
        reord_seen: sum(|f| f.reord_seen),
        connections: flows.iter().filter(reordered).count() as u64,
        max_reordering: flows
            .iter()
            .filter(reordered)
            .map(|f| f.reordering)
            .max()
            .unwrap_or(DEFAULT_REORDERING)
            .max(DEFAULT_REORDERING),
    }
}

fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// Fills `t`'s reordering figures from `l`, once its segments and retransmissions are set.
pub fn fill(t: &mut TrafficFacts, l: &Local) {
    let segments = u64::try_from(t.tcp_segments).unwrap_or(0);
    let retransmits = u64::try_from(t.tcp_retransmits).unwrap_or(0);
    let spurious = l.spurious.min(retransmits);
    t.tcp_spurious_retransmits = to_i64(spurious);
    t.tcp_spurious_ratio = if segments > 0 {
        spurious as f64 / segments as f64
    } else {
        0.0
    };
    t.tcp_spurious_percent = if retransmits > 0 {
        (spurious as f64 * 1000.0 / retransmits as f64).round() / 10.0
    } else {
        -1.0
    };
    t.tcp_reord_seen = to_i64(l.reord_seen);
    t.tcp_reordering_connections = to_i64(l.connections);
    t.tcp_reordering_max = l.max_reordering;
}

#[cfg(test)]
mod tests;

//! Per-interface counters: packets, bytes, segment sizes against the MTU, fragments, ICMP
//! "too big" messages. Summed over CPUs from the `iface_stats` map.

use serde::{Deserialize, Serialize};

use crate::kernel::views::nd_dir_stats;

/// Upper bounds of the packet-size buckets (IP length of one segment), chosen for MTU work:
/// minimum IPv4 MTU, IPv6 minimum MTU, common tunnel MTUs (WireGuard over IPv6 1420 / IPv4
/// 1440, VXLAN 1450, IP-in-IP 1480), Ethernet 1500 and jumbo 9000. A last bucket takes
/// anything larger. Mirrors `ND_SIZE_BOUND_*` in ebpf/include/packet.h (checked by the
/// `limits` test).
pub const SIZE_BUCKET_BOUNDS: [u32; 9] = [576, 1280, 1380, 1420, 1440, 1450, 1480, 1500, 9000];

/// Counters for one direction of one interface (also what the lab reads back from a report:
/// every field required).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DirCounters {
    /// Frames or skbs the hook saw (a GSO super-packet counts once).
    pub packets: u64,
    /// Wire segments (a GSO super-packet counts its gso_segs).
    pub segments: u64,
    /// Bytes as the hook saw them, L2 header included.
    pub bytes: u64,
    /// Segments per size bucket; `size_buckets[i]` counts sizes <= `SIZE_BUCKET_BOUNDS[i]`,
    /// the last one everything larger.
    pub size_buckets: Vec<u64>,
    /// Frames that are not IPv4/IPv6 (ARP, LLDP, ...).
    pub non_ip: u64,
    /// Frames whose headers are shorter than they claim.
    pub truncated: u64,
    /// GSO/GRO super-packets.
    pub gso_packets: u64,
    /// First fragments (offset 0, more fragments follow).
    pub fragments_first: u64,
    /// Later fragments.
    pub fragments_later: u64,
    /// DF-marked (or IPv6) segments larger than the interface MTU.
    pub df_over_mtu: u64,
    /// ICMP type 3 code 4 (fragmentation needed) messages.
    pub icmp_frag_needed: u64,
    /// ICMPv6 type 2 (packet too big) messages.
    pub icmp6_packet_too_big: u64,
    /// Of `segments`, those of this host's own TCP connections that took the local path
    /// (no flow record: socket telemetry describes those connections).
    pub local_tcp_segments: u64,
    /// Of those, received segments carrying data seen before (retransmitted or reordered);
    /// a count that can miss some when many connections collide, never invents any. Always 0
    /// on egress: a sent segment's retransmissions are counted by its socket (socket
    /// telemetry's `retransmits`), not by the data plane.
    pub local_tcp_retransmits: u64,
    /// The largest of those segments (IP length); after [`DirCounters::since`], the
    /// largest within the window, 0 when the window's were all smaller than an earlier one
    /// (unknown).
    pub local_tcp_max_segment: u64,
    /// Packets of size `local_tcp_max_segment` (since it became the largest, or within the
    /// window).
    pub local_tcp_max_segment_hits: u64,
}

impl DirCounters {
    /// IP fragments, first and later.
    pub fn fragments(&self) -> u64 {
        self.fragments_first + self.fragments_later
    }

    /// What was counted since `earlier` (counters that went backwards, after an interface
    /// was watched afresh, count from zero).
    pub fn since(&self, earlier: &DirCounters) -> DirCounters {
        let d = |now: u64, then: u64| now.checked_sub(then).unwrap_or(now);
        let max = self.max_since(earlier);
        DirCounters {
            packets: d(self.packets, earlier.packets),
            segments: d(self.segments, earlier.segments),
            bytes: d(self.bytes, earlier.bytes),
            size_buckets: self
                .size_buckets
                .iter()
                .enumerate()
                .map(|(i, v)| d(*v, earlier.size_buckets.get(i).copied().unwrap_or(0)))
                .collect(),
            non_ip: d(self.non_ip, earlier.non_ip),
            truncated: d(self.truncated, earlier.truncated),
            gso_packets: d(self.gso_packets, earlier.gso_packets),
            fragments_first: d(self.fragments_first, earlier.fragments_first),
            fragments_later: d(self.fragments_later, earlier.fragments_later),
            df_over_mtu: d(self.df_over_mtu, earlier.df_over_mtu),
            icmp_frag_needed: d(self.icmp_frag_needed, earlier.icmp_frag_needed),
            icmp6_packet_too_big: d(self.icmp6_packet_too_big, earlier.icmp6_packet_too_big),
            local_tcp_segments: d(self.local_tcp_segments, earlier.local_tcp_segments),
            local_tcp_retransmits: d(self.local_tcp_retransmits, earlier.local_tcp_retransmits),
            local_tcp_max_segment: max.0,
            local_tcp_max_segment_hits: max.1,
        }
    }

    /// The window's largest local segment and its packets from two readings of the
    /// running maximum: a larger maximum, or more packets at the same one, means segments
    /// of that size passed in between (no larger ones did, or the maximum would be
    /// larger). Otherwise the window's were all smaller: unknown, (0, 0).
    fn max_since(&self, earlier: &DirCounters) -> (u64, u64) {
        let (now, then) = (self.local_tcp_max_segment, earlier.local_tcp_max_segment);
        let (hits, hits_then) = (
            self.local_tcp_max_segment_hits,
            earlier.local_tcp_max_segment_hits,
        );
        if now > then {
            (now, hits)
        } else if now == then && hits > hits_then {
            (now, hits - hits_then)
        } else {
            (0, 0)
        }
    }

    /// Adds one CPU's counters.
    pub(crate) fn add(&mut self, s: &nd_dir_stats) {
        self.packets += s.packets;
        self.segments += s.segs;
        self.bytes += s.bytes;
        if self.size_buckets.len() < s.size_hist.len() {
            self.size_buckets.resize(s.size_hist.len(), 0);
        }
        for (sum, v) in self.size_buckets.iter_mut().zip(s.size_hist.iter()) {
            *sum += v;
        }
        self.non_ip += s.non_ip;
        self.truncated += s.truncated;
        self.gso_packets += s.gso_packets;
        self.fragments_first += s.frag_first;
        self.fragments_later += s.frag_later;
        self.df_over_mtu += s.df_over_mtu;
        self.icmp_frag_needed += s.icmp_frag_needed;
        self.icmp6_packet_too_big += s.icmp6_too_big;
        self.local_tcp_segments += s.local_segs;
        self.local_tcp_retransmits += s.local_retrans;
        // Each CPU keeps its own maximum: the largest over CPUs, with the packets of every
        // CPU at that size (which keeps `max_since` exact across readings).
        let (max, hits) = (u64::from(s.local_max_seg), u64::from(s.local_max_hits));
        if max > self.local_tcp_max_segment {
            self.local_tcp_max_segment = max;
            self.local_tcp_max_segment_hits = hits;
        } else if max == self.local_tcp_max_segment && max > 0 {
            self.local_tcp_max_segment_hits += hits;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cpu(max: u32, hits: u32) -> nd_dir_stats {
        nd_dir_stats {
            local_max_seg: max,
            local_max_hits: hits,
            ..nd_dir_stats::default()
        }
    }

    fn read(cpus: &[(u32, u32)]) -> DirCounters {
        let mut c = DirCounters::default();
        for &(m, h) in cpus {
            c.add(&cpu(m, h));
        }
        c
    }

    #[test]
    fn the_windows_largest_local_segment() {
        let start = read(&[(1500, 10), (1400, 3)]);
        // More full-size packets on the second CPU: 1500 passed in the window.
        let end = read(&[(1500, 10), (1500, 2)]);
        let w = end.since(&start);
        assert_eq!(
            (w.local_tcp_max_segment, w.local_tcp_max_segment_hits),
            (1500, 2)
        );
        // Only smaller packets since: the window's largest is unknown, not 1500.
        let later = read(&[(1500, 10), (1500, 2)]);
        let w = later.since(&end);
        assert_eq!(
            (w.local_tcp_max_segment, w.local_tcp_max_segment_hits),
            (0, 0)
        );
        // A new maximum is the window's.
        let bigger = read(&[(9000, 1), (1500, 2)]);
        assert_eq!(bigger.since(&later).local_tcp_max_segment, 9000);
    }
}

/// Counters for both directions of one interface.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct IfaceCounters {
    /// Received.
    pub ingress: DirCounters,
    /// Sent.
    pub egress: DirCounters,
}

impl IfaceCounters {
    /// IP fragments in both directions.
    pub fn fragments(&self) -> u64 {
        self.ingress.fragments() + self.egress.fragments()
    }

    /// What was counted since `earlier`, per direction.
    pub fn since(&self, earlier: &IfaceCounters) -> IfaceCounters {
        IfaceCounters {
            ingress: self.ingress.since(&earlier.ingress),
            egress: self.egress.since(&earlier.egress),
        }
    }

    /// The counters of direction `dir` (0: ingress, 1: egress).
    pub(crate) fn dir_mut(&mut self, dir: u32) -> &mut DirCounters {
        if dir == 0 {
            &mut self.ingress
        } else {
            &mut self.egress
        }
    }
}

/// Human label of size bucket `i`, e.g. "<=1420" or ">9000".
pub fn bucket_label(i: usize) -> String {
    match SIZE_BUCKET_BOUNDS.get(i) {
        Some(b) => format!("<={b}"),
        None => format!(">{}", SIZE_BUCKET_BOUNDS[SIZE_BUCKET_BOUNDS.len() - 1]),
    }
}

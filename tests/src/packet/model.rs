//! An independent model of what `ebpf/packet.bpf.c` does to one direction's counters for
//! one frame (no GSO), written independently from the C code's documented rules
//! (l3_parse, l4_parse, account). The randomised tests run thousands of random frames
//! ([`super::random`]) through the real programs and through this model and compare the
//! counters field by field.
//!
//! It shares nothing with netdoctor's code but the plain struct it counts into,
//! [`DirCounters`] (netdoctor's own type, what its JSON reports): its rules are its own.

use crate::netdoctor::DirCounters;

/// Size bucket of an IP length, as `size_bucket()` in packet.bpf.c: the first bound it does
/// not exceed, or one past the last bound.
pub fn size_bucket(bounds: &[u32], ip_len: u32) -> usize {
    bounds
        .iter()
        .position(|&b| ip_len <= b)
        .unwrap_or(bounds.len())
}

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
    /// Not IPv4/IPv6 (ARP, LLDP, unknown EtherType or IP version).
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

/// How a data plane is set up for the frames [`Model::apply`] takes.
#[derive(Debug, Clone, Copy)]
pub struct Model<'a> {
    /// The interface has no link-layer header (tun, WireGuard): frames start with IP.
    pub raw_ip: bool,
    /// An XDP program sees the frames (no GSO metadata); otherwise tc.
    pub xdp: bool,
    /// The interface's MTU.
    pub mtu: u32,
    /// Upper bounds of the size buckets (netdoctor's `SIZE_BUCKET_BOUNDS`).
    pub size_bounds: &'a [u32],
}

impl Model<'_> {
    /// Applies one frame (accepted by the kernel) to `d`.
    pub fn apply(&self, p: &[u8], d: &mut DirCounters) -> Outcome {
        let Model {
            raw_ip,
            xdp,
            mtu,
            size_bounds: bounds,
        } = *self;
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
        d.size_buckets[size_bucket(bounds, seg_len)] += segs;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::builder::{self as pkt, Ipv4, Tcp};

    /// netdoctor's bucket bounds today; the model takes whatever it is given.
    const BOUNDS: [u32; 9] = [576, 1280, 1380, 1420, 1440, 1450, 1480, 1500, 9000];

    fn zero() -> DirCounters {
        DirCounters {
            packets: 0,
            segments: 0,
            bytes: 0,
            size_buckets: vec![0; BOUNDS.len() + 1],
            non_ip: 0,
            truncated: 0,
            gso_packets: 0,
            fragments_first: 0,
            fragments_later: 0,
            df_over_mtu: 0,
            icmp_frag_needed: 0,
            icmp6_packet_too_big: 0,
            local_tcp_segments: 0,
            local_tcp_retransmits: 0,
            local_tcp_max_segment: 0,
            local_tcp_max_segment_hits: 0,
        }
    }

    fn model(xdp: bool, mtu: u32) -> Model<'static> {
        Model {
            raw_ip: false,
            xdp,
            mtu,
            size_bounds: &BOUNDS,
        }
    }

    #[test]
    fn size_buckets_include_their_bound() {
        let b = |len| size_bucket(&BOUNDS, len);
        assert_eq!((b(0), b(576), b(577)), (0, 0, 1));
        assert_eq!((b(1500), b(1501), b(9000), b(9001)), (7, 8, 8, 9));
    }

    #[test]
    fn df_datagram_over_the_mtu_is_counted_in_its_bucket() {
        let mut ip = Ipv4::new(pkt::UDP);
        ip.df = true;
        let frame = pkt::eth(pkt::ETH_IPV4, &ip.build(&pkt::udp(1, 2, &[0; 1392])));
        let mut d = zero();
        assert_eq!(model(false, 1400).apply(&frame, &mut d), Outcome::Ip);
        let mut want = zero();
        want.packets = 1;
        want.segments = 1;
        want.bytes = frame.len() as u64;
        want.size_buckets[3] = 1; // IP length 1420
        want.df_over_mtu = 1;
        assert_eq!(d, want);
    }

    #[test]
    fn non_ip_and_cut_headers() {
        let mut d = zero();
        let arp = pkt::eth(pkt::ETH_ARP, &[0; 28]);
        assert_eq!(model(false, 1500).apply(&arp, &mut d), Outcome::NonIp);
        let cut = pkt::eth(pkt::ETH_IPV4, &[0x45; 10]);
        assert_eq!(model(false, 1500).apply(&cut, &mut d), Outcome::Truncated);
        assert_eq!((d.packets, d.non_ip, d.truncated), (2, 1, 1));
        assert_eq!(d.size_buckets.iter().sum::<u64>(), 0);
    }

    #[test]
    fn xdp_takes_an_oversized_tcp_frame_for_mtu_sized_segments() {
        let tcp = Tcp::new(1, 2, 3, pkt::ACK).build(&[0; 2920]);
        let frame = pkt::v4(pkt::TCP, &tcp);
        let (mut xdp, mut tc) = (zero(), zero());
        model(true, 1500).apply(&frame, &mut xdp);
        model(false, 1500).apply(&frame, &mut tc);
        // 2920 bytes of payload at an MSS of 1460: two 1500-byte segments.
        assert_eq!((xdp.packets, xdp.segments, xdp.size_buckets[7]), (1, 2, 2));
        assert_eq!((tc.packets, tc.segments, tc.size_buckets[8]), (1, 1, 1));
    }
}

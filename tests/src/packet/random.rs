//! Seeded random inputs for the data plane: a tiny deterministic generator ([`Rng`]) and
//! frames of every kind the parser meets, valid, cut short, or with bogus lengths, flags and
//! fields ([`random_frame`]), for the randomised tests that compare the data plane's counters
//! with [`super::model`].

use super::builder::{self as pkt, Ext, Ipv4, Ipv6, Tcp};

/// xorshift64*: tiny, deterministic, good enough for fuzzing headers.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator whose sequence is fixed by `seed` (0 counts as 1).
    pub fn new(seed: u64) -> Self {
        Rng(seed.max(1))
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number in `0..n`.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// True `percent` times in a hundred.
    pub fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    /// A random byte.
    pub fn u8(&mut self) -> u8 {
        self.next_u64() as u8
    }

    /// A random 16-bit number.
    pub fn u16(&mut self) -> u16 {
        self.next_u64() as u16
    }

    /// `n` random bytes.
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.u8()).collect()
    }

    /// One of `items`.
    pub fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())]
    }
}

/// Ports from a small set, so the flow table stays far below its per-CPU LRU capacity.
fn random_port(rng: &mut Rng) -> u16 {
    rng.pick(&[
        4789, 8472, 6081, 51820, 53, 443, 10000, 0, 1, 2, 3, 4, 5, 6, 7, 8,
    ])
}

/// A transport header and payload for `proto` (TCP, UDP, ICMP, ICMPv6 shaped; anything
/// else random bytes); `wild` also draws bogus lengths and offsets.
pub fn random_l4(rng: &mut Rng, proto: u8, wild: bool) -> Vec<u8> {
    let payload_len = if rng.chance(70) {
        rng.below(64)
    } else {
        rng.below(400)
    };
    match proto {
        pkt::TCP => {
            let (sport, dport) = (random_port(rng), random_port(rng));
            let mut t = Tcp::new(sport, dport, rng.next_u64() as u32, rng.u8());
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

/// An IPv4 packet (sometimes fragmented, with options, grown to a bucket bound); `wild`
/// also draws bogus IHL, total length and version.
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

/// An IPv6 packet behind up to eight extension headers; `wild` also draws a bogus payload
/// length and version.
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
pub fn random_frame(rng: &mut Rng, raw_ip: bool) -> Vec<u8> {
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

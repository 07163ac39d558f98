//! Hand-made frames for `BPF_PROG_TEST_RUN`: Ethernet (with VLAN tags), IPv4 (options,
//! fragments, any IHL or total length), IPv6 (extension headers, any payload length), TCP
//! (options, any data offset), UDP, ICMP, and payloads shaped like WireGuard messages.
//!
//! Every field a data-plane parser reads can be set to a wrong value on purpose. Checksums
//! are left zero: the programs never read them. Addresses default to 10.0.0.1 → 10.0.0.2
//! and fd00::1 → fd00::2.

/// EtherType IPv4.
pub const ETH_IPV4: u16 = 0x0800;
/// EtherType IPv6.
pub const ETH_IPV6: u16 = 0x86DD;
/// EtherType ARP.
pub const ETH_ARP: u16 = 0x0806;
/// EtherType LLDP.
pub const ETH_LLDP: u16 = 0x88CC;
/// TPID of an 802.1Q VLAN tag.
pub const VLAN_Q: u16 = 0x8100;
/// TPID of an 802.1ad (QinQ service) VLAN tag.
pub const VLAN_AD: u16 = 0x88A8;

/// IP protocol ICMP.
pub const ICMP: u8 = 1;
/// IP protocol TCP.
pub const TCP: u8 = 6;
/// IP protocol UDP.
pub const UDP: u8 = 17;
/// IP protocol ICMPv6.
pub const ICMPV6: u8 = 58;
/// IPv6 hop-by-hop options header.
pub const HOPOPTS: u8 = 0;
/// IPv6 routing header.
pub const ROUTING: u8 = 43;
/// IPv6 fragment header.
pub const FRAGMENT: u8 = 44;
/// IPv6 "no next header".
pub const NONXT: u8 = 59;
/// IPv6 destination options header.
pub const DSTOPTS: u8 = 60;

/// TCP flag FIN.
pub const FIN: u8 = 0x01;
/// TCP flag SYN.
pub const SYN: u8 = 0x02;
/// TCP flag PSH.
pub const PSH: u8 = 0x08;
/// TCP flag ACK.
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

/// An IPv4 header; [`Ipv4::build`] puts it in front of a payload.
#[derive(Clone, Debug)]
pub struct Ipv4 {
    /// Source address.
    pub src: [u8; 4],
    /// Destination address.
    pub dst: [u8; 4],
    /// Protocol of the payload.
    pub proto: u8,
    /// Don't-fragment flag.
    pub df: bool,
    /// More-fragments flag.
    pub mf: bool,
    /// In 8-byte units.
    pub frag_offset: u16,
    /// Padded with zeros (EOL) to a multiple of 4.
    pub options: Vec<u8>,
    /// Overrides the IHL computed from the options.
    pub ihl: Option<u8>,
    /// Overrides the total length computed from header + payload.
    pub tot_len: Option<u16>,
    /// The version nibble (4 unless a test wants another).
    pub version: u8,
    /// Identification field.
    pub id: u16,
}

impl Ipv4 {
    /// 10.0.0.1 -> 10.0.0.2 carrying `proto`, no flags, no options, id 0x1234.
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
            id: 0x1234,
        }
    }

    /// The packet: header (with options) and `payload`.
    pub fn build(&self, payload: &[u8]) -> Vec<u8> {
        let mut opts = self.options.clone();
        while opts.len() % 4 != 0 {
            opts.push(0);
        }
        let hlen = 20 + opts.len();
        let ihl = self.ihl.unwrap_or((hlen / 4) as u8);
        let tot = self.tot_len.unwrap_or((hlen + payload.len()) as u16);
        let frag =
            (u16::from(self.df) << 14) | (u16::from(self.mf) << 13) | (self.frag_offset & 0x1fff);
        let mut h = vec![(self.version << 4) | (ihl & 0xf), 0];
        h.extend(tot.to_be_bytes());
        h.extend(self.id.to_be_bytes());
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
    /// Routing header with this Hdr Ext Len.
    Routing(u8),
    /// Destination options with this Hdr Ext Len.
    Dest(u8),
    /// Fragment header: offset in 8-byte units, M flag.
    Frag {
        /// Fragment offset in 8-byte units.
        offset: u16,
        /// More-fragments flag.
        more: bool,
    },
}

impl Ext {
    /// The header's Next Header value.
    pub fn kind(self) -> u8 {
        match self {
            Ext::Hop(_) => HOPOPTS,
            Ext::Routing(_) => ROUTING,
            Ext::Dest(_) => DSTOPTS,
            Ext::Frag { .. } => FRAGMENT,
        }
    }
}

/// An IPv6 header and its extension headers; [`Ipv6::build`] puts them in front of a
/// payload.
#[derive(Clone, Debug)]
pub struct Ipv6 {
    /// Source address.
    pub src: [u8; 16],
    /// Destination address.
    pub dst: [u8; 16],
    /// Extension headers, in order.
    pub exts: Vec<Ext>,
    /// Overrides the payload length computed from extension headers + payload.
    pub payload_len: Option<u16>,
    /// The version nibble (6 unless a test wants another).
    pub version: u8,
}

impl Default for Ipv6 {
    fn default() -> Self {
        Self::new()
    }
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

    /// These extension headers, in order.
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

/// A TCP header; [`Tcp::build`] puts it in front of a payload.
#[derive(Clone, Debug)]
pub struct Tcp {
    /// Source port.
    pub sport: u16,
    /// Destination port.
    pub dport: u16,
    /// Sequence number.
    pub seq: u32,
    /// Flags ([`FIN`], [`SYN`], [`PSH`], [`ACK`], ...).
    pub flags: u8,
    /// Padded with zeros (EOL) to a multiple of 4.
    pub options: Vec<u8>,
    /// Overrides the data offset computed from the options.
    pub doff: Option<u8>,
}

impl Tcp {
    /// A header without options; acknowledgment number 0, window 0xffff.
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

    /// These options (raw bytes, padded when built).
    pub fn opts(mut self, options: &[u8]) -> Self {
        self.options = options.to_vec();
        self
    }

    /// The segment: header (with options) and `payload`.
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

/// A UDP datagram (length from the payload).
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

/// A WireGuard transport-data message of `len` bytes (at least 32) for the session whose
/// receiver index is `receiver`, with `counter`: both little-endian, as on the wire.
pub fn wg_data(receiver: u32, counter: u64, len: usize) -> Vec<u8> {
    let mut p = wg(4, len.max(32));
    p[4..8].copy_from_slice(&receiver.to_le_bytes());
    p[8..16].copy_from_slice(&counter.to_le_bytes());
    p
}

/// A WireGuard handshake initiation (148 bytes) with `sender`'s index.
pub fn wg_initiation(sender: u32) -> Vec<u8> {
    let mut p = wg(1, 148);
    p[4..8].copy_from_slice(&sender.to_le_bytes());
    p
}

/// A WireGuard handshake response (92 bytes) from `sender` to the initiation of `receiver`.
pub fn wg_response(sender: u32, receiver: u32) -> Vec<u8> {
    let mut p = wg(2, 92);
    p[4..8].copy_from_slice(&sender.to_le_bytes());
    p[8..12].copy_from_slice(&receiver.to_le_bytes());
    p
}

#[cfg(test)]
mod tests;

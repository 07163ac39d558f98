//! The frames as the data plane's parsers read them: lengths, offsets and fields.

use super::*;

fn be16(p: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([p[at], p[at + 1]])
}

#[test]
fn ipv4_fields_sit_where_parsers_read_them() {
    let mut ip = Ipv4::new(UDP);
    ip.df = true;
    ip.frag_offset = 3;
    ip.options = vec![1, 1, 1];
    let p = ip.build(&[0xaa; 10]);
    assert_eq!(p.len(), 24 + 10, "options padded to 4 bytes");
    assert_eq!(p[0], 0x46, "version 4, IHL 6");
    assert_eq!(be16(&p, 2), 34, "total length");
    assert_eq!(be16(&p, 4), 0x1234, "id");
    assert_eq!(be16(&p, 6), 0x4000 | 3, "DF and offset");
    assert_eq!(p[9], UDP);
    assert_eq!(&p[12..20], &[10, 0, 0, 1, 10, 0, 0, 2]);
    assert_eq!(&p[20..24], &[1, 1, 1, 0]);
}

#[test]
fn ipv6_extension_headers_chain_to_the_payload_protocol() {
    let exts = [
        Ext::Hop(1),
        Ext::Frag {
            offset: 2,
            more: true,
        },
    ];
    let p = Ipv6::new().exts(&exts).build(TCP, &[0; 20]);
    assert_eq!(p[6], HOPOPTS, "fixed header names the first extension");
    assert_eq!(
        (p[40], p[41]),
        (FRAGMENT, 1),
        "16-byte hop-by-hop, then fragment"
    );
    assert_eq!(p[56], TCP, "fragment header, then TCP");
    assert_eq!(be16(&p, 58), (2 << 3) | 1, "offset 2, M set");
    assert_eq!(usize::from(be16(&p, 4)), p.len() - 40, "payload length");
}

#[test]
fn vlan_tags_come_outermost_first() {
    let f = eth_tagged(&[VLAN_AD, VLAN_Q], ETH_IPV6, &[]);
    assert_eq!(f.len(), 14 + 8);
    assert_eq!(be16(&f, 12), VLAN_AD);
    assert_eq!(be16(&f, 16), VLAN_Q);
    assert_eq!(be16(&f, 20), ETH_IPV6);
}

#[test]
fn tcp_data_offset_counts_padded_options() {
    let t = Tcp::new(1, 2, 3, SYN).opts(&[2, 4, 5, 0xb4, 1]).build(&[]);
    assert_eq!(t.len(), 28);
    assert_eq!(t[12] >> 4, 7);
    assert_eq!(t[13], SYN);
}

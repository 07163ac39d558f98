//! Netlink attributes as nf_tables sends them: by type, in order, strings and big-endian
//! numbers (shared by the ruleset dump and the expressions' decoder).

use std::collections::BTreeMap;

use netlink_packet_core::{NlaBuffer, NlasIterator};

/// An attribute's type and value (within the buffer it was read from).
fn value_of(nla: NlaBuffer<&[u8]>) -> (u16, &[u8]) {
    let kind = nla.kind();
    let end = usize::from(nla.length()).max(4);
    let inner = nla.into_inner();
    (kind, inner.get(4..end).unwrap_or(&[]))
}

/// Attributes by type.
pub(super) type Attrs<'a> = BTreeMap<u16, &'a [u8]>;

/// The attributes of a message or a nest, by type (the last one wins).
pub(super) fn attrs(buf: &[u8]) -> Attrs<'_> {
    NlasIterator::new(buf)
        .filter_map(Result::ok)
        .map(value_of)
        .collect()
}

/// Every attribute of a nest, in order, with its type.
pub(super) fn attr_list(buf: &[u8]) -> Vec<(u16, &[u8])> {
    NlasIterator::new(buf)
        .filter_map(Result::ok)
        .map(value_of)
        .collect()
}

/// A NUL-terminated string attribute.
pub(super) fn string(value: &[u8]) -> String {
    let end = value.iter().position(|b| *b == 0).unwrap_or(value.len());
    String::from_utf8_lossy(&value[..end]).into_owned()
}

/// A big-endian u32 attribute (nf_tables sends numbers in network byte order).
pub(super) fn be32(value: &[u8]) -> Option<u32> {
    Some(u32::from_be_bytes(value.get(..4)?.try_into().ok()?))
}

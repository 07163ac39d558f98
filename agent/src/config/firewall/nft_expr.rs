//! nf_tables expressions turned into conditions and actions. A rule is a small program:
//! expressions load packet fields into registers (`meta`, `payload`, `bitwise`, `rt`,
//! `immediate`), compare them (`cmp`, `lookup`), and act (`masq`, `nat`, `exthdr` writing
//! the MSS option, an x_tables `target`, a verdict jumping to a chain). Registers are
//! followed just far enough to name what a comparison is about.

use std::collections::HashMap;
use std::ffi::CStr;

use super::chains::Decoded;
use super::nlattr::{attr_list, attrs, be32, string, Attrs};
use super::xtables::target_action;
use super::{prefix_from, Action, IfName, Match, TableFamily};

const NFTA_LIST_ELEM: u16 = 1;
const NFTA_EXPR_NAME: u16 = 1;
const NFTA_EXPR_DATA: u16 = 2;
const NFTA_DATA_VALUE: u16 = 1;
const NFTA_DATA_VERDICT: u16 = 2;
const NFTA_VERDICT_CODE: u16 = 1;
const NFTA_VERDICT_CHAIN: u16 = 2;

const META_IIF: u32 = 4;
const META_OIF: u32 = 5;
const META_IIFNAME: u32 = 6;
const META_OIFNAME: u32 = 7;
const META_NFPROTO: u32 = 15;
const META_L4PROTO: u32 = 16;
const PAYLOAD_NETWORK: u32 = 1;
const RT_TCPMSS: u32 = 3;
const EXTHDR_OP_TCPOPT: u32 = 1;
const TCPOPT_MAXSEG: u8 = 2;
const CMP_EQ: u32 = 0;
const CMP_NEQ: u32 = 1;
const NFT_JUMP: i32 = -3;
const NFT_GOTO: i32 = -4;
const NAT_SNAT: u32 = 0;
const LOOKUP_F_INV: u32 = 1;

/// What a register holds.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Held {
    Meta(u32),
    Payload {
        base: u32,
        offset: u32,
        len: u32,
    },
    Masked {
        offset: u32,
        len: u32,
        mask: Vec<u8>,
    },
    RtMss,
    Value(Vec<u8>),
}

/// Registers as 32-bit slots: `NFT_REG_1..4` are 16 bytes wide and alias slots 0, 4, 8,
/// 12 of `NFT_REG32_00..15` (numbers 8..23).
fn slot(reg: u32) -> Option<u32> {
    match reg {
        1..=4 => Some((reg - 1) * 4),
        8..=23 => Some(reg - 8),
        _ => None,
    }
}

fn reg(a: &Attrs<'_>, kind: u16) -> Option<u32> {
    a.get(&kind).and_then(|v| be32(v)).and_then(slot)
}

fn value(nest: Option<&&[u8]>) -> Vec<u8> {
    nest.map(|n| attrs(n).get(&NFTA_DATA_VALUE).map(|v| v.to_vec()))
        .unwrap_or_default()
        .unwrap_or_default()
}

/// The interface whose index is `bytes` (host order), named in this namespace.
fn ifname_of(bytes: &[u8]) -> Option<String> {
    let index = u32::from_ne_bytes(bytes.get(..4)?.try_into().ok()?);
    let mut buf = [0 as libc::c_char; libc::IF_NAMESIZE];
    // SAFETY: `buf` has IF_NAMESIZE bytes, as if_indextoname requires; it writes a
    // NUL-terminated name there or returns NULL.
    let name = unsafe { libc::if_indextoname(index, buf.as_mut_ptr()) };
    if name.is_null() {
        return None;
    }
    // SAFETY: on success `buf` holds a NUL-terminated string.
    let name = unsafe { CStr::from_ptr(buf.as_ptr()) };
    Some(name.to_string_lossy().into_owned())
}

struct Decoder {
    family: TableFamily,
    regs: HashMap<u32, Held>,
    out: Decoded,
}

impl Decoder {
    /// A source-address condition on `held` compared with `data`, if that is what it is.
    fn saddr(&self, held: &Held, data: &[u8], negated: bool) -> Option<Match> {
        let (offset, len, bits) = match held {
            Held::Payload {
                base: PAYLOAD_NETWORK,
                offset,
                len,
            } => (*offset, *len, len * 8),
            Held::Masked { offset, len, mask } => {
                let ones: u32 = mask.iter().map(|b| b.count_ones()).sum();
                (*offset, *len, ones)
            }
            _ => return None,
        };
        let width = match (self.family, offset) {
            (TableFamily::Ipv4, 12) => 4,
            (TableFamily::Ipv6, 8) => 16,
            _ => return None,
        };
        if len as usize > width || data.len() < len as usize {
            return None;
        }
        let mut addr = vec![0u8; width];
        addr[..len as usize].copy_from_slice(&data[..len as usize]);
        Some(Match::Saddr {
            prefix: prefix_from(&addr, bits)?,
            negated,
        })
    }

    fn cmp(&mut self, a: &Attrs<'_>) {
        let (Some(sreg), Some(op)) = (reg(a, 1), a.get(&2).and_then(|v| be32(v))) else {
            return;
        };
        let data = value(a.get(&3));
        let Some(held) = self.regs.get(&sreg).cloned() else {
            self.out.matches.push(Match::Other("cmp".into()));
            return;
        };
        let negated = op == CMP_NEQ;
        let known = op == CMP_EQ || op == CMP_NEQ;
        let m = match &held {
            Held::Meta(k @ (META_IIFNAME | META_OIFNAME)) if known => {
                let name = IfName::from_bytes(&data);
                Some(if *k == META_IIFNAME {
                    Match::Iif { name, negated }
                } else {
                    Match::Oif { name, negated }
                })
            }
            Held::Meta(k @ (META_IIF | META_OIF)) if known => ifname_of(&data).map(|n| {
                let name = IfName {
                    name: n,
                    prefix: false,
                };
                if *k == META_IIF {
                    Match::Iif { name, negated }
                } else {
                    Match::Oif { name, negated }
                }
            }),
            Held::Meta(META_NFPROTO) if op == CMP_EQ => match data.first() {
                Some(2) => {
                    self.family = TableFamily::Ipv4;
                    Some(Match::Family(TableFamily::Ipv4))
                }
                Some(10) => {
                    self.family = TableFamily::Ipv6;
                    Some(Match::Family(TableFamily::Ipv6))
                }
                _ => None,
            },
            _ if known => self.saddr(&held, &data, negated),
            _ => None,
        };
        self.out
            .matches
            .push(m.unwrap_or_else(|| Match::Other(describe(&held))));
    }

    /// One expression `name` with attributes `a`: a register load, a condition or an action.
    fn expr(&mut self, name: &str, a: &Attrs<'_>) {
        match name {
            "meta" => {
                if let (Some(dreg), Some(key)) = (reg(a, 1), a.get(&2).and_then(|v| be32(v))) {
                    self.regs.insert(dreg, Held::Meta(key));
                }
            }
            "payload" => {
                let n = |k| a.get(&k).and_then(|v| be32(v));
                if let (Some(dreg), Some(base), Some(offset), Some(len)) =
                    (reg(a, 1), n(2), n(3), n(4))
                {
                    self.regs.insert(dreg, Held::Payload { base, offset, len });
                }
            }
            "bitwise" => self.bitwise(a),
            "rt" => {
                if let (Some(dreg), Some(key)) = (reg(a, 1), a.get(&2).and_then(|v| be32(v))) {
                    let held = if key == RT_TCPMSS {
                        Held::RtMss
                    } else {
                        Held::Value(Vec::new())
                    };
                    self.regs.insert(dreg, held);
                }
            }
            "immediate" => self.immediate(a),
            "cmp" => self.cmp(a),
            "lookup" => self.lookup(a),
            "masq" => self.out.action = Some(Action::Masquerade),
            "nat" if a.get(&1).and_then(|v| be32(v)) == Some(NAT_SNAT) => {
                self.out.action = Some(Action::Snat);
            }
            "exthdr" => self.exthdr(a),
            "target" => self.xt_target(a),
            "match" => self.xt_match(a),
            _ => {}
        }
    }

    /// `bitwise`: a mask over a network-header load keeps the load with its mask, over
    /// another load keeps the load; anything else becomes an unnamed value.
    fn bitwise(&mut self, a: &Attrs<'_>) {
        if let (Some(sreg), Some(dreg)) = (reg(a, 1), reg(a, 2)) {
            let held = match self.regs.get(&sreg) {
                Some(Held::Payload {
                    base: PAYLOAD_NETWORK,
                    offset,
                    len,
                }) => Held::Masked {
                    offset: *offset,
                    len: *len,
                    mask: value(a.get(&4)),
                },
                Some(Held::Payload { base, offset, len }) => Held::Payload {
                    base: *base,
                    offset: *offset,
                    len: *len,
                },
                _ => Held::Value(Vec::new()),
            };
            self.regs.insert(dreg, held);
        }
    }

    /// `lookup`: a set membership test, kept as a condition described in words.
    fn lookup(&mut self, a: &Attrs<'_>) {
        let what = reg(a, 2)
            .and_then(|r| self.regs.get(&r))
            .map_or_else(|| "value".to_owned(), describe);
        let inverted = a
            .get(&5)
            .and_then(|v| be32(v))
            .is_some_and(|f| f & LOOKUP_F_INV != 0);
        let set = a.get(&1).map(|s| string(s)).unwrap_or_default();
        self.out.matches.push(Match::Other(format!(
            "{what}{} @{set}",
            if inverted { " not in" } else { " in" }
        )));
    }

    /// An x_tables `target` (iptables-nft): its action, when it is one we know.
    fn xt_target(&mut self, a: &Attrs<'_>) {
        let info = a.get(&3).copied().unwrap_or(&[]);
        let target = a.get(&1).map(|n| string(n)).unwrap_or_default();
        if let Some(action) = target_action(&target, info) {
            self.out.action = Some(action);
        }
    }

    /// An x_tables `match` (iptables-nft): a condition, except `tcp` and `comment`.
    fn xt_match(&mut self, a: &Attrs<'_>) {
        let m = a.get(&1).map(|n| string(n)).unwrap_or_default();
        if !matches!(m.as_str(), "tcp" | "comment") {
            self.out.matches.push(Match::Other(format!("-m {m}")));
        }
    }

    fn immediate(&mut self, a: &Attrs<'_>) {
        let Some(data) = a.get(&2).map(|d| attrs(d)) else {
            return;
        };
        if let Some(verdict) = data.get(&NFTA_DATA_VERDICT).map(|v| attrs(v)) {
            let code = verdict
                .get(&NFTA_VERDICT_CODE)
                .and_then(|c| be32(c))
                .map(|c| c as i32);
            if matches!(code, Some(NFT_JUMP | NFT_GOTO)) {
                self.out.jump = verdict.get(&NFTA_VERDICT_CHAIN).map(|c| string(c));
            }
        } else if let (Some(dreg), Some(v)) = (reg(a, 1), data.get(&NFTA_DATA_VALUE)) {
            self.regs.insert(dreg, Held::Value(v.to_vec()));
        }
    }

    /// `tcp option maxseg size set …`: a write of two bytes at offset 2 of option 2.
    fn exthdr(&mut self, a: &Attrs<'_>) {
        let n = |k| a.get(&k).and_then(|v| be32(v));
        let Some(sreg) = reg(a, 7) else {
            return; // a load, not a write
        };
        let is_mss = n(6) == Some(EXTHDR_OP_TCPOPT)
            && a.get(&2).and_then(|t| t.first()) == Some(&TCPOPT_MAXSEG)
            && n(3) == Some(2);
        if !is_mss {
            return;
        }
        self.out.action = match self.regs.get(&sreg) {
            Some(Held::RtMss) => Some(Action::ClampMss(None)),
            Some(Held::Value(v)) if v.len() >= 2 => {
                Some(Action::ClampMss(Some(u16::from_be_bytes([v[0], v[1]]))))
            }
            _ => Some(Action::ClampMss(None)),
        };
    }
}

fn describe(held: &Held) -> String {
    match held {
        Held::Meta(META_NFPROTO) => "meta nfproto".into(),
        Held::Meta(META_L4PROTO) => "meta l4proto".into(),
        Held::Meta(k) => format!("meta key {k}"),
        Held::Payload { base, offset, len } => {
            let header = ["ll", "nh", "th", "ih"]
                .get(*base as usize)
                .unwrap_or(&"payload");
            format!("@{header},{},{}", offset * 8, len * 8)
        }
        Held::Masked { offset, len, .. } => format!("@nh,{},{} masked", offset * 8, len * 8),
        Held::RtMss => "rt tcpmss".into(),
        Held::Value(_) => "value".into(),
    }
}

/// Decodes the `NFTA_RULE_EXPRESSIONS` nest of one rule of a table of `family`.
pub(super) fn decode(expressions: &[u8], family: TableFamily) -> Decoded {
    let mut d = Decoder {
        family,
        regs: HashMap::new(),
        out: Decoded::default(),
    };
    for (kind, elem) in attr_list(expressions) {
        if kind != NFTA_LIST_ELEM {
            continue;
        }
        let e = attrs(elem);
        let name = e
            .get(&NFTA_EXPR_NAME)
            .map(|n| string(n))
            .unwrap_or_default();
        let data = e.get(&NFTA_EXPR_DATA).map(|d| attrs(d)).unwrap_or_default();
        d.expr(&name, &data);
    }
    d.out
}

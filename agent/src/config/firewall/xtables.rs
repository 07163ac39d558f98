//! Legacy iptables and ip6tables, read as `iptables-legacy-save` reads them:
//! `getsockopt(IPT_SO_GET_INFO)` for a table's hooks and size, then
//! `getsockopt(IPT_SO_GET_ENTRIES)` for its rules, a run of `struct ipt_entry` (or
//! `ip6t_entry`) each followed by its match modules and its target. User-defined chains
//! begin with an `ERROR` target naming them; a standard target with a non-negative verdict
//! jumps to the rule at that offset. Only tables the namespace has in use
//! (`/proc/thread-self/net/ip_tables_names`: the calling thread's namespace) are asked for,
//! so nothing is loaded by looking.
//!
//! Also the x_tables targets netdoctor understands, shared with `iptables-nft`'s rules in
//! nftables ([`target_action`]).

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use super::chains::{Chain, Decoded, Table};
use super::{prefix_from, Action, FirewallRule, Hook, IfName, Match, Source, TableFamily};

/// `IPT_SO_GET_INFO` (= `IP6T_SO_GET_INFO`).
const SO_GET_INFO: libc::c_int = 64;
/// `IPT_SO_GET_ENTRIES`.
const SO_GET_ENTRIES: libc::c_int = 65;
/// `XT_TABLE_MAXNAMELEN`.
const NAME_LEN: usize = 32;
/// `sizeof(struct ipt_getinfo)`.
const GETINFO_LEN: usize = 84;
/// `offsetof(struct ipt_get_entries, entrytable)`.
const ENTRIES_HEADER: usize = 40;
/// `XT_TCPMSS_CLAMP_PMTU`.
const CLAMP_PMTU: u16 = 0xffff;
/// A chain's name in `struct xt_error_target`.
const ERROR_NAME_LEN: usize = 30;
const HOOK_NAMES: [&str; 5] = ["PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"];

/// The layout of one family's `struct ipt_entry` / `ip6t_entry` (checked against the
/// kernel headers: `offsetof` on x86_64 and every other Linux ABI netdoctor builds for).
struct Layout {
    addr_len: usize,
    smsk: usize,
    iniface: usize,
    outiface: usize,
    iniface_mask: usize,
    outiface_mask: usize,
    invflags: usize,
    target_offset: usize,
    entry_len: usize,
}

const IPV4: Layout = Layout {
    addr_len: 4,
    smsk: 8,
    iniface: 16,
    outiface: 32,
    iniface_mask: 48,
    outiface_mask: 64,
    invflags: 83,
    target_offset: 88,
    entry_len: 112,
};

const IPV6: Layout = Layout {
    addr_len: 16,
    smsk: 32,
    iniface: 64,
    outiface: 80,
    iniface_mask: 96,
    outiface_mask: 112,
    invflags: 132,
    target_offset: 140,
    entry_len: 168,
};

const INV_VIA_IN: u8 = 0x01;
const INV_VIA_OUT: u8 = 0x02;
const INV_SRCIP: u8 = 0x08;

/// What an x_tables target named `name` with data `info` does, if netdoctor cares.
pub(crate) fn target_action(name: &str, info: &[u8]) -> Option<Action> {
    match name {
        "MASQUERADE" => Some(Action::Masquerade),
        "SNAT" => Some(Action::Snat),
        "TCPMSS" => {
            let mss = u16::from_ne_bytes(info.get(..2)?.try_into().ok()?);
            Some(Action::ClampMss((mss != CLAMP_PMTU).then_some(mss)))
        }
        _ => None,
    }
}

fn cstr(bytes: &[u8]) -> String {
    super::nlattr::string(bytes)
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// An interface condition from a name and its mask (a mask that stops before the name's
/// NUL is iptables' `wg+`).
fn iface(name: &[u8], mask: &[u8], negated: bool, iif: bool) -> Option<Match> {
    let text = cstr(name);
    if text.is_empty() {
        return None;
    }
    let prefix = mask.get(text.len()).is_none_or(|m| *m == 0);
    let name = IfName { name: text, prefix };
    Some(if iif {
        Match::Iif { name, negated }
    } else {
        Match::Oif { name, negated }
    })
}

/// One entry: its conditions, and its target as an action, a jump offset or a chain head.
#[derive(Debug, Default)]
struct Entry {
    offset: u32,
    rule: Decoded,
    jump_to: Option<u32>,
    chain_head: Option<String>,
}

fn entry(e: &[u8], offset: u32, l: &Layout) -> Option<Entry> {
    let mut out = Entry {
        offset,
        ..Entry::default()
    };
    let inv = *e.get(l.invflags)?;
    let mask_bits: u32 = e
        .get(l.smsk..l.smsk + l.addr_len)?
        .iter()
        .map(|b| b.count_ones())
        .sum();
    if mask_bits > 0 {
        out.rule.matches.push(Match::Saddr {
            prefix: prefix_from(e.get(..l.addr_len)?, mask_bits)?,
            negated: inv & INV_SRCIP != 0,
        });
    }
    let name = |at: usize| e.get(at..at + 16);
    out.rule.matches.extend(iface(
        name(l.iniface)?,
        name(l.iniface_mask)?,
        inv & INV_VIA_IN != 0,
        true,
    ));
    out.rule.matches.extend(iface(
        name(l.outiface)?,
        name(l.outiface_mask)?,
        inv & INV_VIA_OUT != 0,
        false,
    ));
    let target_at = usize::from(u16_at(e, l.target_offset)?);
    // Match modules sit between the entry and its target.
    let mut at = l.entry_len;
    while at + 32 <= target_at {
        let size = usize::from(u16_at(e, at)?);
        let m = cstr(e.get(at + 2..at + 31)?);
        if !matches!(m.as_str(), "tcp" | "comment" | "udp") {
            out.rule.matches.push(Match::Other(format!("-m {m}")));
        }
        if size < 32 {
            break;
        }
        at += size;
    }
    let target = e.get(target_at..)?;
    let tname = cstr(target.get(2..31)?);
    let data = target.get(32..).unwrap_or(&[]);
    match tname.as_str() {
        "" => {
            let verdict = u32_at(data, 0)? as i32;
            // A jump and a goto (`-g`, the goto flag) reach the chain alike.
            if verdict >= 0 {
                out.jump_to = Some(verdict as u32);
            }
        }
        "ERROR" => out.chain_head = Some(cstr(data.get(..ERROR_NAME_LEN)?)),
        t => out.rule.action = target_action(t, data),
    }
    Some(out)
}

/// Splits a table's entries into chains: base chains start at their hook's entry, user
/// chains after their `ERROR` head; the table ends with an `ERROR` named "ERROR".
fn chains(entries: &[u8], hook_entry: &[(Hook, u32)], l: &Layout) -> Vec<Chain> {
    let mut parsed = Vec::new();
    let mut offset = 0usize;
    while offset + l.entry_len <= entries.len() {
        let next = usize::from(u16_at(entries, offset + l.target_offset + 2).unwrap_or(0));
        let Some(e) = entries.get(offset..offset + next.max(l.entry_len)) else {
            break;
        };
        match entry(e, offset as u32, l) {
            Some(e) => parsed.push(e),
            None => break,
        }
        if next == 0 {
            break;
        }
        offset += next;
    }
    // The offset each user chain's first rule has: jumps name chains by it.
    let mut heads: Vec<(u32, String)> = Vec::new();
    for pair in parsed.windows(2) {
        if let Some(name) = &pair[0].chain_head {
            heads.push((pair[1].offset, name.clone()));
        }
    }
    let mut out: Vec<Chain> = Vec::new();
    for e in parsed {
        if let Some((hook, _)) = hook_entry.iter().find(|(_, at)| *at == e.offset) {
            out.push(Chain {
                name: HOOK_NAMES[*hook as usize].to_owned(),
                hook: Some(*hook),
                rules: Vec::new(),
            });
        }
        if let Some(name) = e.chain_head {
            if name == "ERROR" {
                break;
            }
            out.push(Chain {
                name,
                hook: None,
                rules: Vec::new(),
            });
            continue;
        }
        let mut rule = e.rule;
        rule.jump = e
            .jump_to
            .and_then(|to| heads.iter().find(|(at, _)| *at == to))
            .map(|(_, name)| name.clone());
        if let Some(chain) = out.last_mut() {
            chain.rules.push(rule);
        }
    }
    out
}

fn getsockopt(
    fd: &OwnedFd,
    level: libc::c_int,
    name: libc::c_int,
    buf: &mut [u8],
) -> std::io::Result<()> {
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: `buf` is valid for `len` bytes and `len` outlives the call.
    let ret = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            level,
            name,
            buf.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if ret == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

fn table(fd: &OwnedFd, level: libc::c_int, name: &str, l: &Layout) -> std::io::Result<Vec<Chain>> {
    let mut info = [0u8; GETINFO_LEN];
    let n = name.len().min(NAME_LEN - 1);
    info[..n].copy_from_slice(&name.as_bytes()[..n]);
    getsockopt(fd, level, SO_GET_INFO, &mut info)?;
    let valid = u32_at(&info, 32).unwrap_or(0);
    let hook_entry: Vec<(Hook, u32)> = (0..5u32)
        .filter(|h| valid & (1 << h) != 0)
        .filter_map(|h| Some((Hook::from_number(h)?, u32_at(&info, 36 + 4 * h as usize)?)))
        .collect();
    let size = u32_at(&info, 80).unwrap_or(0) as usize;
    let mut entries = vec![0u8; ENTRIES_HEADER + size];
    entries[..n].copy_from_slice(&name.as_bytes()[..n]);
    entries[NAME_LEN..NAME_LEN + 4].copy_from_slice(&(size as u32).to_ne_bytes());
    getsockopt(fd, level, SO_GET_ENTRIES, &mut entries)?;
    Ok(chains(&entries[ENTRIES_HEADER..], &hook_entry, l))
}

/// The reachable NAT and MSS clamping rules of legacy iptables (`v4`) or ip6tables.
pub fn read(v4: bool) -> std::io::Result<Vec<FirewallRule>> {
    let names = if v4 {
        "/proc/thread-self/net/ip_tables_names"
    } else {
        "/proc/thread-self/net/ip6_tables_names"
    };
    let Ok(names) = std::fs::read_to_string(names) else {
        return Ok(Vec::new()); // no legacy x_tables in this kernel
    };
    if names.trim().is_empty() {
        return Ok(Vec::new());
    }
    let (domain, level, layout, family, source) = if v4 {
        (
            libc::AF_INET,
            libc::SOL_IP,
            &IPV4,
            TableFamily::Ipv4,
            Source::IptablesLegacy,
        )
    } else {
        (
            libc::AF_INET6,
            libc::SOL_IPV6,
            &IPV6,
            TableFamily::Ipv6,
            Source::Ip6tablesLegacy,
        )
    };
    // SAFETY: socket(2) with constant arguments; the result is checked before use.
    let raw = unsafe {
        libc::socket(
            domain,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            libc::IPPROTO_RAW,
        )
    };
    if raw < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `raw` is a socket just opened and owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    let mut rules = Vec::new();
    for name in names.lines().map(str::trim).filter(|n| !n.is_empty()) {
        let chains = table(&fd, level, name, layout)?;
        rules.extend(
            Table {
                source,
                family,
                name,
                chains: &chains,
            }
            .reachable(),
        );
    }
    Ok(rules)
}

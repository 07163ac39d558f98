//! nftables over netlink: dumps every chain (with its hook) and every rule (with its
//! expressions) of the caller's network namespace, as `nft list ruleset` does, and keeps
//! the reachable NAT and MSS clamping rules. `iptables-nft` writes its rules here too,
//! with native expressions for interfaces and addresses and x_tables "target" expressions
//! for `MASQUERADE`, `SNAT` and `TCPMSS`.
//!
//! The socket and the netlink framing come from rust-netlink's `netlink-sys` and
//! `netlink-packet-core` (already used through `rtnetlink`); the nf_tables attributes are
//! decoded here (see [`super::nft_expr`]). Crates that model nf_tables were weighed:
//! `netlink-bindings` (MIT/Apache, generated from the kernel's YAML spec) has no `masq`,
//! `exthdr` or `rt` expressions in that spec's expression list, exactly the three a clamp
//! or a masquerade is made of; `nf_tables` (MIT/Apache, 0.1) only writes rules; `nlink`
//! (MIT/Apache) decodes them all but brings its own netlink stack of several ten thousand
//! lines and needs Rust 1.88, above this crate's 1.85; `rustables` is GPL-3.0-or-later,
//! which GPL-2.0-only code cannot use.

use std::collections::BTreeMap;
use std::os::fd::AsRawFd;
use std::time::Duration;

use netlink_packet_core::{NetlinkBuffer, NLM_F_DUMP, NLM_F_REQUEST};
use netlink_sys::{protocols::NETLINK_NETFILTER, Socket, SocketAddr};

use super::chains::{Chain, Table};
use super::nft_expr;
use super::nlattr::{attrs, be32, string};
use super::{FirewallRule, Hook, Source, TableFamily};

/// `NFNL_SUBSYS_NFTABLES`.
const SUBSYS_NFTABLES: u16 = 10;
const NFT_MSG_NEWCHAIN: u16 = 3;
const NFT_MSG_GETCHAIN: u16 = 4;
const NFT_MSG_NEWRULE: u16 = 6;
const NFT_MSG_GETRULE: u16 = 7;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
/// `struct nfgenmsg`: family, version, resource id.
const NFGENMSG_LEN: usize = 4;

const NFTA_CHAIN_TABLE: u16 = 1;
const NFTA_CHAIN_NAME: u16 = 3;
const NFTA_CHAIN_HOOK: u16 = 4;
const NFTA_HOOK_HOOKNUM: u16 = 1;
const NFTA_RULE_TABLE: u16 = 1;
const NFTA_RULE_CHAIN: u16 = 2;
const NFTA_RULE_EXPRESSIONS: u16 = 4;

/// How long the kernel may take to answer one dump.
const RECEIVE_TIMEOUT: Duration = Duration::from_secs(2);

/// Reading the ruleset failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The socket could not be opened, or a send or receive failed.
    #[error("netlink socket: {0}")]
    Io(#[from] std::io::Error),
    /// The kernel refused the dump (e.g. EPERM without CAP_NET_ADMIN).
    #[error("the kernel refused the dump: {0}")]
    Refused(std::io::Error),
    /// A message that does not parse.
    #[error("malformed netlink message: {0}")]
    Malformed(String),
}

/// Table family from `NFPROTO_*`; bridge, netdev and arp tables see no routed IP packets.
fn family(nfproto: u8) -> Option<TableFamily> {
    match nfproto {
        1 => Some(TableFamily::Inet),
        2 => Some(TableFamily::Ipv4),
        10 => Some(TableFamily::Ipv6),
        _ => None,
    }
}

/// One dump: every message's family and attribute bytes.
fn dump(socket: &Socket, msg_type: u16, seq: u32) -> Result<Vec<(u8, Vec<u8>)>, Error> {
    let mut request = vec![0u8; 16 + NFGENMSG_LEN];
    let len = request.len() as u32;
    request[0..4].copy_from_slice(&len.to_ne_bytes());
    request[4..6].copy_from_slice(&((SUBSYS_NFTABLES << 8) | msg_type).to_ne_bytes());
    request[6..8].copy_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
    request[8..12].copy_from_slice(&seq.to_ne_bytes());
    // nfgenmsg: NFPROTO_UNSPEC (every family), NFNETLINK_V0, res_id 0.
    socket.send(&request, 0)?;
    let mut out = Vec::new();
    loop {
        let (datagram, _) = socket.recv_from_full()?;
        let mut rest: &[u8] = &datagram;
        while !rest.is_empty() {
            let msg =
                NetlinkBuffer::new_checked(rest).map_err(|e| Error::Malformed(e.to_string()))?;
            let total = (msg.length() as usize).min(rest.len());
            let payload = msg.payload();
            match msg.message_type() {
                NLMSG_DONE => return Ok(out),
                NLMSG_ERROR => {
                    let code = payload
                        .get(..4)
                        .and_then(|b| b.try_into().ok())
                        .map_or(0, i32::from_ne_bytes);
                    if code == 0 {
                        return Ok(out);
                    }
                    return Err(Error::Refused(std::io::Error::from_raw_os_error(-code)));
                }
                t if msg.sequence_number() == seq
                    && t >> 8 == SUBSYS_NFTABLES
                    && (t & 0xff == NFT_MSG_NEWCHAIN || t & 0xff == NFT_MSG_NEWRULE)
                    && payload.len() >= NFGENMSG_LEN =>
                {
                    out.push((payload[0], payload[NFGENMSG_LEN..].to_vec()));
                }
                _ => {}
            }
            // Messages are 4-byte aligned within a datagram.
            rest = rest.get(total.next_multiple_of(4)..).unwrap_or(&[]);
        }
    }
}

fn open() -> Result<Socket, Error> {
    let mut socket = Socket::new(NETLINK_NETFILTER)?;
    socket.bind_auto()?;
    socket.connect(&SocketAddr::new(0, 0))?;
    let timeout = nix::sys::time::TimeVal::new(RECEIVE_TIMEOUT.as_secs() as i64, 0);
    // SAFETY: `timeout` is a valid timeval that outlives the call, and its size is passed.
    let ret = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            std::ptr::from_ref(&timeout).cast(),
            std::mem::size_of::<nix::sys::time::TimeVal>() as libc::socklen_t,
        )
    };
    if ret != 0 {
        return Err(Error::Io(std::io::Error::last_os_error()));
    }
    Ok(socket)
}

/// Every reachable NAT and MSS clamping rule of the nftables ruleset.
pub fn read() -> Result<Vec<FirewallRule>, Error> {
    let socket = open()?;
    // (family, table) -> chains.
    let mut tables: BTreeMap<(u8, String), Vec<Chain>> = BTreeMap::new();
    for (nfproto, body) in dump(&socket, NFT_MSG_GETCHAIN, 1)? {
        let a = attrs(&body);
        let (Some(table), Some(name)) = (a.get(&NFTA_CHAIN_TABLE), a.get(&NFTA_CHAIN_NAME)) else {
            continue;
        };
        let hook = a
            .get(&NFTA_CHAIN_HOOK)
            .and_then(|h| attrs(h).get(&NFTA_HOOK_HOOKNUM).and_then(|n| be32(n)))
            .and_then(Hook::from_number);
        tables
            .entry((nfproto, string(table)))
            .or_default()
            .push(Chain {
                name: string(name),
                hook,
                rules: Vec::new(),
            });
    }
    for (nfproto, body) in dump(&socket, NFT_MSG_GETRULE, 2)? {
        let a = attrs(&body);
        let (Some(table), Some(chain)) = (a.get(&NFTA_RULE_TABLE), a.get(&NFTA_RULE_CHAIN)) else {
            continue;
        };
        let Some(fam) = family(nfproto) else { continue };
        let decoded = nft_expr::decode(a.get(&NFTA_RULE_EXPRESSIONS).copied().unwrap_or(&[]), fam);
        let chain = string(chain);
        if let Some(c) = tables
            .get_mut(&(nfproto, string(table)))
            .and_then(|chains| chains.iter_mut().find(|c| c.name == chain))
        {
            c.rules.push(decoded);
        }
    }
    let mut rules = Vec::new();
    for ((nfproto, name), chains) in &tables {
        let Some(family) = family(*nfproto) else {
            continue;
        };
        let table = Table {
            source: Source::Nftables,
            family,
            name,
            chains,
        };
        rules.extend(table.reachable());
    }
    Ok(rules)
}

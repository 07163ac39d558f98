//! The filters on an interface's clsact qdisc, listed over rtnetlink as `tc filter show dev
//! IF ingress` and `egress` list them: whether a clsact netdoctor created is empty
//! ([`super::clsact`]), and which of them are a killed netdoctor's leftovers
//! ([`super::attach::sweep_leftovers`]: netdoctor's priority and a cls_bpf program id).
//! Each answer of the kernel is awaited at most [`RECEIVE_TIMEOUT`], and a list holds at most
//! [`MAX_FILTERS`] filters.

use std::io;
use std::time::Duration;

use netlink_packet_core::{
    parse_string, parse_u32, NetlinkBuffer, NetlinkMessage, NlasIterator, NLM_F_DUMP, NLM_F_REQUEST,
};
use netlink_sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};
use rtnetlink::packet_route::tc::{TcHandle, TcHeader, TcMessage};
use rtnetlink::packet_route::RouteNetlinkMessage;

/// `RTM_NEWTFILTER`: one message of a filter dump.
const RTM_NEWTFILTER: u16 = 44;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
/// How long the kernel may take to answer one dump.
const RECEIVE_TIMEOUT: Duration = Duration::from_secs(2);
/// More filters than any clsact netdoctor shares holds: a list stops with an error there.
const MAX_FILTERS: usize = 65_536;

/// One message of a filter dump of a clsact's ingress or egress (`tc filter show`'s lines).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Filter {
    /// On the ingress side (else egress).
    pub ingress: bool,
    /// Its priority (`tc filter show`'s `pref`).
    pub priority: u16,
    /// Its handle; 0 in the message that opens a priority's list.
    pub handle: u32,
    /// Its kind ("bpf", "u32", ...); "" when the message names none.
    pub kind: String,
    /// A cls_bpf filter's program (`TCA_BPF_ID`).
    pub bpf_id: Option<u32>,
}

/// How many filter messages the kernel lists on the clsact of `ifindex`, ingress and
/// egress, every chain (`tc filter show dev IF ingress` and `egress`); 0 when the interface
/// has no clsact.
pub(crate) fn filters(ifindex: u32) -> io::Result<usize> {
    list(ifindex).map(|f| f.len())
}

/// The filter messages the kernel lists on the clsact of `ifindex`, ingress then egress,
/// every chain; none when the interface has no clsact.
pub(crate) fn list(ifindex: u32) -> io::Result<Vec<Filter>> {
    let mut socket = Socket::new(NETLINK_ROUTE)?;
    socket.bind_auto()?;
    socket.connect(&SocketAddr::new(0, 0))?;
    let timeout = nix::sys::time::TimeVal::new(RECEIVE_TIMEOUT.as_secs() as i64, 0);
    nix::sys::socket::setsockopt(&socket, nix::sys::socket::sockopt::ReceiveTimeout, &timeout)?;
    let mut all = Vec::new();
    for (seq, minor) in [(1, TcHandle::MIN_INGRESS), (2, TcHandle::MIN_EGRESS)] {
        dump_filters(&socket, ifindex, minor, seq, &mut all)?;
    }
    Ok(all)
}

fn dump_filters(
    socket: &Socket,
    ifindex: u32,
    minor: u16,
    seq: u32,
    out: &mut Vec<Filter>,
) -> io::Result<()> {
    let mut tc = TcMessage::with_index(ifindex as i32);
    tc.header.parent = TcHandle {
        major: u16::MAX,
        minor,
    };
    let mut request = NetlinkMessage::from(RouteNetlinkMessage::GetTrafficFilter(tc));
    request.header.flags = NLM_F_REQUEST | NLM_F_DUMP;
    request.header.sequence_number = seq;
    request.finalize();
    let mut bytes = vec![0u8; request.buffer_len()];
    request.serialize(&mut bytes);
    socket.send(&bytes, 0)?;
    let ingress = minor == TcHandle::MIN_INGRESS;
    loop {
        let (datagram, _) = socket.recv_from_full()?;
        let mut rest: &[u8] = &datagram;
        while !rest.is_empty() {
            let msg = NetlinkBuffer::new_checked(rest)
                .map_err(|e| io::Error::other(format!("malformed netlink message: {e}")))?;
            let total = (msg.length() as usize).min(rest.len());
            if msg.sequence_number() == seq {
                match msg.message_type() {
                    NLMSG_DONE => return Ok(()),
                    NLMSG_ERROR => {
                        let code = msg
                            .payload()
                            .get(..4)
                            .and_then(|b| b.try_into().ok())
                            .map_or(0, i32::from_ne_bytes);
                        return match code {
                            0 => Ok(()),
                            c => Err(io::Error::from_raw_os_error(-c)),
                        };
                    }
                    RTM_NEWTFILTER if out.len() >= MAX_FILTERS => {
                        return Err(io::Error::other(format!(
                            "interface {ifindex} lists more than {MAX_FILTERS} tc filters"
                        )))
                    }
                    RTM_NEWTFILTER => out.push(parse_filter(msg.payload(), ingress)?),
                    _ => {}
                }
            }
            // Messages are 4-byte aligned within a datagram.
            rest = rest.get(total.next_multiple_of(4).max(4)..).unwrap_or(&[]);
        }
    }
}

/// `struct tcmsg`, before the attributes.
const TCMSG_LEN: usize = 20;
const TCA_KIND: u16 = 1;
const TCA_OPTIONS: u16 = 2;
const TCA_BPF_ID: u16 = 11;

/// One `RTM_NEWTFILTER` message's payload: the header, its kind and, for cls_bpf, its
/// program. Attributes it cannot read are skipped: they only make it someone else's filter.
fn parse_filter(payload: &[u8], ingress: bool) -> io::Result<Filter> {
    let header = TcHeader::parse(payload)
        .map_err(|e| io::Error::other(format!("malformed tc filter message: {e}")))?;
    let mut filter = Filter {
        ingress,
        priority: (header.info >> 16) as u16,
        handle: header.handle.into(),
        kind: String::new(),
        bpf_id: None,
    };
    let attributes = payload.get(TCMSG_LEN..).unwrap_or(&[]);
    for nla in NlasIterator::new(attributes).flatten() {
        match nla.kind() {
            TCA_KIND => filter.kind = parse_string(nla.value()).unwrap_or_default(),
            TCA_OPTIONS => {
                filter.bpf_id = NlasIterator::new(nla.value())
                    .flatten()
                    .find(|o| o.kind() == TCA_BPF_ID)
                    .and_then(|o| parse_u32(o.value()).ok());
            }
            _ => {}
        }
    }
    Ok(filter)
}

//! The probe's socket: ICMP echo requests of a given size with DF set, their replies, and
//! the ICMP errors the kernel queues for them (`IP_RECVERR`).

use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

use nix::sys::socket::{recvmsg, sendto, ControlMessageOwned, MsgFlags, SockaddrStorage};

use super::TooBigReport;

pub(super) enum Answer {
    Reply,
    TooBig(TooBigReport),
    /// Local refusal: larger than the egress device MTU.
    TooBigLocally(u32),
    Lost,
}

pub(super) struct Pinger {
    fd: OwnedFd,
    target: IpAddr,
    ident: u16,
    seq: u16,
}

fn check(ret: libc::c_int, what: &str) -> std::io::Result<()> {
    if ret < 0 {
        let e = std::io::Error::last_os_error();
        return Err(std::io::Error::new(e.kind(), format!("{what}: {e}")));
    }
    Ok(())
}

fn setsockopt_int(
    fd: &OwnedFd,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
    what: &str,
) -> std::io::Result<()> {
    // SAFETY: `fd` is an open socket, and we pass a pointer to a live c_int with its size.
    let ret = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    check(ret, what)
}

fn checksum(data: &[u8]) -> u16 {
    let mut sum: u32 = data
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

impl Pinger {
    pub(super) fn new(target: IpAddr) -> std::io::Result<Self> {
        let (domain, proto) = match target {
            IpAddr::V4(_) => (libc::AF_INET, libc::IPPROTO_ICMP),
            IpAddr::V6(_) => (libc::AF_INET6, libc::IPPROTO_ICMPV6),
        };
        // SAFETY: plain socket(2) call; the result is checked before use.
        let raw = unsafe { libc::socket(domain, libc::SOCK_RAW | libc::SOCK_CLOEXEC, proto) };
        check(raw, "opening a raw ICMP socket (needs CAP_NET_RAW)")?;
        // SAFETY: `raw` is a new descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        match target {
            IpAddr::V4(_) => {
                setsockopt_int(
                    &fd,
                    libc::IPPROTO_IP,
                    libc::IP_MTU_DISCOVER,
                    libc::IP_PMTUDISC_PROBE,
                    "IP_MTU_DISCOVER",
                )?;
                setsockopt_int(&fd, libc::IPPROTO_IP, libc::IP_RECVERR, 1, "IP_RECVERR")?;
            }
            IpAddr::V6(_) => {
                setsockopt_int(
                    &fd,
                    libc::IPPROTO_IPV6,
                    libc::IPV6_MTU_DISCOVER,
                    libc::IP_PMTUDISC_PROBE,
                    "IPV6_MTU_DISCOVER",
                )?;
                setsockopt_int(
                    &fd,
                    libc::IPPROTO_IPV6,
                    libc::IPV6_RECVERR,
                    1,
                    "IPV6_RECVERR",
                )?;
            }
        }
        // Raw ICMP sockets each receive every echo reply: probes running at once (one per
        // target) tell theirs apart by identifier, and by the reply's source.
        static NEXT: std::sync::atomic::AtomicU16 = std::sync::atomic::AtomicU16::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(Pinger {
            fd,
            target,
            ident: (std::process::id() as u16 ^ 0x4e44).wrapping_add(n.wrapping_mul(0x9e3)),
            seq: 0,
        })
    }

    pub(super) fn header_len(&self) -> u32 {
        match self.target {
            IpAddr::V4(_) => 20 + 8,
            IpAddr::V6(_) => 40 + 8,
        }
    }

    /// Sends one echo request making an IP packet of `size` bytes and waits for its fate.
    pub(super) fn probe(&mut self, size: u32, timeout: Duration) -> std::io::Result<Answer> {
        self.seq = self.seq.wrapping_add(1);
        let payload = size.saturating_sub(self.header_len()) as usize;
        let mut pkt = vec![0u8; 8 + payload];
        pkt[0] = if self.target.is_ipv4() { 8 } else { 128 };
        pkt[4..6].copy_from_slice(&self.ident.to_be_bytes());
        pkt[6..8].copy_from_slice(&self.seq.to_be_bytes());
        for (i, b) in pkt[8..].iter_mut().enumerate() {
            *b = i as u8;
        }
        if self.target.is_ipv4() {
            let c = checksum(&pkt);
            pkt[2..4].copy_from_slice(&c.to_be_bytes());
        } // the kernel fills the ICMPv6 checksum on raw ICMPv6 sockets
        let dest = SockaddrStorage::from(SocketAddr::new(self.target, 0));
        match sendto(self.fd.as_raw_fd(), &pkt, &dest, MsgFlags::empty()) {
            Ok(_) => {}
            Err(nix::errno::Errno::EMSGSIZE) => return Ok(Answer::TooBigLocally(self.local_mtu())),
            Err(nix::errno::Errno::EACCES) => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::PermissionDenied,
                    format!(
                        "the kernel refuses to send ICMP echo to {} (EACCES): it takes it for \
                         a broadcast address, which needs SO_BROADCAST and is not one host; \
                         probe a host's address",
                        self.target
                    ),
                ))
            }
            Err(e) => return Err(std::io::Error::from(e)),
        }
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(Answer::Lost);
            }
            let mut pfd = [nix::poll::PollFd::new(
                self.fd.as_fd(),
                nix::poll::PollFlags::POLLIN,
            )];
            let ms = u16::try_from(left.as_millis()).unwrap_or(u16::MAX);
            nix::poll::poll(&mut pfd, nix::poll::PollTimeout::from(ms))
                .map_err(std::io::Error::from)?;
            let revents = pfd[0].revents().unwrap_or(nix::poll::PollFlags::empty());
            if revents.contains(nix::poll::PollFlags::POLLERR) {
                if let Some(answer) = self.read_error()? {
                    return Ok(answer);
                }
            } else if revents.contains(nix::poll::PollFlags::POLLIN) && self.read_reply()? {
                return Ok(Answer::Reply);
            }
        }
    }

    pub(super) fn local_mtu(&self) -> u32 {
        let mut mtu: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        let (level, name) = match self.target {
            IpAddr::V4(_) => (libc::IPPROTO_IP, libc::IP_MTU),
            IpAddr::V6(_) => (libc::IPPROTO_IPV6, libc::IPV6_MTU),
        };
        // SAFETY: getsockopt writes at most `len` bytes into the live `mtu`.
        let ret = unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                level,
                name,
                (&mut mtu as *mut libc::c_int).cast(),
                &mut len,
            )
        };
        if ret < 0 {
            0
        } else {
            mtu.max(0) as u32
        }
    }

    /// Reads one packet; true if it is the reply to our current probe.
    fn read_reply(&self) -> std::io::Result<bool> {
        let mut buf = [0u8; 65536];
        let mut iov = [std::io::IoSliceMut::new(&mut buf)];
        let msg =
            recvmsg::<SockaddrStorage>(self.fd.as_raw_fd(), &mut iov, None, MsgFlags::MSG_DONTWAIT)
                .map_err(std::io::Error::from)?;
        let n = msg.bytes;
        let from = msg
            .address
            .and_then(|a| match (a.as_sockaddr_in(), a.as_sockaddr_in6()) {
                (Some(v4), _) => Some(IpAddr::V4(v4.ip())),
                (_, Some(v6)) => Some(IpAddr::V6(v6.ip())),
                _ => None,
            });
        if from.is_some_and(|f| f.to_canonical() != self.target.to_canonical()) {
            return Ok(false);
        }
        // Raw IPv4 sockets deliver the IP header; ICMPv6 ones do not.
        let icmp = match self.target {
            IpAddr::V4(_) => {
                let ihl = usize::from(buf.first().map_or(5, |b| b & 0x0f)) * 4;
                buf.get(ihl..n).unwrap_or(&[])
            }
            IpAddr::V6(_) => buf.get(..n).unwrap_or(&[]),
        };
        let reply_type = if self.target.is_ipv4() { 0 } else { 129 };
        Ok(icmp.len() >= 8
            && icmp[0] == reply_type
            && icmp[4..6] == self.ident.to_be_bytes()
            && icmp[6..8] == self.seq.to_be_bytes())
    }

    /// Reads the error queue: an ICMP too-big report for our packet, if that is what it holds.
    fn read_error(&self) -> std::io::Result<Option<Answer>> {
        let mut buf = [0u8; 2048];
        let mut iov = [std::io::IoSliceMut::new(&mut buf)];
        let mut cmsg = nix::cmsg_space!(libc::sock_extended_err, libc::sockaddr_in6);
        let msg = recvmsg::<SockaddrStorage>(
            self.fd.as_raw_fd(),
            &mut iov,
            Some(&mut cmsg),
            MsgFlags::MSG_ERRQUEUE | MsgFlags::MSG_DONTWAIT,
        )
        .map_err(std::io::Error::from)?;
        for c in msg.cmsgs().map_err(std::io::Error::from)? {
            let (err, from) = match c {
                ControlMessageOwned::Ipv4RecvErr(err, from) => (
                    err,
                    from.map(|a| {
                        IpAddr::V4(std::net::Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr)))
                    }),
                ),
                ControlMessageOwned::Ipv6RecvErr(err, from) => (
                    err,
                    from.map(|a| IpAddr::V6(std::net::Ipv6Addr::from(a.sin6_addr.s6_addr))),
                ),
                _ => continue,
            };
            let icmp_too_big =
                (err.ee_origin == libc::SO_EE_ORIGIN_ICMP && err.ee_type == 3 && err.ee_code == 4)
                    || (err.ee_origin == libc::SO_EE_ORIGIN_ICMP6 && err.ee_type == 2);
            let local =
                err.ee_origin == libc::SO_EE_ORIGIN_LOCAL && err.ee_errno == libc::EMSGSIZE as u32;
            if icmp_too_big {
                if let Some(from) = from {
                    return Ok(Some(Answer::TooBig(TooBigReport {
                        from,
                        mtu: err.ee_info,
                    })));
                }
            } else if local {
                return Ok(Some(Answer::TooBigLocally(err.ee_info)));
            }
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::{checksum, Pinger};

    /// An echo request to a subnet's broadcast address: the kernel's EACCES comes back
    /// saying why, not as a bare "Permission denied". In a network namespace of the test's
    /// own, with 10.93.0.1/24 on `lo`.
    #[test]
    fn a_broadcast_target_is_named_as_such() {
        if !crate::testing::root_or_skip("for a network namespace and a raw socket") {
            return;
        }
        let error = std::thread::spawn(|| {
            nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET).expect("unshare");
            for args in [
                &["link", "set", "lo", "up"][..],
                &["addr", "add", "10.93.0.1/24", "brd", "+", "dev", "lo"][..],
            ] {
                let status = std::process::Command::new("ip").args(args).status();
                assert!(status.is_ok_and(|s| s.success()), "ip {args:?}");
            }
            let mut pinger = Pinger::new("10.93.0.255".parse().expect("address")).expect("socket");
            match pinger.probe(600, std::time::Duration::from_millis(200)) {
                Err(e) => e,
                Ok(_) => panic!("the kernel sent an echo request to a broadcast address"),
            }
        })
        .join()
        .expect("the namespace's thread failed");
        assert_eq!(error.kind(), std::io::ErrorKind::PermissionDenied);
        let text = error.to_string();
        assert!(
            text.contains("broadcast address") && text.contains("10.93.0.255"),
            "{text}"
        );
    }

    #[test]
    fn icmp_checksum_matches_rfc1071_example() {
        // RFC 1071 section 3: the sum of 00 01 f2 03 f4 f5 f6 f7 is ddf2, checksum 220d.
        assert_eq!(
            checksum(&[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7]),
            0x220d
        );
        assert_eq!(checksum(&[0xff]), 0x00ff);
    }
}

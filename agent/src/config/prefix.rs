//! Address prefixes (`10.250.0.0/24`, `fd00::/64`): what firewall rules match and what a
//! tunnel's address ranges are.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

/// An address and a prefix length, host bits cleared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Prefix {
    addr: IpAddr,
    len: u8,
}

fn bits(addr: IpAddr) -> (u128, u8) {
    match addr {
        IpAddr::V4(a) => (u128::from(u32::from(a)), 32),
        IpAddr::V6(a) => (u128::from(a), 128),
    }
}

fn mask(width: u8, len: u8) -> u128 {
    if len == 0 {
        0
    } else {
        // The top `len` bits of a `width`-bit number.
        let ones = u128::MAX << (128 - u32::from(len));
        ones >> (128 - u32::from(width))
    }
}

impl Prefix {
    /// `addr/len`, with the host bits cleared; `len` is capped at the family's width.
    pub fn new(addr: IpAddr, len: u8) -> Self {
        let addr = addr.to_canonical();
        let (value, width) = bits(addr);
        let len = len.min(width);
        let net = value & mask(width, len);
        let addr = match addr {
            IpAddr::V4(_) => IpAddr::V4((net as u32).into()),
            IpAddr::V6(_) => IpAddr::V6(net.into()),
        };
        Prefix { addr, len }
    }

    /// A single address.
    pub fn host(addr: IpAddr) -> Self {
        Prefix::new(
            addr,
            if addr.to_canonical().is_ipv4() {
                32
            } else {
                128
            },
        )
    }

    /// The network address.
    pub fn addr(&self) -> IpAddr {
        self.addr
    }

    /// The prefix length.
    pub fn prefix_len(&self) -> u8 {
        self.len
    }

    /// A /0 prefix (everything of its family).
    pub fn is_default(&self) -> bool {
        self.len == 0
    }

    /// IPv4 rather than IPv6.
    pub fn is_ipv4(&self) -> bool {
        self.addr.is_ipv4()
    }

    /// Whether `addr` lies in this prefix.
    pub fn contains(&self, addr: IpAddr) -> bool {
        self.covers(&Prefix::host(addr))
    }

    /// Whether every address of `other` lies in this prefix.
    pub fn covers(&self, other: &Prefix) -> bool {
        let (mine, width) = bits(self.addr);
        let (theirs, other_width) = bits(other.addr);
        width == other_width && other.len >= self.len && theirs & mask(width, self.len) == mine
    }

    /// Whether the two prefixes share any address.
    pub fn overlaps(&self, other: &Prefix) -> bool {
        self.covers(other) || other.covers(self)
    }

    /// Private address space, where a gateway's traffic needs address translation to reach
    /// the Internet: RFC 1918, shared address space (100.64.0.0/10), IPv6 unique local.
    pub fn is_private(&self) -> bool {
        const PRIVATE: [&str; 5] = [
            "10.0.0.0/8",
            "172.16.0.0/12",
            "192.168.0.0/16",
            "100.64.0.0/10",
            "fc00::/7",
        ];
        PRIVATE
            .iter()
            .filter_map(|p| p.parse::<Prefix>().ok())
            .any(|p| p.covers(self))
    }
}

impl fmt::Display for Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

impl serde::Serialize for Prefix {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// Not an `address/length` (or a bare address).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not an address prefix: {0:?}")]
pub struct BadPrefix(pub String);

impl FromStr for Prefix {
    type Err = BadPrefix;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || BadPrefix(s.to_owned());
        match s.split_once('/') {
            Some((addr, len)) => {
                let addr: IpAddr = addr.parse().map_err(|_| bad())?;
                let len: u8 = len.parse().map_err(|_| bad())?;
                if len > bits(addr.to_canonical()).1 {
                    return Err(bad());
                }
                Ok(Prefix::new(addr, len))
            }
            None => s.parse().map(Prefix::host).map_err(|_| bad()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Prefix {
        s.parse().expect("prefix")
    }

    #[test]
    fn host_bits_are_cleared_and_containment_follows_the_length() {
        assert_eq!(p("10.250.0.7/24").to_string(), "10.250.0.0/24");
        assert!(p("10.0.0.0/8").covers(&p("10.250.0.0/24")));
        assert!(!p("10.250.0.0/24").covers(&p("10.0.0.0/8")));
        assert!(p("10.250.0.0/24").overlaps(&p("10.0.0.0/8")));
        assert!(!p("192.168.0.0/16").overlaps(&p("10.250.0.0/24")));
        assert!(p("0.0.0.0/0").covers(&p("10.250.0.2/32")));
        assert!(p("10.250.0.0/24").contains("10.250.0.2".parse().expect("ip")));
        assert!(
            !p("fd00::/64").covers(&p("10.250.0.0/24")),
            "families never mix"
        );
        assert_eq!(p("fd00::1/64").to_string(), "fd00::/64");
        assert_eq!(p("10.1.2.3").prefix_len(), 32);
    }

    #[test]
    fn private_ranges_are_recognised() {
        assert!(p("10.250.0.0/24").is_private());
        assert!(p("100.64.1.0/24").is_private());
        assert!(p("fd12::/64").is_private());
        assert!(!p("192.0.2.0/24").is_private());
        assert!(!p("0.0.0.0/0").is_private());
    }

    #[test]
    fn malformed_prefixes_are_refused() {
        assert!("10.0.0.0/33".parse::<Prefix>().is_err());
        assert!("10.0.0/8".parse::<Prefix>().is_err());
        assert!("fd00::/129".parse::<Prefix>().is_err());
    }
}

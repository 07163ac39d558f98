//! Exact parsing of the values that name a site: a `Host` header or a request target's
//! authority (`host [":" port]`, RFC 9110 §7.2) and an `Origin` (`scheme "://" host [":"
//! port]`, RFC 6454). The whole value must parse: nothing is accepted by prefix, a port is
//! digits, and only one trailing dot of a name (the root of an FQDN) is dropped.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// A host: an address, or a name in lower case without its trailing dot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Host {
    /// An address literal (IPv6 given in brackets).
    Ip(IpAddr),
    /// A DNS name.
    Name(String),
}

/// Longest DNS name.
const MAX_NAME: usize = 253;
/// Longest label of a DNS name.
const MAX_LABEL: usize = 63;

/// Leading and trailing optional whitespace (RFC 9110's OWS: spaces and tabs).
fn trim_ows(value: &str) -> &str {
    value.trim_matches([' ', '\t'])
}

/// A `Host` value or URI authority: `host [":" port]`.
pub fn parse_host(value: &str) -> Result<Host, String> {
    authority(trim_ows(value)).map(|(host, _)| host)
}

/// An `Origin` value: `scheme "://" host [":" port]` with scheme `http` or `https`, and
/// nothing after (no path, not even `/`).
pub fn parse_origin(value: &str) -> Result<Host, String> {
    let value = trim_ows(value);
    let (scheme, rest) = value
        .split_once("://")
        .ok_or_else(|| "not scheme://host[:port]".to_owned())?;
    if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
        return Err(format!("scheme {scheme:?} is neither http nor https"));
    }
    authority(rest).map(|(host, _)| host)
}

/// A host without a port, as `--allowed-host` takes it: a name, an IPv4 address, or an
/// IPv6 address with or without brackets.
pub fn parse_name(value: &str) -> Result<Host, String> {
    if let Ok(v6) = value.parse::<Ipv6Addr>() {
        return Ok(Host::Ip(IpAddr::V6(v6)));
    }
    match authority(value)? {
        (host, None) => Ok(host),
        (_, Some(_)) => Err("a host name takes no port".to_owned()),
    }
}

/// `host [":" port]`, exactly.
fn authority(value: &str) -> Result<(Host, Option<u16>), String> {
    let (host, port) = if let Some(inner) = value.strip_prefix('[') {
        let (address, rest) = inner
            .split_once(']')
            .ok_or_else(|| "an IPv6 address without its closing bracket".to_owned())?;
        let v6 = address
            .parse::<Ipv6Addr>()
            .map_err(|_| format!("[{address}] is not an IPv6 address"))?;
        (Host::Ip(IpAddr::V6(v6)), rest)
    } else {
        let (host, rest) = value.find(':').map_or((value, ""), |i| value.split_at(i));
        (name_or_ipv4(host)?, rest)
    };
    let port = match port {
        "" => None,
        p => Some(
            p.strip_prefix(':')
                .filter(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|d| d.parse::<u16>().ok())
                .ok_or_else(|| format!("{p:?} is not a port (\":\" and a number up to 65535)"))?,
        ),
    };
    Ok((host, port))
}

/// An IPv4 address or a DNS name (letters, digits, `-` and `_` in labels of 1 to 63).
fn name_or_ipv4(host: &str) -> Result<Host, String> {
    if host.is_empty() {
        return Err("no host".to_owned());
    }
    // One trailing dot is the root of a fully qualified name: `localhost.` is `localhost`.
    let bare = host.strip_suffix('.').unwrap_or(host);
    if let Ok(v4) = bare.parse::<Ipv4Addr>() {
        return Ok(Host::Ip(IpAddr::V4(v4)));
    }
    let labels_ok = bare.split('.').all(|label| {
        !label.is_empty()
            && label.len() <= MAX_LABEL
            && label
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    });
    if bare.len() > MAX_NAME || !labels_ok {
        return Err(format!("{host:?} is not a host name"));
    }
    Ok(Host::Name(bare.to_ascii_lowercase()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(n: &str) -> Host {
        Host::Name(n.to_owned())
    }

    #[test]
    fn hosts_parse_whole_or_not_at_all() {
        let lo: Host = Host::Ip("127.0.0.1".parse().expect("ip"));
        for (value, want) in [
            ("localhost", name("localhost")),
            ("LocalHost:9469", name("localhost")),
            ("localhost.", name("localhost")),
            ("localhost.:80", name("localhost")),
            (" localhost\t", name("localhost")),
            ("127.0.0.1", lo.clone()),
            ("127.0.0.1:9469", lo.clone()),
            ("127.0.0.1.", lo),
            ("[::1]:9469", Host::Ip("::1".parse().expect("ip"))),
            ("node_1.example:65535", name("node_1.example")),
        ] {
            assert_eq!(parse_host(value), Ok(want), "{value:?}");
        }
        for bad in [
            "",
            "localhost:abc",
            "localhost:",
            "localhost:+80",
            "localhost:65536",
            "localhost:80:80",
            "localhost..",
            "localhost..:9469",
            ".localhost",
            "local..host",
            "localhost/x",
            "localhost?",
            "user@localhost",
            "local host",
            "[::1",
            "[::1]x",
            "[::1]:",
            "[127.0.0.1]",
            "::1",
            "l\u{f6}calhost",
            "%6cocalhost",
        ] {
            assert!(parse_host(bad).is_err(), "{bad:?} must not parse");
        }
    }

    #[test]
    fn origins_are_a_scheme_and_an_authority_only() {
        let lo: Host = Host::Ip("127.0.0.1".parse().expect("ip"));
        for ok in [
            "http://127.0.0.1:9469",
            "HTTP://127.0.0.1",
            "https://127.0.0.1:443",
        ] {
            assert_eq!(parse_origin(ok), Ok(lo.clone()), "{ok:?}");
        }
        for bad in [
            "http://127.0.0.1:9469.evil.example",
            "http://127.0.0.1:9469/",
            "http://127.0.0.1:9469/x",
            "http://127.0.0.1:9469?",
            "http://127.0.0.1:9469#",
            "http://user@127.0.0.1:9469",
            "http://127.0.0.1:9469 evil",
            "ftp://127.0.0.1",
            "null",
            "127.0.0.1:9469",
            "http:// 127.0.0.1",
        ] {
            assert!(parse_origin(bad).is_err(), "{bad:?} must not parse");
        }
    }

    #[test]
    fn allowed_names_take_no_port() {
        assert_eq!(parse_name("Node1.Example."), Ok(name("node1.example")));
        assert_eq!(
            parse_name("2001:db8::1"),
            parse_name("[2001:db8::1]"),
            "bare and bracketed IPv6"
        );
        for bad in ["node1.example:9469", "[::1]:80", "a..b", "http://x"] {
            assert!(parse_name(bad).is_err(), "{bad:?}");
        }
    }
}

//! WireGuard devices and peers ([`Device`], [`Peer`]), read by [`query`]: kernel WireGuard
//! over generic netlink ([`netlink`]), userspace implementations from their UAPI
//! socket (`/var/run/wireguard/NAME.sock`, the cross-platform configuration protocol that
//! wireguard-go, boringtun and others serve): `get=1`, answered with `key=value` lines,
//! asked only of root and read within a deadline and bounds ([`uapi`]).

mod device;
mod netlink;
pub mod tailscale;
mod uapi;

pub(crate) use device::hex_to_base64;
pub use device::{Device, Peer};
#[cfg(test)]
use uapi::parse;
pub use uapi::{has_wireguard_uapi, query_uapi};

/// The device's state: from its UAPI socket if it has one (a userspace implementation),
/// else from the kernel over generic netlink ([`netlink`]).
pub async fn query(name: &str) -> std::io::Result<Option<Device>> {
    if let Some(d) = query_uapi(name).await? {
        return Ok(Some(d));
    }
    netlink::query(name).await.map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_get_answer() {
        let text = "private_key=e84b5a6d2717c1003a13b431570353dbaca9146cf150c5f8575680feba52027a\n\
                    listen_port=51820\n\
                    public_key=b85996fecc9c7f1fc6d2572a76eda11d59bcd20be8e543b15ce4bd85a8e75a33\n\
                    endpoint=[abcd:23::33%2]:51820\n\
                    last_handshake_time_sec=1700000000\n\
                    last_handshake_time_nsec=0\n\
                    tx_bytes=38333\n\
                    rx_bytes=2224\n\
                    persistent_keepalive_interval=25\n\
                    allowed_ip=10.250.0.2/32\n\
                    allowed_ip=fd00::/64\n\
                    public_key=58402e695ba1772b1cc9309755f043251ea77fdcf10fbe63989ceb7e19321376\n\
                    endpoint=182.122.22.19:3233\n\
                    errno=0";
        let lines: Vec<String> = text.lines().map(str::to_owned).collect();
        let dev = parse(&lines).expect("parses");
        assert_eq!(dev.listen_port, 51820);
        assert_eq!(dev.peers.len(), 2);
        let p = &dev.peers[0];
        assert_eq!(p.public_key, "uFmW/sycfx/G0lcqdu2hHVm80gvo5UOxXOS9hajnWjM=");
        assert_eq!(
            p.endpoint,
            Some(
                "[abcd:23::33%2]:51820"
                    .parse()
                    .expect("scoped IPv6 endpoint")
            )
        );
        assert_eq!(p.allowed_ips, vec!["10.250.0.2/32", "fd00::/64"]);
        assert_eq!(
            (
                p.last_handshake_unix,
                p.tx_bytes,
                p.rx_bytes,
                p.persistent_keepalive
            ),
            (1_700_000_000, 38333, 2224, 25)
        );
        assert_eq!(
            dev.peers[1].endpoint,
            Some("182.122.22.19:3233".parse().expect("addr"))
        );
    }

    #[test]
    fn reports_uapi_errors() {
        assert!(parse(&["errno=13".to_owned()]).is_err());
    }
}

//! The tunnel's peers as facts ([`PeerFacts`]): WireGuard peers from the device's state at
//! the start and end of the window and the handshake messages the data plane saw on the
//! underlay, or the configured endpoints of other tunnels.

use std::net::{IpAddr, SocketAddr};

use super::{endpoint_name, to_i64, Observation};
use crate::facts::handshake::{handshake_since, now_unix};
use crate::facts::tunnel::family_name;
use crate::facts::PeerFacts;
use crate::kernel::packet::flows::Flow;
use crate::kernel::views::Direction;

impl Observation<'_> {
    /// The peers, given the window's endpoints and the tunnel's flows on the underlay.
    pub(super) fn peers(&self, endpoints: &[SocketAddr], outer: &[&Flow]) -> Vec<PeerFacts> {
        let wg_count = |ip: IpAddr,
                        dir: Direction,
                        pick: fn(&crate::kernel::packet::flows::WireguardMessages) -> u32|
         -> i64 {
            outer
                .iter()
                .filter(|f| {
                    f.direction == dir
                        && (if dir == Direction::Egress {
                            f.dst
                        } else {
                            f.src
                        }) == ip
                })
                .map(|f| i64::from(pick(&f.wireguard)))
                .sum()
        };
        let window_start = self.window_start_unix();
        if let (Some(before), Some(after)) = (&self.start.wireguard, &self.end.wireguard) {
            return after
                .peers
                .iter()
                .map(|p| {
                    let prev = before.peers.iter().find(|b| b.public_key == p.public_key);
                    let ip = p.endpoint.map(|e| e.ip());
                    PeerFacts {
                        name: p.public_key.clone(),
                        endpoint: p.endpoint.map(|e| e.to_string()).unwrap_or_default(),
                        family: ip.map(|i| family_name(i).to_owned()).unwrap_or_default(),
                        allowed_ips: p.allowed_ips.clone(),
                        handshake_age_s: if p.last_handshake_unix == 0 {
                            -1
                        } else {
                            (now_unix() - p.last_handshake_unix as i64).max(0)
                        },
                        keepalive_s: i64::from(p.persistent_keepalive),
                        tx_bytes_delta: to_i64(
                            p.tx_bytes.saturating_sub(prev.map_or(0, |b| b.tx_bytes)),
                        ),
                        rx_bytes_delta: to_i64(
                            p.rx_bytes.saturating_sub(prev.map_or(0, |b| b.rx_bytes)),
                        ),
                        initiations_sent: ip
                            .map_or(0, |ip| wg_count(ip, Direction::Egress, |w| w.initiation)),
                        responses_received: ip
                            .map_or(0, |ip| wg_count(ip, Direction::Ingress, |w| w.response)),
                        handshake_in_window: ip.is_some_and(|ip| {
                            wg_count(ip, Direction::Ingress, |w| w.response) > 0
                                || wg_count(ip, Direction::Egress, |w| w.response) > 0
                        }) || handshake_since(p, window_start),
                        path_mtu: -1,
                        blackhole: false,
                    }
                })
                .collect();
        }
        endpoints
            .iter()
            .map(|ep| PeerFacts {
                name: endpoint_name(ep),
                endpoint: endpoint_name(ep),
                family: family_name(ep.ip()).into(),
                handshake_age_s: -1,
                path_mtu: -1,
                ..PeerFacts::default()
            })
            .collect()
    }
}

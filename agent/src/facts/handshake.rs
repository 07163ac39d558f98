//! WireGuard handshakes in flight when an observation ends.
//!
//! An observation can end between a handshake initiation and its response: the data
//! plane has counted the initiation (or the peer's byte counter the data waiting for the
//! session), but not yet the response, and the peer's last handshake is still "never" or
//! old. Judged then, a tunnel that is just coming up looks dead. So a peer that looks so
//! is given [`GRACE`] more to complete its handshake, read from the peer's own state,
//! before the facts go to the rules: a handshake that completes is never reported stale.

use std::time::{Duration, Instant};

use crate::config::tunnel::{self, ConfiguredTunnel};
use crate::config::wireguard::Peer;
use crate::facts::PeerFacts;

/// How long a handshake in flight may take to complete: one round trip plus the peers'
/// processing, on any path netdoctor is likely to diagnose.
pub const GRACE: Duration = Duration::from_secs(1);

/// WireGuard's Reject-After-Time: a session older than this carries no data, so a peer
/// with data to send needs a new handshake.
const REJECT_AFTER_S: i64 = 180;

/// How often the peer's state is read while waiting.
const POLL: Duration = Duration::from_millis(100);

/// Whether `peer`'s last handshake happened at or after `since_unix` (Unix seconds).
pub fn handshake_since(peer: &Peer, since_unix: i64) -> bool {
    peer.last_handshake_unix != 0 && peer.last_handshake_unix as i64 >= since_unix
}

/// A peer whose handshake looks underway: initiations without a response, or data to
/// send without a usable session, and no handshake seen in the window.
fn in_flight(p: &PeerFacts) -> bool {
    !p.handshake_in_window
        && (p.initiations_sent > p.responses_received
            || (p.handshake_age_s < 0 || p.handshake_age_s > REJECT_AFTER_S)
                && p.tx_bytes_delta > 0)
}

/// Waits until `deadline` (at most [`GRACE`]) for the handshakes in flight among `peers`
/// of `tun` (a window that began at `window_start_unix`) and marks those that complete.
pub async fn settle(
    tun: &ConfiguredTunnel,
    peers: &mut [PeerFacts],
    window_start_unix: i64,
    deadline: Instant,
) {
    if tun.wireguard.is_none() {
        return;
    }
    let deadline = deadline.min(Instant::now() + GRACE);
    while peers.iter().any(in_flight) && Instant::now() < deadline {
        tokio::time::sleep(POLL).await;
        let until = tokio::time::Instant::from_std(deadline);
        let Ok(Ok(Some((dev, _)))) = tokio::time::timeout_at(until, tunnel::read_peers(tun)).await
        else {
            return;
        };
        let now = now_unix();
        for p in peers.iter_mut().filter(|p| in_flight(p)) {
            if let Some(done) = dev
                .peers
                .iter()
                .find(|d| d.public_key == p.name && handshake_since(d, window_start_unix))
            {
                p.handshake_in_window = true;
                p.handshake_age_s = (now - done.last_handshake_unix as i64).max(0);
            }
        }
    }
}

/// Seconds since the UNIX epoch.
pub fn now_unix() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

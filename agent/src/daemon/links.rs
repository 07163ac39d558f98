//! Link events: rtnetlink's link multicast group, as `ip monitor link` sees it. Any event
//! wakes the agent, which then re-reads the interface list (events only say "something
//! changed"; the list says what is true now).

use std::sync::Arc;

use futures::StreamExt;
use rtnetlink::MulticastGroup;
use tokio::sync::Notify;

/// Subscribes to link events and notifies `changed` on each one. Returns the task reading
/// them; it ends if the netlink socket fails (the agent's periodic resync still runs).
pub fn watch(changed: Arc<Notify>) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    let (conn, _handle, mut messages) =
        rtnetlink::new_multicast_connection(&[MulticastGroup::Link])
            .map_err(|e| anyhow::anyhow!("subscribing to netlink link events: {e}"))?;
    Ok(tokio::spawn(async move {
        let conn = tokio::spawn(conn);
        while messages.next().await.is_some() {
            changed.notify_one();
        }
        conn.abort();
        tracing::warn!("netlink link events ended; interfaces are re-read every interval only");
    }))
}

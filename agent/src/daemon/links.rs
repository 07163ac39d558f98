//! Link, address and route events: rtnetlink's multicast groups, as `ip monitor` sees
//! them. A link event wakes the agent, which then re-reads the interface list (events only
//! say "something changed"; the list says what is true now); every event also wakes the
//! configuration timeline, which reads links, addresses and routes again and compares.

use std::sync::Arc;

use futures::StreamExt;
use rtnetlink::packet_core::NetlinkPayload;
use rtnetlink::packet_route::RouteNetlinkMessage;
use rtnetlink::MulticastGroup;
use tokio::sync::Notify;

/// Who is woken by the events.
#[derive(Debug, Clone)]
pub struct Wake {
    /// Link events: the interfaces to re-read.
    pub links: Arc<Notify>,
    /// Link, address and route events: the timeline to compare.
    pub config: Arc<Notify>,
}

/// Subscribes to link, address and route events and wakes `wake` on each one. Returns the
/// task reading them; it ends if the netlink socket fails (the agent's periodic resync
/// still runs).
pub fn watch(wake: Wake) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    let (conn, _handle, mut messages) = rtnetlink::new_multicast_connection(&[
        MulticastGroup::Link,
        MulticastGroup::Ipv4Ifaddr,
        MulticastGroup::Ipv6Ifaddr,
        MulticastGroup::Ipv4Route,
        MulticastGroup::Ipv6Route,
    ])
    .map_err(|e| anyhow::anyhow!("subscribing to netlink link, address and route events: {e}"))?;
    Ok(tokio::spawn(async move {
        let conn = tokio::spawn(conn);
        while let Some((message, _)) = messages.next().await {
            let link = matches!(
                message.payload,
                NetlinkPayload::InnerMessage(
                    RouteNetlinkMessage::NewLink(_) | RouteNetlinkMessage::DelLink(_)
                )
            );
            if link {
                wake.links.notify_one();
            }
            wake.config.notify_one();
        }
        conn.abort();
        tracing::warn!("netlink link events ended; interfaces are re-read every interval only");
    }))
}

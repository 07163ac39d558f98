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

#[cfg(test)]
mod tests {
    use crate::testing::ip;
    use std::time::Duration;

    use super::*;

    /// Lets a burst of events arrive, then forgets that they woke anyone.
    async fn drain(wake: &Wake) {
        tokio::time::sleep(Duration::from_millis(200)).await;
        for n in [&wake.config, &wake.links] {
            let _ = tokio::time::timeout(Duration::from_millis(1), n.notified()).await;
        }
    }

    /// Waits for `n` to be notified, at most a second.
    async fn woken(n: &Notify) -> bool {
        tokio::time::timeout(Duration::from_secs(1), n.notified())
            .await
            .is_ok()
    }

    #[test]
    fn address_and_route_events_wake_the_timeline_and_link_events_both() {
        if !crate::testing::root_or_skip("for a network namespace") {
            return;
        }
        crate::testing::in_new_netns(|| async {
            ip("link add nl0 type veth peer name nl1");
            ip("link set nl0 up");
            let wake = Wake {
                links: Arc::new(Notify::new()),
                config: Arc::new(Notify::new()),
            };
            let task = watch(wake.clone()).expect("subscribe");
            drain(&wake).await;
            ip("addr add 10.66.0.1/24 dev nl0");
            assert!(woken(&wake.config).await, "an address added woke nothing");
            assert!(!woken(&wake.links).await, "an address is not a link event");
            drain(&wake).await;
            ip("route add 10.67.0.0/16 via 10.66.0.2 dev nl0");
            assert!(woken(&wake.config).await, "a route added woke nothing");
            drain(&wake).await;
            ip("link set nl0 mtu 1400");
            assert!(
                woken(&wake.links).await,
                "a link change did not wake the links"
            );
            assert!(
                woken(&wake.config).await,
                "a link change did not wake the timeline"
            );
            task.abort();
        });
    }
}

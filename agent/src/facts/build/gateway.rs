//! A gateway's source NAT facts for an observation: the tunnel's ranges, the uplinks its
//! clients' flows were routed out of (the default route's interface without such flows,
//! see [`crate::config::uplink`]), and what left them untranslated.

use super::Observation;
use crate::config::host::Host;
use crate::config::iface::Interface;
use crate::config::uplink;
use crate::facts::nat;
use crate::facts::underlay::is_tunnel_kind;

impl Observation<'_> {
    /// `nat.*` of a tunnel interface (empty for any other); `host` says whether this host
    /// forwards at all (otherwise no flow is looked up).
    pub(super) async fn nat(&self, host: &Host) -> nat::NatFacts {
        if !is_tunnel_kind(&self.me.kind) {
            return nat::NatFacts::default();
        }
        let flows = &self.window.flows;
        let allowed = self
            .end
            .wireguard
            .iter()
            .flat_map(|d| d.peers.iter())
            .flat_map(|p| p.allowed_ips.iter());
        let sources = nat::tunnel_sources(&self.details.addresses, allowed);
        let routed = if host.ip_forward || host.ip6_forward {
            uplink::forwarded(self.me, &sources, flows, self.all).await
        } else {
            Vec::new()
        };
        let uplinks: Vec<&Interface> = if routed.is_empty() {
            uplink::default_route(self.routes, self.all, self.me)
                .into_iter()
                .collect()
        } else {
            routed.iter().map(|u| &u.iface).collect()
        };
        nat::facts(&sources, &uplinks, self.firewall, flows)
    }
}

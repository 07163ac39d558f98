//! The configuration timeline: what changed on the host, when, from what to what. The
//! monitor reads a [`Snapshot`] of the configuration netdoctor reads (links, addresses,
//! routes, sysctls, NAT and clamping rules, WireGuard and Tailscale peers, bonds) on every
//! window and on every rtnetlink notification, and turns the difference from the last one
//! into [`Event`]s, in human units, that the store keeps and the API serves.

mod diff;
mod read;
mod snapshot;
#[cfg(test)]
mod tests;

use serde::{Deserialize, Serialize};

pub use diff::diff;
pub use read::{peers_of, read_fast, read_window, WindowParts};
pub use snapshot::Snapshot;

/// What an event is about. The name (`as_str`) is the `kind` of the API and the label of
/// `netdoctor_config_changes_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// A link added or removed (its value: the link's kind).
    Link,
    /// A link's MTU.
    Mtu,
    /// A link's administrative state (`up`, `down`).
    State,
    /// The bond or bridge a link belongs to.
    Master,
    /// An address on a link.
    Address,
    /// A route (its nexthops; several for a multipath route).
    Route,
    /// A sysctl netdoctor reads.
    Sysctl,
    /// A NAT or MSS clamping rule netdoctor reads.
    Firewall,
    /// A WireGuard peer added or removed.
    WireguardPeer,
    /// A WireGuard peer's endpoint.
    WireguardEndpoint,
    /// A WireGuard peer's allowed IPs.
    WireguardAllowedIps,
    /// A Tailscale peer's path: direct or relayed.
    TailscalePath,
    /// A bond's transmit hash policy.
    BondHashPolicy,
}

impl Kind {
    /// Every kind.
    pub const ALL: [Kind; 13] = [
        Kind::Link,
        Kind::Mtu,
        Kind::State,
        Kind::Master,
        Kind::Address,
        Kind::Route,
        Kind::Sysctl,
        Kind::Firewall,
        Kind::WireguardPeer,
        Kind::WireguardEndpoint,
        Kind::WireguardAllowedIps,
        Kind::TailscalePath,
        Kind::BondHashPolicy,
    ];

    /// The kind's name in the API and the metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Link => "link",
            Kind::Mtu => "link.mtu",
            Kind::State => "link.state",
            Kind::Master => "link.master",
            Kind::Address => "address",
            Kind::Route => "route",
            Kind::Sysctl => "sysctl",
            Kind::Firewall => "firewall",
            Kind::WireguardPeer => "wireguard.peer",
            Kind::WireguardEndpoint => "wireguard.endpoint",
            Kind::WireguardAllowedIps => "wireguard.allowed_ips",
            Kind::TailscalePath => "tailscale.path",
            Kind::BondHashPolicy => "bond.hash_policy",
        }
    }
}

/// How a value changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Change {
    /// It was not there before.
    Added,
    /// It is not there any more.
    Removed,
    /// It holds another value.
    Changed,
}

impl Change {
    /// `added`, `removed` or `changed`.
    pub fn as_str(self) -> &'static str {
        match self {
            Change::Added => "added",
            Change::Removed => "removed",
            Change::Changed => "changed",
        }
    }

    /// The change named `name`.
    pub fn parse(name: &str) -> Option<Change> {
        [Change::Added, Change::Removed, Change::Changed]
            .into_iter()
            .find(|c| c.as_str() == name)
    }
}

/// One change of the configuration (`Event` in docs/api.md).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    /// When the agent saw it (ms since the epoch).
    pub ts_ms: i64,
    /// What it is about: `link.mtu`, `route`, `sysctl`, ... ([`Kind::as_str`]).
    pub kind: String,
    /// The interface it is on; "" for a host-wide setting.
    pub interface: String,
    /// What changed within the kind: the route's destination, the sysctl's name, the
    /// peer's key, the address, the rule; "" when the kind says it all (an MTU).
    pub subject: String,
    /// `added`, `removed` or `changed`.
    pub change: Change,
    /// The value before; `null` when added.
    pub old: Option<String>,
    /// The value after; `null` when removed.
    pub new: Option<String>,
    /// The change in a sentence: "wg0's MTU changed 1420 → 1500".
    pub text: String,
}

impl Event {
    /// Whether the event can explain a finding on `iface`, whose underlays are
    /// `underlays`: a change on one of them, or a host-wide one (a sysctl or firewall rule
    /// without interface).
    pub fn concerns(&self, iface: &str, underlays: &[String]) -> bool {
        self.interface.is_empty() || self.interface == iface || underlays.contains(&self.interface)
    }
}

/// What a finding that began at `opened_ms` cites as its cause: the latest of `events`
/// (oldest first) at or before it and at most `within_ms` before it, as "began 40 s after
/// wg0's MTU changed 1420 → 1500"; `None` when there is none.
pub fn cause(events: &[Event], opened_ms: i64, within_ms: i64) -> Option<String> {
    let e = events
        .iter()
        .filter(|e| e.ts_ms <= opened_ms && opened_ms - e.ts_ms <= within_ms)
        .max_by_key(|e| e.ts_ms)?;
    let secs = (opened_ms - e.ts_ms) as f64 / 1000.0;
    let after = if secs < 1.0 {
        "less than a second".to_owned()
    } else if secs < 120.0 {
        format!("{secs:.0} s")
    } else {
        format!("{:.0} min", secs / 60.0)
    };
    Some(format!("began {after} after {}", e.text))
}

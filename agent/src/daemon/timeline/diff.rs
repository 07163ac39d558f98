//! Two snapshots → the events between them, each with its sentence.

use std::collections::{BTreeMap, BTreeSet};

use super::snapshot::{Key, Section, Snapshot};
use super::{Change, Event, Kind};

/// The changes from `old` to `new`, seen at `ts_ms`, in key order. Only sections both
/// read (with the same guard) are compared. A link added or removed is one event: its
/// MTU, state, addresses and settings are not listed again (its routes are).
pub fn diff(old: &Snapshot, new: &Snapshot, ts_ms: i64) -> Vec<Event> {
    let compared: Vec<(&String, &Section, &Section)> = new
        .sections
        .iter()
        .filter_map(|(name, n)| {
            let o = old.sections.get(name)?;
            (o.guard == n.guard).then_some((name, o, n))
        })
        .collect();
    let mut came_or_went = BTreeSet::new();
    for (_, o, n) in &compared {
        for k in symmetric(&o.values, &n.values) {
            if k.kind == Kind::Link {
                came_or_went.insert(k.interface.clone());
            }
        }
    }
    let mut events = Vec::new();
    for (name, o, n) in compared {
        let keys: BTreeSet<&Key> = o.values.keys().chain(n.values.keys()).collect();
        for k in keys {
            let quiet = k.kind != Kind::Link
                && name.as_str() != "routes"
                && came_or_went.contains(&k.interface);
            if quiet {
                continue;
            }
            let (before, after) = (o.values.get(k), n.values.get(k));
            let change = match (before, after) {
                (None, Some(_)) => Change::Added,
                (Some(_), None) => Change::Removed,
                (Some(a), Some(b)) if a != b => Change::Changed,
                _ => continue,
            };
            events.push(event(k, change, before.cloned(), after.cloned(), ts_ms));
        }
    }
    events
}

/// Keys in one map and not the other.
fn symmetric<'a>(
    a: &'a BTreeMap<Key, String>,
    b: &'a BTreeMap<Key, String>,
) -> impl Iterator<Item = &'a Key> {
    let only_a = a.keys().filter(|k| !b.contains_key(*k));
    let only_b = b.keys().filter(|k| !a.contains_key(*k));
    only_a.chain(only_b)
}

fn event(k: &Key, change: Change, old: Option<String>, new: Option<String>, ts_ms: i64) -> Event {
    let text = text(k, change, old.as_deref(), new.as_deref());
    Event {
        ts_ms,
        kind: k.kind.as_str().to_owned(),
        interface: k.interface.clone(),
        subject: k.subject.clone(),
        change,
        old,
        new,
        text,
    }
}

/// A WireGuard key as people compare them: its first 8 characters and an ellipsis.
fn short(key: &str) -> String {
    match key.char_indices().nth(8) {
        Some((i, _)) => format!("{}…", &key[..i]),
        None => key.to_owned(),
    }
}

/// What changed, as the start of a sentence.
fn noun(k: &Key) -> String {
    let (i, s) = (&k.interface, &k.subject);
    match k.kind {
        Kind::Link => i.clone(),
        Kind::Mtu => format!("{i}'s MTU"),
        Kind::State => format!("{i}'s state"),
        Kind::Master => format!("{i}'s master"),
        Kind::Address => format!("address {s} on {i}"),
        Kind::Route => format!("route {s}"),
        Kind::Sysctl => s.clone(),
        Kind::Firewall => format!("firewall rule {s}"),
        Kind::WireguardPeer => format!("{i}'s WireGuard peer {}", short(s)),
        Kind::WireguardEndpoint => format!("{i}'s peer {} endpoint", short(s)),
        Kind::WireguardAllowedIps => format!("{i}'s peer {} allowed IPs", short(s)),
        Kind::TailscalePath => format!("{i}'s path to peer {s}"),
        Kind::BondHashPolicy => format!("{i}'s hash policy"),
    }
}

/// The sentence: "wg0's MTU changed 1420 → 1500", "route 10.9.0.0/24 added: dev wg0".
fn text(k: &Key, change: Change, old: Option<&str>, new: Option<&str>) -> String {
    let noun = noun(k);
    // Kinds whose subject is the value: nothing to add.
    let said = matches!(k.kind, Kind::Address | Kind::Firewall | Kind::WireguardPeer);
    match (change, old, new) {
        (Change::Changed, Some(a), Some(b)) if k.kind == Kind::Link => {
            format!("{noun}'s kind changed {a} → {b}")
        }
        (Change::Changed, Some(a), Some(b)) => format!("{noun} changed {a} → {b}"),
        (Change::Added, _, Some(b)) if k.kind == Kind::Link => format!("{noun} ({b}) added"),
        (Change::Removed, Some(a), _) if k.kind == Kind::Link => format!("{noun} ({a}) removed"),
        (Change::Added, _, Some(b)) if !said => format!("{noun} added: {b}"),
        (Change::Removed, Some(a), _) if !said => format!("{noun} removed (was {a})"),
        (change, _, _) => format!("{noun} {}", change.as_str()),
    }
}

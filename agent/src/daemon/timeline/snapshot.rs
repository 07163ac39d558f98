//! A snapshot of the configuration: values by (kind, interface, subject), in sections. A
//! section is read whole or not at all, so one that could not be read this time is not
//! compared (it would look as if everything in it were removed); its `guard` (what could
//! not be read of it, e.g. legacy iptables missing) must match for two readings to be
//! compared.

use std::collections::BTreeMap;

use super::Kind;

/// Identifies one value.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Key {
    /// What it is.
    pub kind: Kind,
    /// The interface it is on ("" for host-wide values).
    pub interface: String,
    /// What it is within the kind ("" when the kind says it all).
    pub subject: String,
}

impl Key {
    /// A key.
    pub fn new(kind: Kind, interface: &str, subject: &str) -> Key {
        Key {
            kind,
            interface: interface.to_owned(),
            subject: subject.to_owned(),
        }
    }
}

/// One section: values read together.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Section {
    /// What could not be read of it ("" when all was); two readings are compared only
    /// when theirs are equal.
    pub guard: String,
    /// The values.
    pub values: BTreeMap<Key, String>,
}

/// The configuration at one moment, by section (`links`, `routes`, `sysctls`,
/// `firewall`, `peers wg0`, ...).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// The sections read.
    pub sections: BTreeMap<String, Section>,
}

impl Snapshot {
    /// Sets a section, replacing what it held.
    pub fn set(&mut self, name: &str, section: Section) {
        self.sections.insert(name.to_owned(), section);
    }

    /// Takes the sections `newer` read, keeping this one's others (those read only each
    /// window, when `newer` comes from a notification). Sections about interfaces that no
    /// longer exist are dropped.
    pub fn update(&mut self, newer: Snapshot) {
        self.sections.extend(newer.sections);
        let Some(links) = self.sections.get("links") else {
            return;
        };
        let exists: std::collections::HashSet<String> = links
            .values
            .keys()
            .filter(|k| k.kind == Kind::Link)
            .map(|k| k.interface.clone())
            .collect();
        self.sections.retain(|name, _| {
            name.strip_prefix("peers ")
                .is_none_or(|iface| exists.contains(iface))
        });
    }
}

impl Section {
    /// Adds a value.
    pub fn put(&mut self, kind: Kind, interface: &str, subject: &str, value: impl Into<String>) {
        self.values
            .insert(Key::new(kind, interface, subject), value.into());
    }
}

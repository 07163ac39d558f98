//! Which interfaces the agent watches: glob patterns, or by default every interface whose
//! kind can carry the traffic netdoctor diagnoses (bridges too: their ports' MTUs must
//! agree, and their ports are watched with them, see [`crate::facts::bridge`]).

use globset::{Glob, GlobSet, GlobSetBuilder};

use crate::config::iface::{IfaceKind, Interface};

/// Interface selection.
#[derive(Debug, Clone)]
pub struct Selector {
    include: Option<GlobSet>,
    exclude: GlobSet,
}

fn globs(patterns: &[String]) -> anyhow::Result<GlobSet> {
    let mut b = GlobSetBuilder::new();
    for p in patterns {
        b.add(Glob::new(p).map_err(|e| anyhow::anyhow!("interface pattern {p:?}: {e}"))?);
    }
    Ok(b.build()?)
}

impl Selector {
    /// From include patterns (empty: by kind) and exclude patterns.
    pub fn new(include: &[String], exclude: &[String]) -> anyhow::Result<Self> {
        Ok(Selector {
            include: (!include.is_empty()).then(|| globs(include)).transpose()?,
            exclude: globs(exclude)?,
        })
    }

    /// Whether `iface` is watched. Loopback never is.
    pub fn wants(&self, iface: &Interface) -> bool {
        if iface.kind == IfaceKind::Loopback || self.exclude.is_match(&iface.name) {
            return false;
        }
        match &self.include {
            Some(set) => set.is_match(&iface.name),
            None => matches!(
                iface.kind,
                IfaceKind::Physical
                    | IfaceKind::Wireguard
                    | IfaceKind::Tun
                    | IfaceKind::Tap
                    | IfaceKind::Vxlan
                    | IfaceKind::Geneve
                    | IfaceKind::Veth
                    | IfaceKind::Bond
                    | IfaceKind::Bridge
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::iface::LinkType;

    fn iface(name: &str, kind: IfaceKind) -> Interface {
        Interface {
            name: name.into(),
            index: 1,
            mtu: 1500,
            kind,
            link: LinkType::Ether,
            up: true,
        }
    }

    #[test]
    fn default_selection_is_by_kind() {
        let s = Selector::new(&[], &[]).expect("selector");
        assert!(s.wants(&iface("wg0", IfaceKind::Wireguard)));
        assert!(s.wants(&iface("eth0", IfaceKind::Physical)));
        assert!(!s.wants(&iface("lo", IfaceKind::Loopback)));
        assert!(s.wants(&iface("br0", IfaceKind::Bridge)));
        assert!(!s.wants(&iface("dummy0", IfaceKind::Other("dummy".into()))));
    }

    #[test]
    fn patterns_include_and_exclude() {
        let s = Selector::new(&["wg*".into(), "br0".into()], &["wg9".into()]).expect("selector");
        assert!(s.wants(&iface("wg0", IfaceKind::Wireguard)));
        assert!(s.wants(&iface("br0", IfaceKind::Bridge)));
        assert!(!s.wants(&iface("wg9", IfaceKind::Wireguard)));
        assert!(!s.wants(&iface("eth0", IfaceKind::Physical)));
        assert!(Selector::new(&["wg[".into()], &[]).is_err());
    }
}

//! veth pairs between two namespaces, or between a namespace and the host.
//!
//! ```no_run
//! use netdoctor_lab::{Netns, veth::{create_veth, VethEnd}};
//! # fn main() -> anyhow::Result<()> {
//! let (a, b) = (Netns::new()?, Netns::new()?);
//! create_veth(
//!     VethEnd::ns(&a, "eth0").addr("10.201.0.1/24").mtu(1400),
//!     VethEnd::ns(&b, "eth0").addr("10.201.0.2/24").mtu(1400),
//! )?;
//! # Ok(())
//! # }
//! ```

use anyhow::{bail, Context, Result};

use crate::cmd;
use crate::ids;
use crate::netns::Netns;

/// Prefix of generated host-side veth names (`ndv` + pid + counter).
pub(crate) const HOST_IFNAME_PREFIX: &str = "ndv";

/// Description of one end of a veth pair: where it lives, its name,
/// addresses and MTU. Ends are brought up.
#[derive(Debug, Clone)]
pub struct VethEnd<'a> {
    ns: Option<&'a Netns>,
    ifname: String,
    addrs: Vec<String>,
    mtu: Option<u32>,
}

impl<'a> VethEnd<'a> {
    /// An end named `ifname` inside `ns` (any name: names are per namespace).
    pub fn ns(ns: &'a Netns, ifname: &str) -> Self {
        VethEnd {
            ns: Some(ns),
            ifname: ifname.to_owned(),
            addrs: Vec::new(),
            mtu: None,
        }
    }

    /// An end in the host namespace with a generated unique name
    /// (`ndv...`, see [`Veth::host_ifname`]). Deleted when the [`Veth`] is
    /// dropped. Give host ends no 10.x address unless you must.
    pub fn host() -> Self {
        VethEnd {
            ns: None,
            ifname: ids::ifname(HOST_IFNAME_PREFIX),
            addrs: Vec::new(),
            mtu: None,
        }
    }

    /// Adds an address in CIDR notation (IPv4 or IPv6; may repeat).
    pub fn addr(mut self, cidr: &str) -> Self {
        self.addrs.push(cidr.to_owned());
        self
    }

    /// Sets the link MTU (default: kernel default 1500).
    pub fn mtu(mut self, mtu: u32) -> Self {
        self.mtu = Some(mtu);
        self
    }

    fn ip(&self, args: &[&str]) -> Result<()> {
        match self.ns {
            Some(ns) => ns.ip(args).map(drop),
            None => {
                let mut argv = vec!["ip"];
                argv.extend_from_slice(args);
                cmd::host_run(&argv).map(drop)
            }
        }
    }

    fn configure(&self) -> Result<()> {
        if let Some(mtu) = self.mtu {
            self.ip(&["link", "set", &self.ifname, "mtu", &mtu.to_string()])?;
        }
        for cidr in &self.addrs {
            let mut args = vec!["addr", "add", cidr.as_str(), "dev", self.ifname.as_str()];
            if cidr.contains(':') {
                args.push("nodad");
            }
            self.ip(&args)?;
        }
        self.ip(&["link", "set", &self.ifname, "up"])
    }

    fn location(&self) -> String {
        match self.ns {
            Some(ns) => format!("{}/{}", ns.name(), self.ifname),
            None => format!("host/{}", self.ifname),
        }
    }
}

/// A created veth pair. Both ends disappear when a namespace holding one of
/// them is dropped; a host end is additionally deleted when this is dropped.
#[derive(Debug)]
pub struct Veth {
    a_ifname: String,
    b_ifname: String,
    host_ifname: Option<String>,
}

impl Veth {
    /// Interface name of end `a`.
    pub fn a_ifname(&self) -> &str {
        &self.a_ifname
    }

    /// Interface name of end `b`.
    pub fn b_ifname(&self) -> &str {
        &self.b_ifname
    }

    /// Name of the end living in the host namespace, if any.
    pub fn host_ifname(&self) -> Option<&str> {
        self.host_ifname.as_deref()
    }
}

impl Drop for Veth {
    fn drop(&mut self) {
        if let Some(name) = &self.host_ifname {
            // Already gone when the peer's namespace was deleted first.
            let exists = std::path::Path::new("/sys/class/net").join(name).exists();
            if exists {
                if let Err(e) = cmd::host_run(&["ip", "link", "del", name]) {
                    eprintln!("netdoctor-lab: deleting veth {name}: {e:#}");
                }
            }
        }
    }
}

/// Creates a veth pair with each end placed directly in its namespace
/// (no temporary host name), then sets MTU, addresses and brings both up.
pub fn create_veth(a: VethEnd<'_>, b: VethEnd<'_>) -> Result<Veth> {
    if a.ns.is_none() && b.ns.is_none() {
        bail!("create_veth: at least one end must be in a namespace");
    }
    for end in [&a, &b] {
        if end.ifname.is_empty() || end.ifname.len() > 15 {
            bail!("invalid interface name {:?} (1-15 bytes)", end.ifname);
        }
    }
    let mut argv: Vec<&str> = vec!["ip", "link", "add", &a.ifname];
    if let Some(ns) = a.ns {
        argv.extend(["netns", ns.name()]);
    }
    argv.extend(["type", "veth", "peer", "name", &b.ifname]);
    if let Some(ns) = b.ns {
        argv.extend(["netns", ns.name()]);
    }
    let what = format!("veth {} <-> {}", a.location(), b.location());
    cmd::host_run(&argv).with_context(|| format!("creating {what}"))?;
    let veth = Veth {
        a_ifname: a.ifname.clone(),
        b_ifname: b.ifname.clone(),
        host_ifname: [&a, &b]
            .into_iter()
            .find(|e| e.ns.is_none())
            .map(|e| e.ifname.clone()),
    };
    a.configure()
        .with_context(|| format!("configuring {}", a.location()))?;
    b.configure()
        .with_context(|| format!("configuring {}", b.location()))?;
    Ok(veth)
}

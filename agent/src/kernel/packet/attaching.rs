//! Attaching the packet programs to interfaces: tc ingress and egress (tcx links where the
//! kernel has them, a netlink clsact filter elsewhere), or XDP ingress when asked for and
//! free, and detaching them again.

use std::os::fd::AsFd;

use super::dataplane::{Attached, Dataplane, PROGRAM_NAMES};
use super::local_tcp::LocalTcp;
use super::options::{Hooks, IngressHook, Target};
use crate::kernel::attach::{self, AttachMethod, Attachment, XdpMode};
use crate::kernel::error::{Error, Result};

/// What attaching XDP gave: its attachment and hook name, or the note saying why received
/// packets are counted with tc instead.
#[derive(Default)]
struct XdpAttempt {
    attachment: Option<(Attachment, String)>,
    note: Option<String>,
}

impl Dataplane<'_> {
    /// Attaches ingress and egress programs to `iface` and starts counting.
    pub fn attach(&mut self, iface: &Target) -> Result<Hooks> {
        if self.attached.contains_key(&iface.index) {
            self.detach(iface.index);
        }
        self.watch(iface.index, iface.mtu, iface.link)?;
        let tc_in_fd = self.skel.progs.nd_tc_ingress.as_fd();
        let tc_out_fd = self.skel.progs.nd_tc_egress.as_fd();
        let method = self.options.method;

        // Any loaded program's descriptor does for the sweep: it only queries and detaches.
        let swept = attach::sweep_leftovers(tc_in_fd, iface.index, &PROGRAM_NAMES);
        if swept.programs > 0 {
            tracing::warn!(iface = %iface.name, "removed {} program(s) a previous netdoctor left attached{}", swept.programs, swept.qdisc_note());
        }

        let mut attachments = Vec::with_capacity(2);
        let xdp = if self.options.ingress == IngressHook::Xdp {
            self.attach_xdp(iface)?
        } else {
            XdpAttempt::default()
        };
        // What tc really used: links fall back to netlink where the kernel has no tcx.
        let mut used = method;
        let ingress = match xdp.attachment {
            Some((a, hook)) => {
                attachments.push(a);
                hook
            }
            None => {
                let (a, m) = tc_attach(tc_in_fd, iface, true, method)?;
                attachments.push(a);
                used = m;
                "tc".into()
            }
        };
        let (a, m) = tc_attach(tc_out_fd, iface, false, method)?;
        attachments.push(a);
        if m == AttachMethod::Netlink {
            used = m;
        }

        let hooks = Hooks {
            ingress,
            egress: "tc".into(),
            method: used,
            local_tcp: if self.options.local_path() {
                LocalTcp::Sockets
            } else {
                LocalTcp::Packets
            },
            note: xdp.note,
        };
        self.attached.insert(
            iface.index,
            Attached {
                hooks: hooks.clone(),
                _attachments: attachments,
            },
        );
        tracing::info!(iface = %iface.name, ingress = %hooks.ingress, egress = %hooks.egress, "attached");
        Ok(hooks)
    }

    /// Attaches the XDP program (loaded whenever ingress is XDP, see `load`) to `iface`.
    fn attach_xdp(&self, iface: &Target) -> Result<XdpAttempt> {
        let xdp_fd = self.skel.progs.nd_xdp_ingress.as_fd();
        let mode = self.options.xdp_mode;
        let attached = match self.options.method {
            AttachMethod::Link => attach::xdp_link(xdp_fd, iface.index, mode),
            AttachMethod::Netlink => attach::xdp_netlink(xdp_fd, iface.index, mode),
        };
        match attached {
            Ok(a) => Ok(XdpAttempt {
                attachment: Some((a, format!("xdp-{}", xdp_mode_name(mode)))),
                note: None,
            }),
            // One XDP program per interface, never replaced: another data plane's (the
            // agent's, another command's) or anyone's keeps it, and this one counts
            // received packets with tc, saying so.
            Err(e) if attach::xdp_taken(&e) => {
                let holder = attach::xdp_holder(xdp_fd, iface.index, &PROGRAM_NAMES);
                let text = format!(
                    "{}: XDP is taken by {holder}: received packets are counted with tc instead",
                    iface.name
                );
                tracing::warn!("{text}");
                Ok(XdpAttempt {
                    attachment: None,
                    note: Some(text),
                })
            }
            Err(e) => Err(Error::attach("xdp", &iface.name, e)),
        }
    }

    /// Detaches from interface `index` and forgets its counters.
    pub fn detach(&mut self, index: u32) {
        self.attached.remove(&index);
        self.unwatch(index);
    }

    /// Hooks in use on interface `index`, if attached.
    pub fn hooks(&self, index: u32) -> Option<&Hooks> {
        self.attached.get(&index).map(|a| &a.hooks)
    }
}

/// Attaches a tc program by `method`, or by netlink where the kernel has no tcx links;
/// returns the attachment and the method used.
fn tc_attach(
    prog: std::os::fd::BorrowedFd<'_>,
    iface: &Target,
    ingress: bool,
    method: AttachMethod,
) -> Result<(Attachment, AttachMethod)> {
    let hook = if ingress { "tc ingress" } else { "tc egress" };
    let netlink =
        |prog| attach::tc_netlink(prog, iface.index, ingress).map(|a| (a, AttachMethod::Netlink));
    let result = match method {
        AttachMethod::Link => attach::tcx_link(prog, iface.index, ingress)
            .map(|a| (a, AttachMethod::Link))
            .or_else(|e| {
                if matches!(e.raw_os_error(), Some(libc::EINVAL) | Some(libc::EOPNOTSUPP)) {
                    tracing::info!(iface = %iface.name, "tcx links unavailable ({e}; Linux < 6.6?): using a netlink clsact filter, which a killed netdoctor leaves behind until its next start");
                    netlink(prog)
                } else {
                    Err(e)
                }
            }),
        AttachMethod::Netlink => netlink(prog),
    };
    result.map_err(|e| Error::attach(hook, &iface.name, e))
}

fn xdp_mode_name(mode: XdpMode) -> &'static str {
    match mode {
        XdpMode::Auto => "auto",
        XdpMode::Native => "native",
        XdpMode::Generic => "generic",
    }
}

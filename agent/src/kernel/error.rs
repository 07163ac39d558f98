//! The kernel layer's error type: what went wrong loading, attaching or reading BPF
//! programs, phrased for the person running netdoctor.

use std::io;

/// Errors from loading, attaching and reading the data plane.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The kernel refused for lack of privileges.
    #[error(
        "{what}: permission denied. netdoctor needs root, or the capabilities CAP_BPF, \
         CAP_NET_ADMIN and CAP_PERFMON together \
         (e.g. `setcap cap_bpf,cap_net_admin,cap_perfmon+ep $(command -v netdoctor)`)"
    )]
    Permission {
        /// The operation that was refused.
        what: String,
    },
    /// The running kernel has no BTF, which CO-RE programs need.
    #[error(
        "this kernel exposes no BTF at /sys/kernel/btf/vmlinux; netdoctor needs a kernel \
         built with CONFIG_DEBUG_INFO_BTF=y (most distributions since Linux 5.8)"
    )]
    NoBtf,
    /// libbpf failed to open or load the BPF object.
    #[error("loading the BPF programs: {0} (run with -v to see libbpf's and the verifier's log)")]
    Load(#[source] libbpf_rs::Error),
    /// Attaching a program to an interface failed.
    #[error("attaching {hook} to {iface}: {source}")]
    Attach {
        /// Which hook (xdp, tc ingress, tc egress).
        hook: &'static str,
        /// The interface name.
        iface: String,
        /// The underlying OS error.
        #[source]
        source: io::Error,
    },
    /// A BPF map operation failed.
    #[error("BPF map {map}: {source}")]
    Map {
        /// The map's name.
        map: &'static str,
        /// The underlying libbpf error.
        #[source]
        source: libbpf_rs::Error,
    },
    /// More port-identified tunnels than the data plane's table holds.
    #[error("at most {0} tunnel ports can be recognised at once")]
    TooManyTunnelPorts(usize),
    /// More interfaces than the data plane's fixed-size table holds.
    #[error("at most {0} interfaces can be watched at once")]
    TooManyInterfaces(usize),
    /// Interface index 0, which no interface has (the flow cache relies on that).
    #[error("interface index 0 names no interface")]
    NoInterfaceIndex,
}

/// Result alias for the kernel layer.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Maps a libbpf error from loading to the most helpful variant.
    pub(crate) fn from_load(err: libbpf_rs::Error) -> Self {
        if !std::path::Path::new("/sys/kernel/btf/vmlinux").exists() {
            return Error::NoBtf;
        }
        // Root gets EACCES too when the verifier rejects a program; only blame privileges
        // when we lack them.
        let privileged = nix::unistd::geteuid().is_root();
        match err.kind() {
            libbpf_rs::ErrorKind::PermissionDenied if !privileged => Error::Permission {
                what: "loading BPF programs".into(),
            },
            _ => Error::Load(err),
        }
    }

    /// Maps an OS error from attaching to the most helpful variant.
    pub(crate) fn attach(hook: &'static str, iface: &str, source: io::Error) -> Self {
        if matches!(
            source.raw_os_error(),
            Some(libc::EPERM) | Some(libc::EACCES)
        ) && !nix::unistd::geteuid().is_root()
        {
            return Error::Permission {
                what: format!("attaching {hook} to {iface}"),
            };
        }
        Error::Attach {
            hook,
            iface: iface.to_owned(),
            source,
        }
    }
}

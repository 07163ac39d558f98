//! What can go wrong reading an interface's configuration, or the kernel's counters the
//! facts are built from.

/// Errors from netlink, interface lookups and the observation's readings.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The named interface does not exist in this network namespace.
    #[error("no interface named {0:?} in this network namespace (list them with `ip link`)")]
    UnknownInterface(String),
    /// A netlink request failed.
    #[error("netlink: {0}")]
    Netlink(String),
    /// Reading what the BPF programs counted failed.
    #[error(transparent)]
    Kernel(#[from] crate::kernel::Error),
}

/// Result alias for the configuration readers (and the facts built from them).
pub type Result<T, E = Error> = std::result::Result<T, E>;

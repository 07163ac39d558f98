//! What can stop a diagnosis: the interface is unknown, the rules are invalid, or the
//! configuration or the observation could not be read. Missing BPF programs never do
//! (they become notes).

/// Why a diagnosis could not be made.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The interface, its configuration or the observation could not be read.
    #[error(transparent)]
    Facts(#[from] crate::config::Error),
    /// The rules (built-in or `--rules DIR`) are invalid.
    #[error(transparent)]
    Rules(#[from] crate::rules::InvalidRules),
    /// No interface to diagnose: none named, and the host has no tunnel and no default
    /// route.
    #[error(
        "nothing to diagnose: no tunnel or overlay interface is up and there is no default \
         route; name the interface (netdoctor diagnose IFACE)"
    )]
    NothingToDiagnose,
    /// A probe's worker thread failed.
    #[error("the path-MTU probe's task failed: {0}")]
    Probe(#[from] tokio::task::JoinError),
}

impl Error {
    /// The interface asked for, when it does not exist.
    pub fn unknown_interface(&self) -> Option<&str> {
        match self {
            Error::Facts(crate::config::Error::UnknownInterface(name)) => Some(name),
            _ => None,
        }
    }
}

impl From<crate::kernel::Error> for Error {
    fn from(e: crate::kernel::Error) -> Self {
        Error::Facts(e.into())
    }
}

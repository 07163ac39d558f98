//! File descriptors: how many the HTTP side may hold, so that connections never take the
//! ones the monitor needs.
//!
//! Every connection is a descriptor, and so is every BPF program, map and link the monitor
//! and a diagnosis hold (about 50 at rest, three more per watched interface, about 45 more
//! while a diagnosis runs), the database and its journal, netlink and probe sockets. When
//! idle connections used them all, every evaluation failed (`BPF map iter/tcp: Too many
//! open files`). So at start the soft `RLIMIT_NOFILE` is raised to the hard limit, and of
//! that limit half, at least [`MIN_RESERVE`], is reserved for everything but connections;
//! connections get the rest, at most [`MAX_CONNECTIONS`] (each may buffer a request head,
//! and the systemd unit caps the agent's memory).

use nix::sys::resource::{getrlimit, setrlimit, Resource};

/// Descriptors always left to the monitor, the store and a diagnosis, however low the
/// limit.
pub const MIN_RESERVE: u64 = 128;
/// Most connections held at once, however high the limit.
pub const MAX_CONNECTIONS: usize = 2048;
/// Fewest connections worth serving: below this the limit is refused at start.
pub const MIN_CONNECTIONS: usize = 16;

/// How the descriptor limit is shared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// `RLIMIT_NOFILE` (soft, after raising it).
    pub limit: u64,
    /// Kept for everything but connections.
    pub reserve: u64,
    /// Most connections held at once.
    pub connections: usize,
}

/// Shares `limit` descriptors: half (at least [`MIN_RESERVE`]) reserved, the rest (at most
/// [`MAX_CONNECTIONS`]) for connections.
pub fn budget(limit: u64) -> anyhow::Result<Budget> {
    let reserve = (limit / 2).max(MIN_RESERVE);
    let spare = usize::try_from(limit.saturating_sub(reserve)).unwrap_or(usize::MAX);
    let connections = spare.min(MAX_CONNECTIONS);
    anyhow::ensure!(
        connections >= MIN_CONNECTIONS,
        "the open-file limit (RLIMIT_NOFILE) is {limit}: the agent needs at least {}, {} for \
         its programs, maps and database and {} for HTTP connections. Raise it \
         (LimitNOFILE= in the systemd unit, `ulimit -n` in a shell)",
        MIN_RESERVE + MIN_CONNECTIONS as u64,
        MIN_RESERVE,
        MIN_CONNECTIONS
    );
    Ok(Budget {
        limit,
        reserve,
        connections,
    })
}

/// Raises the soft `RLIMIT_NOFILE` to the hard limit and shares the result.
pub fn raise_and_share() -> anyhow::Result<Budget> {
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE)
        .map_err(|e| anyhow::anyhow!("reading the open-file limit (RLIMIT_NOFILE): {e}"))?;
    let limit = if soft < hard {
        match setrlimit(Resource::RLIMIT_NOFILE, hard, hard) {
            Ok(()) => hard,
            Err(e) => {
                tracing::warn!("raising the open-file limit from {soft} to {hard}: {e}");
                soft
            }
        }
    } else {
        soft
    };
    budget(limit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_the_descriptors_stay_with_the_monitor() {
        let b = budget(256).expect("256");
        assert_eq!((b.reserve, b.connections), (128, 128));
        let b = budget(1024).expect("1024");
        assert_eq!((b.reserve, b.connections), (512, 512));
        // The systemd unit's limit, and systemd's default hard limit: capped.
        let b = budget(8192).expect("8192");
        assert_eq!((b.reserve, b.connections), (4096, MAX_CONNECTIONS));
        let b = budget(524_288).expect("524288");
        assert_eq!(b.connections, MAX_CONNECTIONS);
        // The reserve holds however low the limit is.
        let b = budget(150).expect("150");
        assert_eq!((b.reserve, b.connections), (128, 22));
        for low in [0, 64, 143] {
            let e = budget(low).expect_err("too low a limit must be refused");
            assert!(e.to_string().contains("LimitNOFILE"), "{e}");
        }
    }

    #[test]
    fn the_soft_limit_is_raised_to_the_hard_one() {
        // Whatever the limits the tests run under, the soft one ends at the hard one.
        let (_, hard) = getrlimit(Resource::RLIMIT_NOFILE).expect("getrlimit");
        if let Ok(b) = raise_and_share() {
            assert_eq!(b.limit, hard);
        }
        let (soft, after) = getrlimit(Resource::RLIMIT_NOFILE).expect("getrlimit");
        assert_eq!((soft, after), (hard, hard));
    }
}

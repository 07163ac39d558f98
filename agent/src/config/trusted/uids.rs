//! Whose a process is: its real, effective and saved uids (`/proc/PID/status`), all of
//! which must be root's for netdoctor to take its word ([`Uids::root`]); and who listens on
//! a socket netdoctor connected to ([`check_listener`]).

use std::fmt;

use serde::Serialize;

use super::{trusted_uid, Untrusted};

/// A process's user ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Uids {
    /// Who started it.
    pub real: u32,
    /// Whose permissions it has now.
    pub effective: u32,
    /// What it may switch back to.
    pub saved: u32,
}

impl Uids {
    /// The uids of process `pid`.
    pub fn of(pid: u32) -> std::io::Result<Uids> {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
        Uids::parse(&status).ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("/proc/{pid}/status has no Uid: line"),
            )
        })
    }

    /// The `Uid:` line of a `/proc/PID/status` (real, effective, saved, file system).
    pub fn parse(status: &str) -> Option<Uids> {
        let mut ids = status
            .lines()
            .find_map(|l| l.strip_prefix("Uid:"))?
            .split_whitespace()
            .map(str::parse::<u32>);
        Some(Uids {
            real: ids.next()?.ok()?,
            effective: ids.next()?.ok()?,
            saved: ids.next()?.ok()?,
        })
    }

    /// The same uid for all three (a process that never changed user).
    #[cfg(test)]
    pub(crate) fn all(uid: u32) -> Uids {
        Uids {
            real: uid,
            effective: uid,
            saved: uid,
        }
    }

    /// Whether root started the process and it runs as root: every uid 0. A setuid-root
    /// program another user started (real uid theirs) is not root's.
    pub fn root(&self) -> bool {
        [self.real, self.effective, self.saved] == [0; 3]
    }

    /// Whether every uid is root or this process's user ([`super::trusted_uid`]).
    pub fn trusted(&self) -> bool {
        [self.real, self.effective, self.saved]
            .into_iter()
            .all(trusted_uid)
    }
}

impl fmt::Display for Uids {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.real == self.effective && self.real == self.saved {
            write!(f, "uid {}", self.real)
        } else {
            write!(
                f,
                "real uid {}, effective uid {}, saved uid {}",
                self.real, self.effective, self.saved
            )
        }
    }
}

/// Checks who listens on a connected socket, from its `SO_PEERCRED` credentials: `uid`
/// (the listener's effective uid when it listened) must be root or this process's user,
/// and so must every uid of process `pid` when it is visible here (0 or missing when
/// the listener is in a pid namespace this process does not see).
pub fn check_listener(uid: u32, pid: Option<i32>) -> Result<(), Untrusted> {
    if !trusted_uid(uid) {
        return Err(Untrusted::Listener(uid));
    }
    let Some(pid) = pid.filter(|p| *p > 0) else {
        return Ok(());
    };
    match Uids::of(pid.unsigned_abs()) {
        Ok(uids) if !uids.trusted() => Err(Untrusted::ListenerProcess(pid, uids)),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_uid_line() {
        let status = "Name:\tfastd\nUmask:\t0022\nState:\tS (sleeping)\n\
                      Uid:\t65534\t0\t0\t0\nGid:\t65534\t65534\t65534\t65534\n";
        let uids = Uids::parse(status).expect("Uid: line");
        assert_eq!(
            uids,
            Uids {
                real: 65534,
                effective: 0,
                saved: 0
            }
        );
        assert!(!uids.root());
        assert_eq!(
            uids.to_string(),
            "real uid 65534, effective uid 0, saved uid 0"
        );
        assert_eq!(Uids::all(65534).to_string(), "uid 65534");
        assert!(Uids::all(0).root() && Uids::all(0).trusted());
        assert_eq!(Uids::parse("Name:\tx\n"), None);
        assert_eq!(Uids::parse("Uid:\t0\t0\n"), None);
    }

    /// A child that keeps effective and saved uid 0 but has real uid 65534, as a setuid
    /// root program another user started: not root's, by its /proc status.
    #[test]
    fn a_process_with_another_real_uid_is_not_roots() {
        let me = Uids::of(std::process::id()).expect("own status");
        assert_eq!(me.effective, nix::unistd::geteuid().as_raw());
        assert!(me.trusted());
        if !crate::testing::root_or_skip("to start a process with mixed uids") {
            return;
        }
        assert!(me.root());
        let (tx, rx) = std::sync::mpsc::channel();
        // A thread of its own switches uids (Linux keeps uids per thread at the system
        // call level; /proc/PID/task/TID/status shows that thread's).
        let worker = std::thread::spawn(move || {
            // SAFETY: plain system calls on this thread; their results are checked.
            let set = unsafe { libc::syscall(libc::SYS_setresuid, 65534, 0, 0) };
            assert_eq!(set, 0, "setresuid: {}", std::io::Error::last_os_error());
            // SAFETY: gettid has no arguments and cannot fail.
            let tid = unsafe { libc::syscall(libc::SYS_gettid) };
            tx.send(tid).expect("send");
            std::thread::park();
        });
        let tid = rx.recv().expect("tid");
        let status = std::fs::read_to_string(format!("/proc/self/task/{tid}/status"))
            .expect("thread status");
        let uids = Uids::parse(&status).expect("Uid: line");
        worker.thread().unpark();
        worker.join().expect("worker");
        assert_eq!(
            uids,
            Uids {
                real: 65534,
                effective: 0,
                saved: 0
            }
        );
        assert!(!uids.root() && !uids.trusted(), "{uids}");
        assert!(Uids::of(std::process::id()).expect("own status").root());
        assert!(matches!(
            check_listener(65534, None),
            Err(Untrusted::Listener(65534))
        ));
        assert!(check_listener(0, Some(0)).is_ok());
    }
}

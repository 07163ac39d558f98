//! The path-MTU probes of one diagnosis, run while the observation is open so that
//! `diagnose` ends on time: each interface's tunnel endpoints from the start, then what the
//! window shows as it goes (endpoints seen on the underlay, connections retransmitting
//! full-size segments). Each probe runs on its own thread (they are blocking ICMP
//! exchanges, told apart by identifier and source) and stops at a deadline shortly after
//! the window, finished or not. Interfaces that want the same probe (two tunnels to one
//! endpoint) share it: the [`Pool`] runs each target and size once. Probes use ICMP echo,
//! which none of the facts counts.

use std::net::IpAddr;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::Progress;
use crate::facts::probe::{self, ProbeOptions, ProbeResult, MAX_PROBE_TARGETS};

/// One probe: its target and largest size.
type Key = (IpAddr, u32);

/// Every probe of a diagnosis, each target and size once.
pub(super) struct Pool {
    deadline: Instant,
    /// The window was ended early: probes still running at this instant are not waited for.
    cut: Option<Instant>,
    running: Vec<(Key, JoinHandle<std::io::Result<ProbeResult>>)>,
}

/// How each probe of a [`Pool`] ended: its result, or why there is none.
pub(super) type Outcomes = Vec<(Key, Result<ProbeResult, String>)>;

impl Pool {
    /// No probe yet; every probe started stops at `deadline`.
    pub(super) fn new(deadline: Instant) -> Self {
        Pool {
            deadline,
            cut: None,
            running: Vec::new(),
        }
    }

    /// The window ended early: [`Pool::finish`] waits for the probes until `at` only, and no
    /// probe starts any more.
    pub(super) fn cut_short(&mut self, at: Instant) {
        self.cut = Some(at);
    }

    /// Starts the probe `key` unless it runs already.
    fn start(&mut self, key: Key, progress: &dyn Progress) {
        if self.cut.is_some() || self.running.iter().any(|(k, _)| *k == key) {
            return;
        }
        let (target, max_size) = key;
        progress.step(&format!(
            "probing the path MTU toward {target} (up to {max_size} bytes)"
        ));
        let options = ProbeOptions {
            max_size,
            deadline: Some(self.deadline),
            ..ProbeOptions::default()
        };
        let handle = std::thread::spawn(move || probe::probe(target, &options));
        self.running.push((key, handle));
    }

    /// Waits for every probe (each ends by the deadline), or, when the window was cut short,
    /// until then: a probe still running is left to end by itself, unused.
    pub(super) fn finish(self) -> Outcomes {
        let cut = self.cut;
        self.running
            .into_iter()
            .map(|(key, handle)| {
                if cut.is_some_and(|at| !ended_by(&handle, at)) {
                    let why = "was still running when the observation was ended early: not used";
                    return (key, Err(why.to_owned()));
                }
                let outcome = match handle.join() {
                    Ok(Ok(r)) => Ok(r),
                    Ok(Err(e)) => Err(format!("failed: {e}")),
                    Err(_) => Err("panicked".to_owned()),
                };
                (key, outcome)
            })
            .collect()
    }
}

/// Whether the thread of `handle` ends by `at` (waits until it does, or until then).
fn ended_by<T>(handle: &JoinHandle<T>, at: Instant) -> bool {
    while !handle.is_finished() {
        if Instant::now() >= at {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    true
}

/// The probes one interface asked for, each with its label.
pub(super) struct Probes {
    wanted: Vec<(String, Key)>,
}

impl Probes {
    /// No probe yet.
    pub(super) fn new() -> Self {
        Probes { wanted: Vec::new() }
    }

    /// Starts (in `pool`) a probe for each of `targets` (label, address, largest size) not
    /// probed yet for this interface, up to [`MAX_PROBE_TARGETS`] in all.
    pub(super) fn start(
        &mut self,
        pool: &mut Pool,
        targets: Vec<(String, IpAddr, u32)>,
        progress: &dyn Progress,
    ) {
        for (label, target, max_size) in targets {
            if self.wanted.len() >= MAX_PROBE_TARGETS || self.started(target) {
                continue;
            }
            pool.start((target, max_size), progress);
            self.wanted.push((label, (target, max_size)));
        }
    }

    /// Whether a probe toward `target` was started.
    pub(super) fn started(&self, target: IpAddr) -> bool {
        self.wanted.iter().any(|(_, (t, _))| *t == target)
    }

    /// The results of this interface's probes among `outcomes`; what failed or ran out of
    /// time becomes a note.
    pub(super) fn finish(
        self,
        outcomes: &Outcomes,
        notes: &mut Vec<String>,
    ) -> Vec<(String, ProbeResult)> {
        let mut results = Vec::new();
        for (label, key) in self.wanted {
            let target = key.0;
            match outcomes.iter().find(|(k, _)| *k == key).map(|(_, o)| o) {
                Some(Ok(r)) => {
                    if r.incomplete {
                        notes.push(format!(
                            "path-MTU probe toward {target} did not finish within the observation; \
                             its figures were not used"
                        ));
                    }
                    results.push((label, r.clone()));
                }
                Some(Err(why)) => notes.push(format!("path-MTU probe toward {target} {why}")),
                None => notes.push(format!("path-MTU probe toward {target} was lost")),
            }
        }
        results
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;

    /// A probe still running when a cut-short window's time is up is not waited for; one
    /// that ended is.
    #[test]
    fn a_cut_short_window_waits_for_probes_until_its_end_only() {
        let slow = std::thread::spawn(|| std::thread::sleep(Duration::from_secs(2)));
        let started = Instant::now();
        assert!(!ended_by(&slow, started + Duration::from_millis(50)));
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "{:?}",
            started.elapsed()
        );
        let quick = std::thread::spawn(|| ());
        assert!(ended_by(&quick, Instant::now() + Duration::from_secs(5)));
    }

    /// Counts the probes started (their progress lines).
    struct Started(Cell<usize>);

    impl Progress for Started {
        fn step(&self, message: &str) {
            if message.starts_with("probing the path MTU") {
                self.0.set(self.0.get() + 1);
            }
        }
    }

    /// Two interfaces whose tunnels have one endpoint: one probe, its result given to
    /// both under their own labels; another target of one of them is probed on its own.
    /// Real probes over `lo`, in a network namespace of the test's own.
    #[test]
    fn interfaces_probing_one_target_share_the_probe() {
        if !crate::testing::root_or_skip("for a network namespace and a raw socket") {
            return;
        }
        std::thread::spawn(|| {
            nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET).expect("unshare");
            let status = std::process::Command::new("ip")
                .args(["link", "set", "lo", "up"])
                .status();
            assert!(status.is_ok_and(|s| s.success()), "ip link set lo up");
            let started = Started(Cell::new(0));
            let mut pool = Pool::new(Instant::now() + Duration::from_secs(3));
            let one: IpAddr = "127.0.0.1".parse().expect("address");
            let other: IpAddr = "127.0.0.2".parse().expect("address");
            let (mut a, mut b) = (Probes::new(), Probes::new());
            a.start(
                &mut pool,
                vec![("endpoint 127.0.0.1:51820".into(), one, 1500)],
                &started,
            );
            b.start(
                &mut pool,
                vec![("endpoint 127.0.0.1:51821".into(), one, 1500)],
                &started,
            );
            b.start(
                &mut pool,
                vec![("connection".into(), other, 1400)],
                &started,
            );
            assert_eq!(started.0.get(), 2, "one probe per target and size");
            let outcomes = pool.finish();
            assert_eq!(outcomes.len(), 2);
            let mut notes = Vec::new();
            let (of_a, of_b) = (
                a.finish(&outcomes, &mut notes),
                b.finish(&outcomes, &mut notes),
            );
            assert!(notes.is_empty(), "{notes:?}");
            assert_eq!(of_a.len(), 1);
            assert_eq!(of_b.len(), 2);
            assert_eq!(of_a[0].0, "endpoint 127.0.0.1:51820");
            assert_eq!(of_b[0].0, "endpoint 127.0.0.1:51821");
            assert_eq!(of_a[0].1, of_b[0].1, "the shared probe's result");
            assert_eq!(of_a[0].1.path_mtu, Some(1500));
            assert_eq!(of_b[1].1.path_mtu, Some(1400));
        })
        .join()
        .expect("the namespace's thread failed");
    }
}

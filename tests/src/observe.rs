//! Running `netdoctor diagnose` while a scenario's traffic flows, and holding it to its
//! time: from the moment its observation starts (it prints [`OBSERVING`]) to its exit,
//! a diagnosis may take its `--duration` plus [`ON_TIME_SLACK`], probes included.
//!
//! ```no_run
//! use std::time::Duration;
//! use netdoctor_lab::{observe, traffic, PairTopology};
//! # fn main() -> anyhow::Result<()> {
//! let pair = PairTopology::new(1500)?;
//! let (d, ping) = observe::diagnose_during(&pair.a, "eth0", Duration::from_secs(3), &[], || {
//!     traffic::ping(&pair.a, PairTopology::B_IP, &traffic::PingOpts::default())
//! })?;
//! d.expect_healthy()?;
//! # let _ = ping;
//! # Ok(())
//! # }
//! ```

use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};

use crate::diagnosis::Diagnosis;
use crate::netdoctor;
use crate::netns::Netns;

/// What netdoctor prints on stderr once its start snapshot is taken.
pub const OBSERVING: &str = "netdoctor: observing";

/// How much longer than `--duration` a diagnosis may take once its observation began.
pub const ON_TIME_SLACK: Duration = Duration::from_secs(1);

/// A `--duration` written `N s` or `Ns` (`"3s"`, `"2.5s"`) as a [`Duration`].
pub fn window(duration: &str) -> Result<Duration> {
    let secs: f64 = duration
        .trim_end_matches('s')
        .trim()
        .parse()
        .with_context(|| format!("duration {duration:?} is not N s"))?;
    Duration::try_from_secs_f64(secs).with_context(|| format!("duration {duration:?}"))
}

/// How long a diagnosis took.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wall {
    /// The observation asked for.
    pub window: Duration,
    /// From the start of the process to its observation (loading and attaching).
    pub setup: Duration,
    /// From the start of the observation to the exit (observation, probes, rules).
    pub observed_to_exit: Duration,
}

impl Wall {
    /// How far beyond its window the diagnosis ended (zero if within).
    pub fn overrun(&self) -> Duration {
        self.observed_to_exit.saturating_sub(self.window)
    }

    /// Errors when the diagnosis took longer than its window plus [`ON_TIME_SLACK`].
    pub fn check(&self, label: &str) -> Result<()> {
        ensure!(
            self.observed_to_exit <= self.window + ON_TIME_SLACK,
            "`{label}` ended {:.2} s after its {:.1} s observation began: more than {:.1} s \
             beyond it (setup took {:.2} s)",
            self.observed_to_exit.as_secs_f64(),
            self.window.as_secs_f64(),
            ON_TIME_SLACK.as_secs_f64(),
            self.setup.as_secs_f64()
        );
        Ok(())
    }
}

/// Starts `netdoctor diagnose IFACE --duration WINDOW --json EXTRA...` inside `ns`, waits
/// until its observation begins, runs `load` (the scenario's traffic) on another thread,
/// and returns the report (its exit code matching its worst finding, its time within
/// [`ON_TIME_SLACK`] of the window), what `load` returned, and the times.
pub fn diagnose_timed<T, F>(
    ns: &Netns,
    iface: &str,
    window: Duration,
    extra: &[&str],
    load: F,
) -> Result<(Diagnosis, T, Wall)>
where
    T: Send,
    F: FnOnce() -> Result<T> + Send,
{
    let bin = netdoctor::binary()?;
    let duration = format!("{}ms", window.as_millis());
    let mut args = vec!["diagnose", iface, "--duration", duration.as_str(), "--json"];
    args.extend_from_slice(extra);
    let label = format!("netdoctor {} (in {})", args.join(" "), ns.name());
    let spawned = Instant::now();
    let mut process = ns.spawn_command(&label, ns.command(&bin.to_string_lossy(), &args))?;
    process.wait_for_output(OBSERVING, netdoctor::START_TIMEOUT)?;
    let observing = Instant::now();
    let (status, exited, load) = std::thread::scope(|scope| {
        let traffic = scope.spawn(load);
        let status = process.wait_timeout(window + Duration::from_secs(60));
        let exited = Instant::now();
        let load = match traffic.join() {
            Ok(result) => result,
            Err(_) => Err(anyhow::anyhow!("the traffic thread panicked")),
        };
        (status, exited, load)
    });
    let status = status?;
    let code = status
        .code()
        .with_context(|| format!("`{label}` was killed ({status})"))?;
    let d = Diagnosis::parse(label.clone(), code, &process.stdout()?, &process.stderr()?)?;
    let load = load.with_context(|| {
        format!(
            "traffic during the observation; diagnosis:\n{}",
            d.describe()
        )
    })?;
    // Shown with --nocapture (and on failure): the measured facts behind each verdict.
    eprintln!("{}", d.describe());
    let wall = Wall {
        window,
        setup: observing - spawned,
        observed_to_exit: exited - observing,
    };
    eprintln!(
        "{label}: setup {:.2} s, observation to exit {:.2} s",
        wall.setup.as_secs_f64(),
        wall.observed_to_exit.as_secs_f64()
    );
    d.check_exit_code()?;
    wall.check(&label)?;
    Ok((d, load, wall))
}

/// [`diagnose_timed`] without the times.
pub fn diagnose_during<T, F>(
    ns: &Netns,
    iface: &str,
    window: Duration,
    extra: &[&str],
    load: F,
) -> Result<(Diagnosis, T)>
where
    T: Send,
    F: FnOnce() -> Result<T> + Send,
{
    diagnose_timed(ns, iface, window, extra, load).map(|(d, t, _)| (d, t))
}

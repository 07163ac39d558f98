//! SIGINT and SIGTERM for the one-shot commands (`diagnose`, `flows`, `drops`, `probe`,
//! `wireguard`), in one place: the command runs as a future raced against both signals. A
//! signal drops the command's future, and with it everything the command loaded and
//! attached (attachments detach on drop: netlink tc filters, legacy XDP and the clsact
//! qdisc netdoctor created included, which would otherwise outlive the process); then
//! netdoctor says so in one line and exits 130 (SIGINT) or 143 (SIGTERM), as a shell
//! reports a command killed by the signal.
//!
//! A command that reports what it saw when Ctrl-C ends its observation (`diagnose`, `flows`,
//! `drops`) waits on [`Interrupts::stop_early`] during the observation: the first SIGINT then
//! ends the observation instead of the command. A second one, or one at any other time, stops
//! the command. The signal is seen when the command next waits (an await): loading the
//! BPF programs or joining a probe thread finishes first.
//!
//! (`netdoctor agent` handles the two signals itself: it detaches and exits 0.)

use std::future::Future;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::Context;
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::Notify;

/// Exit code after SIGINT (128 + 2).
pub const EXIT_SIGINT: u8 = 130;
/// Exit code after SIGTERM (128 + 15).
pub const EXIT_SIGTERM: u8 = 143;

/// The signal that stopped a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    Interrupt,
    Terminate,
}

impl Stop {
    fn exit_code(self) -> u8 {
        match self {
            Stop::Interrupt => EXIT_SIGINT,
            Stop::Terminate => EXIT_SIGTERM,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Stop::Interrupt => "SIGINT",
            Stop::Terminate => "SIGTERM",
        }
    }
}

/// What a running command may ask of the signal handling.
#[derive(Debug, Clone, Default)]
pub(super) struct Interrupts(Arc<Inner>);

#[derive(Debug, Default)]
struct Inner {
    /// A [`Interrupts::stop_early`] is waiting: the next SIGINT is its.
    armed: AtomicBool,
    stop: Notify,
}

/// Disarms on drop (the observation ended, by its deadline or by the interrupt).
struct Armed<'a>(&'a AtomicBool);

impl Drop for Armed<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::SeqCst);
    }
}

impl Interrupts {
    /// Returns at the first SIGINT while this waits (Ctrl-C ending an observation early);
    /// that SIGINT does not stop the command.
    pub(super) async fn stop_early(&self) {
        self.0.armed.store(true, Ordering::SeqCst);
        let _armed = Armed(&self.0.armed);
        self.0.stop.notified().await;
    }

    /// Hands a SIGINT to a waiting [`Interrupts::stop_early`]: false if none waits.
    fn claim(&self) -> bool {
        let armed = self.0.armed.swap(false, Ordering::SeqCst);
        if armed {
            self.0.stop.notify_one();
        }
        armed
    }
}

/// Runs `command` on `runtime` until it ends, or SIGINT or SIGTERM stops it: then the
/// command is dropped (detaching what it attached), one line on stderr names the signal,
/// and the exit code is 130 or 143.
pub(super) fn run<F, Fut>(runtime: tokio::runtime::Runtime, command: F) -> anyhow::Result<ExitCode>
where
    F: FnOnce(Interrupts) -> Fut,
    Fut: Future<Output = anyhow::Result<ExitCode>>,
{
    match runtime.block_on(race(command))? {
        Ended::Done(result) => result,
        Ended::Stopped(stop) => {
            // A blocking task still running (the probe's ICMP exchange) must not hold the
            // exit up: nothing it could still do is wanted.
            runtime.shutdown_background();
            eprintln!(
                "netdoctor: stopped by {}; nothing reported, and nothing it attached is left \
                 attached",
                stop.name()
            );
            Ok(ExitCode::from(stop.exit_code()))
        }
    }
}

/// How a command ended.
enum Ended {
    /// By itself, with this result.
    Done(anyhow::Result<ExitCode>),
    /// Stopped by a signal, and dropped.
    Stopped(Stop),
}

/// Runs the command until it ends or a signal stops it.
async fn race<F, Fut>(command: F) -> anyhow::Result<Ended>
where
    F: FnOnce(Interrupts) -> Fut,
    Fut: Future<Output = anyhow::Result<ExitCode>>,
{
    let mut int = signal(SignalKind::interrupt()).context("handling SIGINT")?;
    let mut term = signal(SignalKind::terminate()).context("handling SIGTERM")?;
    let interrupts = Interrupts::default();
    let mut command = Box::pin(command(interrupts.clone()));
    let stop = loop {
        tokio::select! {
            result = &mut command => return Ok(Ended::Done(result)),
            _ = int.recv() => {
                if !interrupts.claim() {
                    break Stop::Interrupt;
                }
            }
            _ = term.recv() => break Stop::Terminate,
        }
    };
    // Dropping the command detaches whatever it attached, before anything is said.
    drop(command);
    Ok(Ended::Stopped(stop))
}

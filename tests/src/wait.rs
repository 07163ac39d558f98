//! Waiting for something a lab is expected to show soon: polled, with the last error
//! explaining what was missing when time runs out.

use std::time::{Duration, Instant};

use anyhow::Result;

/// How often [`eventually`] polls.
const POLL: Duration = Duration::from_millis(300);

/// Polls `check` until it returns Ok or `timeout` passes; then its last error explains.
pub fn eventually<T>(timeout: Duration, mut check: impl FnMut() -> Result<T>) -> Result<T> {
    let started = Instant::now();
    loop {
        match check() {
            Ok(v) => return Ok(v),
            Err(e) if started.elapsed() >= timeout => return Err(e),
            Err(_) => std::thread::sleep(POLL),
        }
    }
}

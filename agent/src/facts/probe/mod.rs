//! Active path-MTU probe, like tracepath: ICMP echo requests with DF set, sizes searched
//! by bisection, answers and ICMP "too big" errors read from the socket. It tells the
//! largest packet that crosses the path, whether routers reported a smaller MTU, and from
//! where: a size that silently vanishes with no report below the route MTU is a blackhole.
//!
//! `IP_PMTUDISC_PROBE` sets DF but ignores the kernel's cached path MTU, so every size is
//! really sent; `IP_RECVERR` queues ICMP errors for our packets on the socket.

mod pinger;
pub mod targets;

use std::net::IpAddr;
use std::time::{Duration, Instant};

use serde::Serialize;

use pinger::{Answer, Pinger};

/// Targets probed at most per diagnosis or agent round (each tunnel endpoint, then the
/// remote ends of stalled connections), so a round stays short.
pub const MAX_PROBE_TARGETS: usize = 4;

/// Probe settings.
#[derive(Debug, Clone)]
pub struct ProbeOptions {
    /// Largest IP packet to try (usually the egress interface's MTU).
    pub max_size: u32,
    /// How long to wait for each answer.
    pub timeout: Duration,
    /// Tries per size before calling it lost.
    pub attempts: u32,
    /// When to stop, finished or not (`diagnose` must end on time): the result is then
    /// `incomplete`, a lower bound that proves nothing.
    pub deadline: Option<Instant>,
}

impl Default for ProbeOptions {
    fn default() -> Self {
        ProbeOptions {
            max_size: 1500,
            timeout: Duration::from_millis(400),
            attempts: 2,
            deadline: None,
        }
    }
}

/// A router's report that a packet was too big.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TooBigReport {
    /// Who sent the ICMP error.
    pub from: IpAddr,
    /// The next-hop MTU it announced.
    pub mtu: u32,
}

/// What the probe found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProbeResult {
    /// Where the probes went.
    pub target: IpAddr,
    /// Largest IP packet size answered; `None` if even the smallest size got no answer
    /// (target down or ICMP echo filtered: nothing can be concluded).
    pub path_mtu: Option<u32>,
    /// The largest size tried.
    pub max_size: u32,
    /// Reports of smaller MTUs received (ICMP frag-needed / ICMPv6 packet-too-big).
    pub too_big: Vec<TooBigReport>,
    /// Sizes above `path_mtu` vanished without any too-big report while smaller sizes kept
    /// passing: a PMTU blackhole.
    pub blackhole: bool,
    /// Probes of sizes known to pass were lost too: the path loses packets at random, so a
    /// silent failure proves nothing and no blackhole is concluded.
    pub lossy: bool,
    /// The deadline came first: `path_mtu` is only what passed so far.
    pub incomplete: bool,
    /// Probes sent.
    pub probes: u32,
    /// Time taken, milliseconds.
    pub elapsed_ms: u64,
}

/// Rounds of (passing size, failing size) that confirm a silent failure.
const CONFIRM_ROUNDS: u32 = 6;

/// Probes the path to `target`. Sizes are IP packet lengths.
pub fn probe(target: IpAddr, options: &ProbeOptions) -> std::io::Result<ProbeResult> {
    let started = Instant::now();
    let mut session = Session {
        pinger: Pinger::new(target)?,
        options,
        timeout: options.timeout,
        probes: 0,
        too_big: Vec::new(),
    };
    let min = if target.is_ipv4() { 576 } else { 1280 }.min(options.max_size);
    let (ok_min, _) = session.try_size(min, options.attempts)?;
    if !ok_min {
        let incomplete = session.out_of_time();
        return Ok(ProbeResult {
            target,
            path_mtu: None,
            max_size: options.max_size,
            too_big: session.too_big,
            blackhole: false,
            lossy: false,
            incomplete,
            probes: session.probes,
            elapsed_ms: started.elapsed().as_millis() as u64,
        });
    }
    let b = session.bisect(min)?;
    let blackhole = b.silent_loss
        && !b.lossy
        && !b.incomplete
        && b.good < options.max_size
        && session.too_big.iter().all(|r| r.mtu > b.good);
    Ok(ProbeResult {
        target,
        path_mtu: Some(b.good),
        max_size: options.max_size,
        blackhole,
        lossy: b.lossy,
        incomplete: b.incomplete,
        too_big: session.too_big,
        probes: session.probes,
        elapsed_ms: started.elapsed().as_millis() as u64,
    })
}

/// One probe run: the socket, and what it has counted and been told so far.
struct Session<'a> {
    pinger: Pinger,
    options: &'a ProbeOptions,
    /// Wait per answer. Waiting costs most when probes vanish; once the path has answered,
    /// wait five round trips (at least 100 ms, at most the configured timeout).
    timeout: Duration,
    probes: u32,
    too_big: Vec<TooBigReport>,
}

/// Where the bisection ended.
struct Bisection {
    /// The largest size that passed.
    good: u32,
    /// The smallest size that failed (or one past the largest size to try).
    bad: u32,
    /// A size failed with no report.
    silent_loss: bool,
    /// The passing size was lost too: the path loses packets at random.
    lossy: bool,
    /// The deadline came first.
    incomplete: bool,
}

impl Bisection {
    /// Takes the answer for `size` into the bounds; returns the next size to try: a
    /// reported MTU is the likeliest answer, else the middle.
    fn narrow(&mut self, size: u32, passed: bool, hint: Option<u32>) -> u32 {
        if passed {
            self.good = size;
        } else {
            self.bad = size;
            match hint {
                // Nothing above the reported next-hop MTU can pass that hop.
                Some(mtu) if mtu >= self.good && mtu + 1 < self.bad => self.bad = mtu + 1,
                Some(_) => {}
                None => self.silent_loss = true,
            }
        }
        match hint {
            Some(mtu) if mtu > self.good && mtu < self.bad => mtu,
            _ => self.good + (self.bad - self.good) / 2,
        }
    }
}

impl Session<'_> {
    fn out_of_time(&self) -> bool {
        self.options.deadline.is_some_and(|d| Instant::now() >= d)
    }

    /// Sends `size` up to `attempts` times: (answered, the next-hop MTU a report gave).
    fn try_size(&mut self, size: u32, attempts: u32) -> std::io::Result<(bool, Option<u32>)> {
        let deadline = self.options.deadline;
        for _ in 0..attempts.max(1) {
            let left = deadline.map_or(self.timeout, |d| {
                d.saturating_duration_since(Instant::now())
            });
            if left.is_zero() {
                break;
            }
            self.probes += 1;
            let sent = Instant::now();
            let answer = self.pinger.probe(size, self.timeout.min(left))?;
            if matches!(answer, Answer::Reply) && self.timeout == self.options.timeout {
                self.timeout =
                    (sent.elapsed() * 5).clamp(Duration::from_millis(100), self.options.timeout);
            }
            match answer {
                Answer::Reply => return Ok((true, None)),
                Answer::TooBig(r) => {
                    let mtu = r.mtu;
                    if !self.too_big.contains(&r) {
                        self.too_big.push(r);
                    }
                    return Ok((false, Some(mtu)));
                }
                Answer::TooBigLocally(mtu) => return Ok((false, (mtu > 0).then_some(mtu))),
                Answer::Lost => {}
            }
        }
        Ok((false, None))
    }

    /// Bisects between `min` (which passed) and the largest size to try.
    fn bisect(&mut self, min: u32) -> std::io::Result<Bisection> {
        // Invariant: `good` passes, `bad` fails (or is one past the largest size to try).
        let mut b = Bisection {
            good: min,
            bad: self.options.max_size + 1,
            silent_loss: false,
            lossy: false,
            incomplete: false,
        };
        let mut next = self.options.max_size;
        while b.bad - b.good > 1 {
            if self.out_of_time() {
                b.incomplete = true;
                break;
            }
            let size = next.clamp(b.good + 1, b.bad - 1);
            let (mut passed, mut hint) = self.try_size(size, self.options.attempts)?;
            // Once one silent failure survived the confirmation rounds, the path is known not
            // to lose packets at random: later silent failures are taken as they come.
            if !passed && hint.is_none() && !b.silent_loss {
                match self.confirm_silent(b.good, size)? {
                    None => {
                        b.lossy = true;
                        break;
                    }
                    Some(answer) => (passed, hint) = answer,
                }
                if self.out_of_time() {
                    b.incomplete = true;
                    break;
                }
            }
            next = b.narrow(size, passed, hint);
        }
        Ok(b)
    }

    /// A silent failure means a blackhole only if, probe for probe, the size that passed
    /// (`good`) keeps passing while `size` keeps failing. Random loss shows as a lost probe
    /// of the passing size sooner or later: then the probe concludes nothing about sizes
    /// (`None`, lossy). With 40 % loss (requests lost, answers not), random loss passes for
    /// a blackhole here about once in 30,000 tries (0.4² × (0.6 × 0.4)⁶); a real blackhole
    /// costs six more timeouts per size. Else the last answer for `size`.
    fn confirm_silent(
        &mut self,
        good: u32,
        size: u32,
    ) -> std::io::Result<Option<(bool, Option<u32>)>> {
        let mut answer = (false, None);
        for _ in 0..CONFIRM_ROUNDS {
            let (good_passes, _) = self.try_size(good, 1)?;
            if !good_passes {
                return Ok(None);
            }
            answer = self.try_size(size, 1)?;
            if answer.0 || answer.1.is_some() {
                break;
            }
        }
        Ok(Some(answer))
    }
}

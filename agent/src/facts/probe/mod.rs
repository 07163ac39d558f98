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
    let mut pinger = Pinger::new(target)?;
    let min = if target.is_ipv4() { 576 } else { 1280 }.min(options.max_size);
    let mut probes = 0;
    let mut too_big: Vec<TooBigReport> = Vec::new();
    // Waiting for an answer costs most when probes vanish; once the path has answered,
    // wait five round trips (at least 100 ms, at most the configured timeout).
    let mut timeout = options.timeout;
    let deadline = options.deadline;
    let out_of_time = move || deadline.is_some_and(|d| Instant::now() >= d);
    let mut try_size = |pinger: &mut Pinger,
                        size: u32,
                        attempts: u32,
                        reports: &mut Vec<TooBigReport>|
     -> std::io::Result<(bool, Option<u32>)> {
        for _ in 0..attempts.max(1) {
            let left = deadline.map_or(timeout, |d| d.saturating_duration_since(Instant::now()));
            if left.is_zero() {
                break;
            }
            probes += 1;
            let sent = Instant::now();
            let answer = pinger.probe(size, timeout.min(left))?;
            if matches!(answer, Answer::Reply) && timeout == options.timeout {
                timeout = (sent.elapsed() * 5).clamp(Duration::from_millis(100), options.timeout);
            }
            match answer {
                Answer::Reply => return Ok((true, None)),
                Answer::TooBig(r) => {
                    let mtu = r.mtu;
                    if !reports.contains(&r) {
                        reports.push(r);
                    }
                    return Ok((false, Some(mtu)));
                }
                Answer::TooBigLocally(mtu) => return Ok((false, (mtu > 0).then_some(mtu))),
                Answer::Lost => {}
            }
        }
        Ok((false, None))
    };

    let attempts = options.attempts;
    let (ok_min, _) = try_size(&mut pinger, min, attempts, &mut too_big)?;
    if !ok_min {
        return Ok(ProbeResult {
            target,
            path_mtu: None,
            max_size: options.max_size,
            too_big,
            blackhole: false,
            lossy: false,
            incomplete: out_of_time(),
            probes,
            elapsed_ms: started.elapsed().as_millis() as u64,
        });
    }
    // Invariant: `good` passes, `bad` fails (or is one past the largest size to try).
    let mut good = min;
    let mut bad = options.max_size + 1;
    let mut silent_loss = false;
    let mut lossy = false;
    let mut incomplete = false;
    let mut next = options.max_size;
    while bad - good > 1 {
        if out_of_time() {
            incomplete = true;
            break;
        }
        let size = next.clamp(good + 1, bad - 1);
        let (mut passed, mut hint) = try_size(&mut pinger, size, attempts, &mut too_big)?;
        // Once one silent failure survived the confirmation rounds, the path is known not
        // to lose packets at random: later silent failures are taken as they come.
        if !passed && hint.is_none() && !silent_loss {
            // A silent failure means a blackhole only if, probe for probe, the size that
            // passed keeps passing while this one keeps failing. Random loss shows as a
            // lost probe of the passing size sooner or later: then the probe concludes
            // nothing about sizes (lossy). With 40 % loss (requests lost, answers not),
            // random loss passes for a blackhole here about once in 30,000 tries
            // (0.4² × (0.6 × 0.4)⁶); a real blackhole costs six more timeouts per size.
            for _ in 0..CONFIRM_ROUNDS {
                let (good_passes, _) = try_size(&mut pinger, good, 1, &mut too_big)?;
                if !good_passes {
                    lossy = true;
                    break;
                }
                (passed, hint) = try_size(&mut pinger, size, 1, &mut too_big)?;
                if passed || hint.is_some() {
                    break;
                }
            }
            if lossy || out_of_time() {
                incomplete = !lossy;
                break;
            }
        }
        if passed {
            good = size;
        } else {
            bad = size;
            match hint {
                // Nothing above the reported next-hop MTU can pass that hop.
                Some(mtu) if mtu >= good && mtu + 1 < bad => bad = mtu + 1,
                Some(_) => {}
                None => silent_loss = true,
            }
        }
        // A reported MTU is the likeliest answer: try it next, else bisect.
        next = match hint {
            Some(mtu) if mtu > good && mtu < bad => mtu,
            _ => good + (bad - good) / 2,
        };
    }
    Ok(ProbeResult {
        target,
        path_mtu: Some(good),
        max_size: options.max_size,
        blackhole: silent_loss
            && !lossy
            && !incomplete
            && good < options.max_size
            && too_big.iter().all(|r| r.mtu > good),
        lossy,
        incomplete,
        too_big,
        probes,
        elapsed_ms: started.elapsed().as_millis() as u64,
    })
}

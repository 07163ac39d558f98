//! TCP socket telemetry: per-connection congestion control, RTT, cwnd, retransmissions and
//! path MTU, from `ebpf/sockets.bpf.c` (iter/tcp snapshots, tcp_retransmit_skb and
//! inet_sock_set_state tracepoints).
//!
//! [`SocketProbes`] loads and attaches the programs, skipping any whose hook this kernel
//! lacks with a warning; [`rates`] turns two snapshots and the events between them into
//! per-connection rates.

pub mod limits;
pub mod rates;
mod socket;

use std::io::Read;
use std::mem::MaybeUninit;
use std::os::fd::AsFd;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};
use libbpf_rs::{Iter, Link, MapCore, OpenObject, RingBuffer, RingBufferBuilder};

pub use socket::{Chrono, Clock, ClosedSocket, RetransStats, Socket};

use crate::kernel::bpf::sockets::types::{
    nd_retrans_stats, nd_sock_close, nd_sock_info, nd_sock_key,
};
use crate::kernel::bpf::sockets::{SocketsSkel, SocketsSkelBuilder};
use crate::kernel::btf;
use crate::kernel::error::{Error, Result};
use crate::kernel::views::decode;

// SAFETY (all impls below): `#[repr(C)]` structs generated from sockets.h made only of
// integers and integer arrays with explicit padding: every bit pattern is a valid value.
// SAFETY: see above.
unsafe impl plain::Plain for nd_sock_info {}
// SAFETY: see above.
unsafe impl plain::Plain for nd_sock_key {}
// SAFETY: see above.
unsafe impl plain::Plain for nd_sock_close {}
// SAFETY: see above.
unsafe impl plain::Plain for nd_retrans_stats {}

/// Which socket signals this kernel provides.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Signals {
    /// iter/tcp snapshots.
    pub snapshots: bool,
    /// tcp_retransmit_skb aggregates.
    pub retransmits: bool,
    /// inet_sock_set_state close events.
    pub lifecycle: bool,
}

impl Signals {
    /// What each missing signal costs, one line each (empty when all are live).
    pub fn missing(&self) -> Vec<&'static str> {
        [
            (self.snapshots, "socket snapshots (iter/tcp) unavailable: per-connection congestion control, RTT and retransmissions are not observed"),
            (self.retransmits, "retransmission tracepoint (tcp_retransmit_skb) unavailable: full-size and short retransmissions are not told apart"),
            (self.lifecycle, "close events (inet_sock_set_state) unavailable: connections shorter than the window are missed"),
        ]
        .into_iter()
        .filter(|(live, _)| !live)
        .map(|(_, what)| what)
        .collect()
    }
}

/// The loaded socket programs. Dropping it detaches them.
pub struct SocketProbes<'obj> {
    skel: SocketsSkel<'obj>,
    /// Close events read from the ring but not yet handed out (the ring's callback fills
    /// it, so it is shared with that callback).
    closed: Arc<Mutex<Vec<ClosedSocket>>>,
    /// The close-event ring, mapped once: building a ring buffer maps and populates every
    /// page of it, far too costly to repeat at each read.
    ring: RingBuffer<'static>,
    netns: u32,
    iter_link: Option<Link>,
    /// Held so the tracepoints stay attached; dropping them detaches.
    _links: Vec<Link>,
    signals: Signals,
    /// The first snapshot's clock: the longer the span to the latest, the surer the HZ.
    first_clock: OnceLock<Clock>,
}

/// Every TCP socket at one moment, and that moment.
#[derive(Debug, Clone, Default)]
pub struct SocketSnapshot {
    /// The sockets.
    pub sockets: Vec<Socket>,
    /// When the snapshot was taken (None when iter/tcp is unavailable).
    pub clock: Option<Clock>,
}

impl std::fmt::Debug for SocketProbes<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SocketProbes")
            .field("signals", &self.signals)
            .finish()
    }
}

impl<'obj> SocketProbes<'obj> {
    /// Loads and attaches what this kernel supports; warns about the rest.
    pub fn load(storage: &'obj mut MaybeUninit<OpenObject>) -> Result<Self> {
        let kernel = btf::vmlinux().ok_or(Error::NoBtf)?;
        let mut open = SocketsSkelBuilder::default()
            .open(storage)
            .map_err(Error::from_load)?;
        let mut signals = Signals {
            snapshots: btf::has_iterator(&kernel, "tcp"),
            retransmits: btf::has_tracepoint(&kernel, "tcp_retransmit_skb"),
            lifecycle: btf::has_tracepoint(&kernel, "inet_sock_set_state"),
        };
        let netns = crate::kernel::netns::current_netns().unwrap_or(0);
        if let Some(rodata) = open.maps.rodata_data.as_deref_mut() {
            rodata.retransmit_has_err = retransmit_passes_err(&kernel);
            rodata.target_netns = netns;
        }
        open.progs.nd_iter_tcp.set_autoload(signals.snapshots);
        open.progs
            .nd_tcp_retransmit
            .set_autoload(signals.retransmits);
        open.progs.nd_sock_state.set_autoload(signals.lifecycle);
        log_skipped(&signals);
        let skel = open.load().map_err(Error::from_load)?;
        let (iter_link, links) = attach_all(&skel, &mut signals);
        let closed = Arc::new(Mutex::new(Vec::new()));
        let ring = close_ring(&skel, netns, closed.clone())?;
        Ok(SocketProbes {
            skel,
            closed,
            ring,
            netns,
            iter_link,
            _links: links,
            signals,
            first_clock: OnceLock::new(),
        })
    }

    /// Which signals are live.
    pub fn signals(&self) -> Signals {
        self.signals
    }

    /// Every TCP socket of the caller's network namespace right now (time-wait and request
    /// sockets excluded), and when. Empty when iter/tcp is unavailable.
    pub fn snapshot(&self) -> Result<SocketSnapshot> {
        let Some(link) = &self.iter_link else {
            return Ok(SocketSnapshot::default());
        };
        let mut iter = Iter::new(link).map_err(|e| Error::Map {
            map: "iter/tcp",
            source: e,
        })?;
        let mut buf = Vec::new();
        iter.read_to_end(&mut buf).map_err(|e| Error::Map {
            map: "iter/tcp",
            source: libbpf_rs::Error::from(e),
        })?;
        let mut snapshot = SocketSnapshot::default();
        for raw in buf
            .chunks_exact(std::mem::size_of::<nd_sock_info>())
            .filter_map(decode::<nd_sock_info>)
        {
            // The iteration's last record (state 0) carries only the clocks.
            if raw.state == 0 {
                snapshot.clock = Some(Clock {
                    jiffies: raw.jiffies,
                    ns: raw.now_ns,
                });
            } else {
                snapshot.sockets.push(Socket::from_raw(&raw));
            }
        }
        if let Some(clock) = snapshot.clock {
            self.first_clock.get_or_init(|| clock);
        }
        Ok(snapshot)
    }

    /// The kernel's HZ, measured from the first snapshot to `now` (see
    /// [`Clock::hz_since`]); `None` until they are 200 ms apart.
    pub fn hz(&self, now: &Clock) -> Option<f64> {
        now.hz_since(self.first_clock.get()?)
    }

    /// Retransmission aggregates per connection since load, in the namespace that loaded
    /// the probes.
    pub fn retransmits(&self) -> Result<Vec<RetransStats>> {
        let map = &self.skel.maps.retrans;
        let mut out = Vec::new();
        for key in map.keys() {
            let value = map
                .lookup(&key, libbpf_rs::MapFlags::ANY)
                .map_err(|e| Error::Map {
                    map: "retrans",
                    source: e,
                })?;
            if let (Some(k), Some(v)) = (
                decode::<nd_sock_key>(&key),
                value.as_deref().and_then(decode::<nd_retrans_stats>),
            ) {
                if k.netns == self.netns {
                    out.push(RetransStats::from_raw(&k, &v));
                }
            }
        }
        Ok(out)
    }

    /// Moves close events from the ring buffer into memory. Call it often (every 100 ms)
    /// while observing: the ring holds about 1,700 events.
    pub fn poll_closed(&self) -> Result<()> {
        self.ring.consume().map_err(|e| Error::Map {
            map: "sock_events",
            source: e,
        })
    }

    /// Connections of the loading namespace that closed since the last call.
    pub fn drain_closed(&self) -> Result<Vec<ClosedSocket>> {
        self.poll_closed()?;
        Ok(std::mem::take(
            &mut *self.closed.lock().unwrap_or_else(PoisonError::into_inner),
        ))
    }

    /// Kernel statistics of the socket programs ([`crate::kernel::prog_stats`]).
    pub fn program_stats(&self) -> Vec<crate::kernel::prog_stats::ProgramRuns> {
        crate::kernel::prog_stats::of_object(self.skel.object())
    }

    /// Runs of the retransmission tracepoint program the kernel skipped since load (it was
    /// already running on that CPU when an interrupt retransmitted): the retransmissions
    /// they would have counted are missing from the per-connection sizes.
    pub fn retransmit_runs_missed(&self) -> u64 {
        if !self.signals.retransmits {
            return 0;
        }
        crate::kernel::prog_stats::run_stats(self.skel.progs.nd_tcp_retransmit.as_fd())
            .map_or(0, |(_, _, missed)| missed)
    }

    /// Close events lost because the ring buffer was full.
    pub fn lost_events(&self) -> u64 {
        self.skel
            .maps
            .bss_data
            .as_deref()
            .map_or(0, |b| b.sock_events_lost)
    }
}

/// Whether this kernel's tcp_retransmit_skb tracepoint passes `err`, and so fires for failed
/// attempts too: the program then counts those the kernel counted in `total_retrans`, and
/// the sizes it reports add up to that count (older kernels trace successes only).
pub fn retransmit_passes_err(kernel: &libbpf_rs::btf::Btf<'_>) -> bool {
    btf::tracepoint_args(kernel, "tcp_retransmit_skb").unwrap_or(2) >= 3
}

/// What a report says when `lost` close events did not fit the ring buffer.
pub fn lost_closes_note(lost: u64) -> String {
    format!(
        "{lost} connection-close events were lost (ring buffer full): short connections may be missing"
    )
}

/// What a report says when the kernel skipped `missed` runs of the retransmission program.
pub fn missed_retransmits_note(missed: u64) -> String {
    format!(
        "{missed} retransmission events were not seen (the kernel skipped the program while \
         it ran on the same CPU): full-size and smaller retransmits may add up to less than \
         the retransmit counts"
    )
}

/// Says (at info) which signals this kernel lacks, so are not loaded.
fn log_skipped(signals: &Signals) {
    for (available, what) in [
        (
            signals.snapshots,
            "iter/tcp (socket snapshots: cc, srtt, cwnd, pmtu)",
        ),
        (
            signals.retransmits,
            "tracepoint tcp_retransmit_skb (per-connection retransmissions)",
        ),
        (
            signals.lifecycle,
            "tracepoint inet_sock_set_state (short-lived connections)",
        ),
    ] {
        if !available {
            // The caller names the lost signal (diagnose: a note and one warning).
            tracing::info!("this kernel lacks {what}; that signal is skipped");
        }
    }
}

/// Attaches the loaded programs whose signal is on: the iter/tcp link, then the
/// tracepoints' links. A program that fails to attach turns its signal off.
fn attach_all(skel: &SocketsSkel<'_>, signals: &mut Signals) -> (Option<Link>, Vec<Link>) {
    let iter_link = attach(&skel.progs.nd_iter_tcp, "iter/tcp", &mut signals.snapshots);
    let links = [
        attach(
            &skel.progs.nd_tcp_retransmit,
            "tcp_retransmit_skb",
            &mut signals.retransmits,
        ),
        attach(
            &skel.progs.nd_sock_state,
            "inet_sock_set_state",
            &mut signals.lifecycle,
        ),
    ]
    .into_iter()
    .flatten()
    .collect();
    (iter_link, links)
}

/// Attaches `prog` if its signal is `on`; on failure warns and turns the signal off.
fn attach(prog: &libbpf_rs::ProgramMut<'_>, what: &str, on: &mut bool) -> Option<Link> {
    if !*on {
        return None;
    }
    match prog.attach() {
        Ok(link) => Some(link),
        Err(e) => {
            tracing::warn!("cannot attach {what} ({e}); that signal is skipped");
            *on = false;
            None
        }
    }
}

/// The ring of close events, with a callback that keeps the events of namespace `netns`
/// in `closed`. The ring buffer maps the ring itself and needs nothing borrowed once built.
fn close_ring(
    skel: &SocketsSkel<'_>,
    netns: u32,
    closed: Arc<Mutex<Vec<ClosedSocket>>>,
) -> Result<RingBuffer<'static>> {
    let err = |source| Error::Map {
        map: "sock_events",
        source,
    };
    let mut builder = RingBufferBuilder::new();
    builder
        .add(&skel.maps.sock_events, move |bytes: &[u8]| {
            let raw = bytes
                .get(..std::mem::size_of::<nd_sock_close>())
                .and_then(decode::<nd_sock_close>);
            if let Some(raw) = raw.filter(|r| r.info.key.netns == netns) {
                closed
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(ClosedSocket::from_raw(&raw));
            }
            0
        })
        .map_err(err)?;
    builder.build().map_err(err)
}

#[cfg(test)]
mod tcp_info_tests;

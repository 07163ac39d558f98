//! One diagnosis of one or several interfaces: the BPF programs load once and attach to
//! every interface (each watched interface once), one observation window with each
//! interface's path-MTU probes running during it, then facts and rules per interface.

use std::collections::HashSet;
use std::mem::MaybeUninit;
use std::time::{Duration, Instant};

use futures::future::join_all;

use super::probes::{Outcomes, Pool, Probes};
use super::target::{note_all, with_cpu_notes, Target};
use super::{signals, DiagnoseOptions, Error, Progress, Report, AFTER_WINDOW, LOOK_EVERY};
use crate::config::bond;
use crate::config::firewall::Ruleset;
use crate::config::host::Host;
use crate::config::iface::{self, Interface};
use crate::config::route_table::{self, TableRoute};
use crate::facts::probe::targets;
use crate::facts::{build, underlay, watch, Facts};
use crate::kernel::packet::{Dataplane, Snapshot, MAX_TUNNEL_PORTS};
use crate::kernel::sockets::rates::Baseline;
use crate::kernel::sockets::SocketProbes;
use crate::rules::RuleSet;

/// The observation shared by every interface of a diagnosis.
struct Window<'a, 'obj> {
    all: &'a [Interface],
    routes: &'a [TableRoute],
    gateway: bool,
    probe: bool,
    dp: Option<Dataplane<'obj>>,
    dp_start: Option<Snapshot>,
    sockets: Option<&'a SocketProbes<'obj>>,
    baseline: Option<Baseline>,
    /// The path-MTU probes of every interface.
    pool: Pool,
    /// Interfaces the data plane is attached to.
    attached: HashSet<u32>,
    started: Instant,
    duration: Duration,
}

impl Window<'_, '_> {
    /// What the data plane counted since the window began (nothing without it).
    fn so_far(&self) -> Result<Snapshot, Error> {
        Ok(match (&self.dp, &self.dp_start) {
            (Some(dp), Some(start)) => dp.snapshot()?.since(start),
            _ => Snapshot::default(),
        })
    }

    fn end(&self) -> Instant {
        self.started + self.duration
    }
}

/// Diagnoses the interfaces `names` (each once, in order) in one window.
pub(super) async fn run(
    names: &[String],
    opts: &DiagnoseOptions,
    progress: &dyn Progress,
) -> Result<Vec<Report>, Error> {
    let rules = RuleSet::load(opts.rules_dir.as_deref())?;
    let all = iface::list().await?;
    let routes = route_table::dump().await;
    let gateway = Host::forwarding();
    let mut ifaces = prepare(names, &all, &routes, gateway).await?;
    let routes = routes.unwrap_or_default();
    let dp_options = dataplane_options(opts, &ifaces);
    // Sockets first: whether they load decides how local connections are accounted.
    let mut sock_storage = MaybeUninit::uninit();
    let mut drop_storage = MaybeUninit::uninit();
    let mut loaded = Vec::new();
    let (sockets, drops) = signals::load_probes(&mut sock_storage, &mut drop_storage, &mut loaded);
    for t in &mut ifaces {
        t.notes.extend(loaded.iter().cloned());
    }
    let mut dp_storage = MaybeUninit::uninit();
    let mut attached = HashSet::new();
    let dp = signals::packet_dataplane(
        &mut dp_storage,
        signals::with_sockets(dp_options, sockets.as_ref()),
        &mut ifaces,
        &mut attached,
    );
    let links = bond::counters().await.unwrap_or_default();
    let starts = ifaces
        .iter()
        .map(|t| Ok(build::Readings::take(&t.tun, drops.as_ref())?.with_links(links.clone())))
        .collect::<Result<Vec<_>, Error>>()?;
    let dp_start = dp.as_ref().map(Dataplane::snapshot).transpose()?;
    let baseline = sockets.as_ref().map(Baseline::take).transpose()?;
    progress.step(&observing(&ifaces, opts.duration));
    let started = Instant::now();
    let mut w = Window {
        all: &all,
        routes: &routes,
        gateway,
        probe: opts.probe,
        dp,
        dp_start,
        sockets: sockets.as_ref(),
        baseline,
        attached,
        pool: Pool::new(started + opts.duration + AFTER_WINDOW),
        started,
        duration: opts.duration,
    };
    let mut probes: Vec<Probes> = ifaces.iter().map(|_| Probes::new()).collect();
    observe(&mut w, &mut ifaces, &starts, &mut probes, progress).await?;
    let observed = close(w, &mut ifaces, &starts, drops.as_ref()).await?;
    let has_drops = drops.is_some();
    let mut reports = Vec::with_capacity(ifaces.len());
    let per_iface = observed
        .facts
        .into_iter()
        .zip(starts.iter().zip(&observed.ends));
    for ((t, (facts, (start, end))), probes) in ifaces.into_iter().zip(per_iface).zip(probes) {
        let missing = signals::missing_facts(t.has_dataplane, sockets.as_ref(), drops.as_ref());
        let ends = has_drops.then(|| (start.drops(), end.drops()));
        let window = t.has_dataplane.then_some(&observed.window);
        let facts = t.with_bridge(facts, window, ends);
        reports.push(t.report(
            facts,
            opts.probe.then_some((probes, &observed.probes)),
            &rules,
            &missing,
            observed.elapsed,
        ));
    }
    Ok(reports)
}

/// The configuration of every interface of `names` (each once, in order), given the
/// routing table (or why it is unknown).
async fn prepare(
    names: &[String],
    all: &[Interface],
    routes: &Result<Vec<TableRoute>, crate::config::Error>,
    gateway: bool,
) -> Result<Vec<Target>, Error> {
    let (routes, routes_note) = match routes {
        Ok(r) => (r.as_slice(), None),
        Err(e) => (
            &[][..],
            Some(format!(
                "{e}: multipath routes and the gateway's uplink are unknown"
            )),
        ),
    };
    let mut ifaces: Vec<Target> = Vec::with_capacity(names.len());
    for name in names {
        if !ifaces.iter().any(|t| t.me.name == *name) {
            let t = Target::prepare(name, all, routes, routes_note.as_deref(), gateway).await?;
            ifaces.push(t);
        }
    }
    Ok(ifaces)
}

/// The data plane's options: the user's, with the tunnels' ports where the data plane
/// cannot recognise their protocol by itself.
fn dataplane_options(opts: &DiagnoseOptions, ifaces: &[Target]) -> crate::kernel::packet::Options {
    let mut dp_options = opts.dataplane.clone();
    for tp in ifaces.iter().filter_map(|t| t.tun.port_to_recognise()) {
        if dp_options.tunnel_ports.len() < MAX_TUNNEL_PORTS
            && !dp_options.tunnel_ports.contains(&tp)
        {
            dp_options.tunnel_ports.push(tp);
        }
    }
    dp_options
}

/// The progress line as the window opens: "observing wg0 (wireguard, MTU 1480), eth0
/// (physical, MTU 1500) for 5s".
fn observing(ifaces: &[Target], duration: Duration) -> String {
    let each: Vec<String> = ifaces
        .iter()
        .map(|t| format!("{} ({}, MTU {})", t.me.name, t.me.kind, t.me.mtu))
        .collect();
    format!(
        "observing {} for {}",
        each.join(", "),
        humantime::format_duration(duration)
    )
}

/// Starts the probes toward the tunnels' endpoints, then waits out the window, reading the
/// socket probes' close events (a bounded ring) and,
/// every [`LOOK_EVERY`], what the window shows so far: more probe targets (endpoints seen,
/// stalled connections) and a gateway's uplinks to watch from then on.
async fn observe(
    w: &mut Window<'_, '_>,
    ifaces: &mut [Target],
    starts: &[build::Readings],
    probes: &mut [Probes],
    progress: &dyn Progress,
) -> Result<(), Error> {
    if w.probe {
        for (t, p) in ifaces.iter().zip(probes.iter_mut()) {
            let aims = targets::endpoint_targets(&t.tun.endpoints, t.underlay.route_mtu);
            p.start(&mut w.pool, aims, progress);
        }
    }
    let mut next_look = w.started + LOOK_EVERY.min(w.duration / 3);
    let mut stop = progress.stop_early();
    while w.started.elapsed() < w.duration {
        let left = w.duration.saturating_sub(w.started.elapsed());
        tokio::select! {
            () = tokio::time::sleep(left.min(Duration::from_millis(100))) => {}
            () = &mut stop => {
                cut_short(w, ifaces, progress);
                break;
            }
        }
        if let Some(s) = w.sockets {
            s.poll_closed()?;
        }
        let now = Instant::now();
        let probing = w.probe && w.end().saturating_duration_since(now) >= LOOK_EVERY;
        let uplinks = ifaces.iter().any(|t| uplinks(w, t));
        if (probing || uplinks) && now >= next_look {
            next_look = now + LOOK_EVERY;
            look(w, ifaces, starts, probes, probing, progress).await?;
        }
    }
    Ok(())
}

/// The caller ended the window early (Ctrl-C): it closes now, its figures are over the time
/// it was open, probes still running are not waited for, and every report says so.
fn cut_short(w: &mut Window<'_, '_>, ifaces: &mut [Target], progress: &dyn Progress) {
    let asked = w.duration;
    w.duration = w.started.elapsed();
    w.pool.cut_short(w.end() + AFTER_WINDOW);
    let observed = format!("{:.1} s", w.duration.as_secs_f64());
    progress.step(&format!(
        "interrupted: reporting the {observed} observed (Ctrl-C again stops with no report)"
    ));
    note_all(
        ifaces,
        &format!(
            "the observation was ended early (Ctrl-C) after {observed} of the {} asked: its \
             figures are over {observed}",
            humantime::format_duration(asked)
        ),
    );
}

/// A gateway's clients may leave by another uplink than the default route's: the window
/// so far says which, for a tunnel the data plane watches.
fn uplinks(w: &Window<'_, '_>, t: &Target) -> bool {
    w.gateway && t.has_dataplane && underlay::is_tunnel_kind(&t.me.kind)
}

/// One look at the window so far, for every interface.
async fn look(
    w: &mut Window<'_, '_>,
    ifaces: &mut [Target],
    starts: &[build::Readings],
    probes: &mut [Probes],
    probing: bool,
    progress: &dyn Progress,
) -> Result<(), Error> {
    let so_far = w.so_far()?;
    let rows = match (w.sockets, &w.baseline) {
        (Some(s), Some(b)) => Some(b.peek(s, w.started.elapsed().as_secs_f64())?),
        _ => None,
    };
    let empty = Snapshot::default();
    for ((t, start), probes) in ifaces.iter_mut().zip(starts).zip(probes.iter_mut()) {
        let uplinks = uplinks(w, t);
        if !probing && !uplinks {
            continue;
        }
        let look = build::Observation {
            me: &t.me,
            details: &t.details,
            all: w.all,
            tun: &t.tun,
            underlay: &t.underlay,
            window: if t.has_dataplane { &so_far } else { &empty },
            sockets: rows.as_deref(),
            start,
            end: start,
            elapsed: w.started.elapsed(),
            firewall: &Ruleset::default(),
            routes: w.routes,
        };
        let facts = look.provisional().await?;
        if probing {
            let aims = targets::probe_targets(&facts, &t.underlay, &t.me);
            probes.start(&mut w.pool, aims, progress);
        }
        if let Some(dp) = w.dp.as_mut().filter(|_| uplinks) {
            let wanted = watch::also_watch(
                &t.me,
                &t.underlay,
                w.routes,
                w.all,
                w.gateway,
                &facts.nat.uplinks,
            );
            signals::watch_more(dp, &mut t.also, &mut w.attached, wanted, &mut t.notes);
        }
    }
    Ok(())
}

/// The firewall rules, with a note on every interface for each part that was not read.
fn firewall_noted(ifaces: &mut [Target]) -> Ruleset {
    let firewall = Ruleset::read();
    for e in &firewall.errors {
        note_all(
            ifaces,
            &format!(
                "firewall rules partly unread ({e}): NAT and MSS clamping rules there are not seen"
            ),
        );
    }
    firewall
}

/// What the closed window gave: its counts, and per interface its facts with its
/// readings at the start and the end.
struct Observed {
    window: Snapshot,
    elapsed: Duration,
    facts: Vec<Facts>,
    ends: Vec<build::Readings>,
    /// How every path-MTU probe ended.
    probes: Outcomes,
}

/// Closes the window (the data plane detached before the peers are read again, so a
/// handshake response it counted is already in their state) and builds every interface's
/// facts, each waiting for its handshakes in flight until the same deadline.
async fn close(
    w: Window<'_, '_>,
    ifaces: &mut [Target],
    starts: &[build::Readings],
    drops: Option<&crate::kernel::drops::DropProbe<'_>>,
) -> Result<Observed, Error> {
    let elapsed = w.started.elapsed();
    let deadline = w.end() + AFTER_WINDOW;
    if let Some(lost) = w.sockets.map(SocketProbes::lost_events).filter(|l| *l > 0) {
        note_all(ifaces, &crate::kernel::sockets::lost_closes_note(lost));
    }
    let window = w.so_far()?;
    let Window {
        dp,
        all,
        routes,
        sockets,
        baseline,
        pool,
        ..
    } = w;
    drop(dp);
    let refreshed = join_all(
        ifaces
            .iter_mut()
            .map(|t| super::refresh_until(&t.tun, deadline, &mut t.notes)),
    )
    .await;
    let links = bond::counters().await.unwrap_or_default();
    let ends = refreshed
        .iter()
        .map(|tun| Ok(build::Readings::take(tun, drops)?.with_links(links.clone())))
        .collect::<Result<Vec<_>, Error>>()?;
    let socket_rows = match (sockets, &baseline) {
        (Some(s), Some(b)) => Some(b.close(s, elapsed.as_secs_f64())?.0),
        _ => None,
    };
    let firewall = firewall_noted(ifaces);
    let empty = Snapshot::default();
    let built = join_all(
        ifaces
            .iter()
            .zip(starts)
            .zip(&ends)
            .map(|((t, start), end)| {
                let observation = build::Observation {
                    me: &t.me,
                    details: &t.details,
                    all,
                    tun: &t.tun,
                    underlay: &t.underlay,
                    window: if t.has_dataplane { &window } else { &empty },
                    sockets: socket_rows.as_deref(),
                    start,
                    end,
                    elapsed,
                    firewall: &firewall,
                    routes,
                };
                async move {
                    let facts = observation.facts(deadline).await;
                    (facts, observation.cpu_notes())
                }
            }),
    )
    .await;
    Ok(Observed {
        window,
        elapsed,
        facts: with_cpu_notes(built, ifaces)?,
        ends,
        probes: pool.finish(),
    })
}

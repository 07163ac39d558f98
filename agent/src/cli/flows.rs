//! `netdoctor flows IFACE`: attach, observe, report flows and counters.

use std::io::IsTerminal;
use std::mem::MaybeUninit;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use super::flows_report::{FlowsReport, TunnelPeers};
use super::shutdown::Interrupts;
use super::{output, FlowsArgs};
use crate::config::iface::{self, Interface};
use crate::config::{link, tunnel};
use crate::facts::underlay;
use crate::kernel::packet::Dataplane;
use crate::kernel::sockets::rates::Baseline;
use crate::kernel::sockets::SocketProbes;

pub(super) async fn run(args: FlowsArgs, interrupts: Interrupts) -> anyhow::Result<ExitCode> {
    let options = args.dataplane.options()?;
    let iface = iface::by_name(&args.interface).await?;
    let mut socket_storage = MaybeUninit::uninit();
    let probes = match SocketProbes::load(&mut socket_storage) {
        Ok(p) => {
            for what in p.signals().missing() {
                tracing::warn!("{what} on this kernel");
            }
            Some(p)
        }
        Err(e) => {
            tracing::warn!("socket telemetry unavailable ({e}); reporting packets only");
            None
        }
    };
    // After the sockets: whether they loaded decides how local connections are accounted.
    let options = crate::diagnose::signals::with_sockets(options, probes.as_ref());
    let mut storage = MaybeUninit::uninit();
    let mut dp = Dataplane::load(&mut storage, options)?;
    let hooks = dp.attach(&iface.target())?;
    watch_underlays(&mut dp, &iface).await;
    // The window starts with the socket baseline: announce it only once that is taken.
    let baseline = probes.as_ref().map(Baseline::take).transpose()?;
    eprintln!(
        "netdoctor: watching {} ({}, MTU {}; ingress {}, egress {}) for {}; Ctrl-C stops early",
        iface.name,
        iface.kind,
        iface.mtu,
        hooks.ingress,
        hooks.egress,
        humantime::format_duration(args.duration)
    );
    let started = Instant::now();
    observe(args.duration, &interrupts, || {
        if let Some(p) = &probes {
            if let Err(e) = p.poll_closed() {
                tracing::warn!("reading close events: {e}");
            }
        }
    })
    .await;
    let sockets = probes.as_ref().zip(baseline.as_ref());
    let mut report = FlowsReport::collect(&dp, sockets, iface, hooks, started.elapsed(), args.top)?;
    drop(dp);
    report.tunnel = TunnelPeers::read(&report.interface).await;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        output::print_flows(&report);
    }
    Ok(ExitCode::SUCCESS)
}

/// Watches the underlays of a WireGuard interface too: its peers' path (loss, round trips)
/// is measured there. One that cannot be watched is named, and its peers' path is not shown.
async fn watch_underlays(dp: &mut Dataplane<'_>, iface: &Interface) {
    let Ok(details) = link::details(iface.index).await else {
        return;
    };
    let tun = tunnel::identify(iface, &details).await;
    if tun.encap != Some(crate::kernel::views::Encap::Wireguard) {
        return;
    }
    let all = iface::list().await.unwrap_or_default();
    let under = underlay::underlay(&tun, &details, &all).await;
    for u in under.watch.iter().filter(|u| u.index != iface.index) {
        if let Err(e) = dp.attach(&u.target()) {
            tracing::warn!(
                "could not watch the underlay {} (the peers' path is not measured there): {e}",
                u.name
            );
        }
    }
}

/// Waits for `duration` or Ctrl-C (the first SIGINT, which then does not stop the command),
/// calling `every_100ms` meanwhile (to drain event rings) and showing the time left when
/// stderr is a terminal.
pub(super) async fn observe(
    duration: Duration,
    interrupts: &Interrupts,
    mut every_100ms: impl FnMut(),
) {
    let tty = std::io::stderr().is_terminal();
    let deadline = tokio::time::Instant::now() + duration;
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    let mut ticks = 0u64;
    let stop_early = interrupts.stop_early();
    tokio::pin!(stop_early);
    loop {
        tokio::select! {
            _ = tokio::time::sleep_until(deadline) => break,
            _ = &mut stop_early => {
                eprintln!("\nnetdoctor: interrupted; reporting what was seen so far");
                break;
            }
            _ = tick.tick() => {
                every_100ms();
                ticks += 1;
                if tty && ticks % 10 == 1 {
                    let left = deadline.saturating_duration_since(tokio::time::Instant::now());
                    eprint!("\r  {}s left ", left.as_secs());
                }
            }
        }
    }
    if tty {
        eprint!("\r            \r");
    }
}

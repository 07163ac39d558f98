//! `netdoctor agent`: the always-on daemon. A monitor, on a thread of its own, owns the BPF
//! programs and evaluates every watched interface each interval (the same collectors and
//! rules as `diagnose`); the HTTP server (`api`) answers from what the monitor published
//! and from the SQLite history ([`store`]).
//!
//! Data flows one way: kernel → monitor → the shared view (`state`) and the store → API,
//! metrics and dashboard.

pub(crate) mod api;
pub(crate) mod config;
mod links;
pub(crate) mod metrics;
pub(crate) mod monitor;
pub(crate) mod select;
pub(crate) mod server;
pub(crate) mod state;
pub mod store;
pub(crate) mod timeline;
pub(crate) mod token;

use std::mem::MaybeUninit;
use std::sync::Arc;

use tokio::sync::watch;

use crate::daemon::store::{Retention, Store};
use crate::kernel::packet::{Dataplane, Options};
use crate::kernel::sockets::SocketProbes;
use crate::rules::RuleSet;
use config::Config;
use state::Shared;

/// How long requests in flight may run on after SIGTERM.
const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

/// Runs the agent until SIGTERM or SIGINT.
pub async fn run(config: Config, dataplane: Options) -> anyhow::Result<()> {
    let rules = RuleSet::load(config.rules.as_deref())?;
    let store = Store::open_with(
        &config.database,
        Retention {
            max_age: config.retention,
            max_rows: config.retention_rows,
        },
        config.database_access,
    )
    .map_err(anyhow::Error::from)?;
    // Connections may use only their share of the descriptors: the monitor's are kept.
    let descriptors = server::descriptors::raise_and_share()?;
    // Bind before loading anything, so a port in use fails fast and clearly.
    let listener = server::listen(config.listen)
        .map_err(|e| anyhow::anyhow!("listening on {}: {e}", config.listen))?;

    let listen = config.listen;
    let shared = Arc::new(Shared::new(config, Arc::new(store))?);
    let (stop_tx, stop_rx) = watch::channel(false);
    let monitor = spawn_monitor(shared.clone(), rules, dataplane, stop_rx.clone()).await?;

    let app = crate::daemon::api::router(shared.clone())?;
    let limits = server::Limits {
        connections: descriptors.connections,
        header_read_timeout: server::HEADER_READ_TIMEOUT,
    };
    let mut server_deadline = stop_rx.clone();
    let server = server::serve(listener, app, limits, stop_rx.clone());
    // Requests in flight (a diagnosis runs up to a minute) get a short grace period, so a
    // stop never outlasts the usual service-manager timeouts.
    let server = async move {
        tokio::select! {
            () = server => {}
            () = async {
                let _ = server_deadline.changed().await;
                tokio::time::sleep(SHUTDOWN_GRACE).await;
            } => {
                tracing::warn!("requests still running after {}s: abandoned", SHUTDOWN_GRACE.as_secs());
            }
        }
    };
    tracing::info!(
        open_files = descriptors.limit,
        reserved = descriptors.reserve,
        connections = descriptors.connections,
        "serving the API, /metrics and the dashboard on http://{listen}/"
    );
    eprintln!(
        "netdoctor agent: serving http://{listen}/ (API under /api/v1/, metrics at /metrics)"
    );

    let signals = async move {
        let reason = shutdown_signal().await;
        tracing::info!("{reason}: shutting down");
        let _ = stop_tx.send(true);
    };
    let ((), ()) = tokio::join!(server, signals);
    // The monitor detaches everything as it returns.
    let monitored = tokio::task::spawn_blocking(move || monitor.join())
        .await?
        .map_err(|_| anyhow::anyhow!("the monitor thread panicked"))?;
    monitored?;
    tracing::info!("stopped");
    Ok(())
}

/// Loads the programs and runs the monitor on a thread of its own: the programs stay on
/// the thread that loaded them, and reading large maps never delays an API answer. Returns
/// once everything is loaded (or with the reason it could not be).
async fn spawn_monitor(
    shared: Arc<Shared>,
    rules: RuleSet,
    dataplane: Options,
    stop: watch::Receiver<bool>,
) -> anyhow::Result<std::thread::JoinHandle<anyhow::Result<()>>> {
    let (loaded_tx, loaded_rx) = tokio::sync::oneshot::channel::<anyhow::Result<()>>();
    let thread = std::thread::Builder::new()
        .name("monitor".into())
        .stack_size(crate::rules::EVAL_STACK_SIZE)
        .spawn(
        move || -> anyhow::Result<()> {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            runtime.block_on(async move {
                let mut dp_storage = MaybeUninit::uninit();
                let mut sock_storage = MaybeUninit::uninit();
                let mut drop_storage = MaybeUninit::uninit();
                let loaded = {
                    let mut notes = Vec::new();
                    // Every program is optional: without the data plane the agent still
                    // serves configuration, sockets and drops.
                    // Sockets first: whether they load decides how local connections
                    // are accounted.
                    let (sockets, drops) = crate::diagnose::signals::load_probes(
                        &mut sock_storage,
                        &mut drop_storage,
                        &mut notes,
                    );
                    let mut dataplane =
                        crate::diagnose::signals::with_sockets(dataplane, sockets.as_ref());
                    // The monitor closes a window every interval.
                    dataplane.windows = true;
                    let dp = match Dataplane::load(&mut dp_storage, dataplane) {
                        Ok(dp) => Some(dp),
                        Err(e) => {
                            crate::diagnose::signals::note(&mut notes, format!("packet data plane unavailable ({e}): traffic counters, flows and measured overhead are not observed"));
                            None
                        }
                    };
                    let packet = dp.is_some();
                    let sig = sockets
                        .as_ref()
                        .map(SocketProbes::signals)
                        .unwrap_or_default();
                    let mut view = shared.view_mut();
                    view.health.notes = notes;
                    view.health.programs_loaded = [
                        ("nd_tc_ingress", packet),
                        ("nd_tc_egress", packet),
                        ("nd_xdp_ingress", packet),
                        ("nd_iter_tcp", sig.snapshots),
                        ("nd_tcp_retransmit", sig.retransmits),
                        ("nd_sock_state", sig.lifecycle),
                        ("nd_kfree_skb", drops.is_some()),
                    ]
                    .into_iter()
                    .map(|(p, l)| (p.to_owned(), l))
                    .collect();
                    drop(view);
                    monitor::Monitor::new(shared.clone(), rules, dp, sockets, drops)
                };
                match loaded {
                    Ok(monitor) => {
                        let _ = loaded_tx.send(Ok(()));
                        monitor.run(stop).await
                    }
                    Err(e) => {
                        let _ = loaded_tx.send(Err(e));
                        Ok(())
                    }
                }
            })
        },
    )?;
    loaded_rx
        .await
        .map_err(|_| anyhow::anyhow!("the monitor thread ended while loading"))??;
    Ok(thread)
}

/// Waits for SIGTERM or SIGINT and names it.
async fn shutdown_signal() -> &'static str {
    use tokio::signal::unix::{signal, SignalKind};
    let term = signal(SignalKind::terminate());
    let int = signal(SignalKind::interrupt());
    match (term, int) {
        (Ok(mut term), Ok(mut int)) => tokio::select! {
            _ = term.recv() => "SIGTERM",
            _ = int.recv() => "SIGINT",
        },
        _ => {
            let _ = tokio::signal::ctrl_c().await;
            "SIGINT"
        }
    }
}

//! `netdoctor agent`: the always-on daemon. A monitor owns the BPF programs and evaluates
//! every watched interface each interval (the same collectors and rules as `diagnose`);
//! the HTTP server ([`crate::api`]) answers from what the monitor published and from the
//! SQLite history ([`crate::store`]).
//!
//! Data flows one way: kernel → monitor → [`state::View`] and the store → API, metrics
//! and dashboard.

pub mod config;
mod links;
pub mod monitor;
pub mod select;
pub mod state;

use std::mem::MaybeUninit;
use std::sync::Arc;

use tokio::sync::watch;

use crate::dataplane::{Dataplane, Options};
use crate::drops::DropProbe;
use crate::rules::RuleSet;
use crate::sockets::SocketProbes;
use crate::store::{Retention, Store};
use config::Config;
use state::Shared;

/// How long requests in flight may run on after SIGTERM.
const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

/// Runs the agent until SIGTERM or SIGINT.
pub async fn run(config: Config, dataplane: Options) -> anyhow::Result<()> {
    let rules = RuleSet::load(config.rules.as_deref())?;
    let store = Store::open(
        &config.database,
        Retention {
            max_age: config.retention,
            max_rows: config.retention_rows,
        },
    )
    .map_err(anyhow::Error::from)?;
    // Bind before loading anything, so a port in use fails fast and clearly.
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .map_err(|e| anyhow::anyhow!("listening on {}: {e}", config.listen))?;

    let mut dp_storage = MaybeUninit::uninit();
    let dp = Dataplane::load(&mut dp_storage, dataplane)?;
    let mut notes = Vec::new();
    let mut sock_storage = MaybeUninit::uninit();
    let sockets = match SocketProbes::load(&mut sock_storage) {
        Ok(s) => Some(s),
        Err(e) => {
            notes.push(format!("socket telemetry unavailable: {e}"));
            None
        }
    };
    let mut drop_storage = MaybeUninit::uninit();
    let drops = match DropProbe::load(&mut drop_storage) {
        Ok(Some(d)) => Some(d),
        Ok(None) => {
            notes.push("this kernel has no kfree_skb BTF tracepoint: no drop reasons".into());
            None
        }
        Err(e) => {
            notes.push(format!("drop reasons unavailable: {e}"));
            None
        }
    };
    for n in &notes {
        tracing::warn!("{n}");
    }

    let listen = config.listen;
    let shared = Arc::new(Shared::new(config, Arc::new(store))?);
    shared.view_mut().health.notes = notes;
    let monitor = monitor::Monitor::new(shared.clone(), rules, dp, sockets, drops)?;
    let (stop_tx, stop_rx) = watch::channel(false);

    let app = crate::api::router(shared.clone())?;
    let mut server_stop = stop_rx.clone();
    let mut server_deadline = stop_rx.clone();
    let server = axum::serve(listener, app).with_graceful_shutdown(async move {
        let _ = server_stop.changed().await;
    });
    // Requests in flight (a diagnosis runs up to a minute) get a short grace period, so a
    // stop never outlasts the usual service-manager timeouts.
    let server = async move {
        tokio::select! {
            served = server => served,
            () = async {
                let _ = server_deadline.changed().await;
                tokio::time::sleep(SHUTDOWN_GRACE).await;
            } => {
                tracing::warn!("requests still running after {}s: abandoned", SHUTDOWN_GRACE.as_secs());
                Ok(())
            }
        }
    };
    tracing::info!("serving the API, /metrics and the dashboard on http://{listen}/");
    eprintln!(
        "netdoctor agent: serving http://{listen}/ (API under /api/v1/, metrics at /metrics)"
    );

    let signals = async move {
        let reason = shutdown_signal().await;
        tracing::info!("{reason}: shutting down");
        let _ = stop_tx.send(true);
    };
    let (monitored, served, ()) = tokio::join!(monitor.run(stop_rx), server, signals);
    monitored?;
    served.map_err(|e| anyhow::anyhow!("HTTP server: {e}"))?;
    tracing::info!("stopped");
    Ok(())
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

//! `POST /api/v1/diagnose/{iface}`: the CLI's diagnosis, with the same JSON.

use std::time::Duration;

use axum::extract::rejection::PathRejection;
use axum::extract::{Path, RawQuery, State};
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{json, Value};

use super::error::ApiError;
use super::params::{path_text, Params};
use super::AppState;
use crate::diagnose::{self, DiagnoseOptions, Progress};
use crate::kernel::packet::Options;

/// Routes of this module.
pub fn router() -> Router<AppState> {
    Router::new().route("/diagnose/{iface}", post(run))
}

struct Log;

impl Progress for Log {
    fn step(&self, message: &str) {
        tracing::info!("diagnose: {message}");
    }
}

async fn run(
    State(state): State<AppState>,
    iface: Result<Path<String>, PathRejection>,
    RawQuery(query): RawQuery,
) -> Result<Json<Value>, ApiError> {
    let iface = path_text(iface, "iface")?;
    let p = Params::parse(query.as_deref(), &["duration", "probe"])?;
    let duration = match p.text("duration") {
        None => Duration::from_secs(5),
        Some(d) => crate::duration::parse(&d, crate::duration::MINUTE)
            .map_err(|e| e.to_string())
            .and_then(|d| {
                (d >= Duration::from_secs(1))
                    .then_some(d)
                    .ok_or_else(|| format!("{d:?} is shorter than 1s"))
            })
            .map_err(|e| {
                ApiError::bad(
                    "duration",
                    format!("{e}; expected 1 to 60 seconds, e.g. 5 or 5s"),
                )
            })?,
    };
    let probe = p.flag("probe", true)?;
    if crate::config::iface::by_name(&iface).await.is_err() {
        return Err(ApiError::UnknownInterface(iface));
    }
    // The slot is held by the diagnosis itself, not by this request: a client that goes
    // away leaves the diagnosis running on its thread, and the next one waits for it.
    let permit = state
        .diagnosing
        .clone()
        .try_acquire_owned()
        .map_err(|_| ApiError::Busy)?;
    let opts = DiagnoseOptions {
        duration,
        probe,
        rules_dir: state.shared.config.rules.clone(),
        dataplane: Options::default(),
    };
    // The diagnosis loads its own programs, which live on one thread: give it one.
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("diagnose".into())
        .stack_size(crate::rules::EVAL_STACK_SIZE)
        .spawn(move || {
            let result = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| ApiError::Internal(format!("starting the diagnosis: {e}")))
                .and_then(|rt| {
                    rt.block_on(diagnose::diagnose(&iface, &opts, &Log))
                        .map_err(|e| match e.unknown_interface() {
                            Some(name) => ApiError::UnknownInterface(name.to_owned()),
                            None => ApiError::Internal(format!("diagnosis failed: {e}")),
                        })
                });
            // Free before answering, so the client may start the next one at once.
            drop(permit);
            let _ = tx.send(result);
        })
        .map_err(|e| ApiError::Internal(format!("starting the diagnosis: {e}")))?;
    let report = rx
        .await
        .map_err(|_| ApiError::Internal("the diagnosis ended without a report".into()))??;
    Ok(Json(json!(report)))
}

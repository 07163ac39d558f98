//! Helpers shared by the lifecycle tests: the clock, lookups in API replies and metrics,
//! and the agent's database opened after it stopped.

use std::path::Path;

use ::netdoctor::daemon::store::Store;
use anyhow::{bail, Context, Result};
use netdoctor_lab::agent::{self, Agent, Reply};
use serde_json::Value;

pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// The items of a findings page with id `id`.
pub(crate) fn with_id<'a>(r: &'a Reply, id: &str) -> Vec<&'a Value> {
    r.items().iter().filter(|f| f["id"] == id).collect()
}

/// The entry `name` of `/api/v1/interfaces`, if listed.
pub(crate) fn listed<'a>(r: &'a Reply, name: &str) -> Option<&'a Value> {
    r.json["interfaces"]
        .as_array()?
        .iter()
        .find(|i| i["name"] == name)
}

/// Value of `netdoctor_finding_active` for (`id`, `interface`), if exported.
pub(crate) fn finding_metric(
    agent: &Agent,
    id: &str,
    interface: &str,
) -> Result<Option<(f64, String)>> {
    let samples = agent::parse_metrics(&agent.metrics()?)?;
    let found = agent::find_metric(
        &samples,
        "netdoctor_finding_active",
        &[("id", id), ("interface", interface)],
    );
    Ok(match found.as_slice() {
        [] => None,
        [m] => Some((
            m.value,
            m.labels.get("severity").cloned().unwrap_or_default(),
        )),
        more => bail!("several netdoctor_finding_active samples for {id} on {interface}: {more:?}"),
    })
}

pub(crate) fn open_store(path: &Path) -> Result<Store> {
    Store::open(path, ::netdoctor::daemon::store::Retention::default())
        .with_context(|| format!("opening {} after the agent died", path.display()))
}

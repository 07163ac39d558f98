//! Reading the Grafana dashboard (`dashboard/grafana/netdoctor.json`): its template
//! variables and every panel target's PromQL, with Grafana's variables replaced so the
//! queries can run against a real Prometheus.
//!
//! ```no_run
//! use std::time::Duration;
//! use netdoctor_lab::grafana::{Dashboard, Substitutions};
//! use netdoctor_lab::prometheus::{Prometheus, PrometheusConfig};
//!
//! # fn main() -> anyhow::Result<()> {
//! let dashboard = Dashboard::load_default()?;
//! let subst = Substitutions {
//!     interface: "wg0|eth0".to_owned(),
//!     ..Substitutions::default()
//! };
//! let prom = Prometheus::start(&PrometheusConfig::default())?;
//! for q in dashboard.queries(&subst)? {
//!     let series = prom.query(&q.expr)?;
//!     println!("{} / {}: {} series", q.panel_title, q.ref_id, series.len());
//! }
//! # Ok(())
//! # }
//! ```

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde_json::Value;

use crate::prometheus::{prom_duration, repo_root};

/// The dashboard file, relative to the repository root.
pub const DASHBOARD: &str = "dashboard/grafana/netdoctor.json";

/// The data-source UID every panel and target must use: the `datasource` variable.
pub const DATASOURCE_UID: &str = "${datasource}";

/// `dashboard/grafana/netdoctor.json` in this repository.
pub fn dashboard_path() -> PathBuf {
    repo_root().join(DASHBOARD)
}

/// A template variable (`templating.list[]`).
#[derive(Debug, Clone, PartialEq)]
pub struct Variable {
    /// Its name (`$name` in queries).
    pub name: String,
    /// Its type: `datasource`, `query`, `custom`, `interval`, ...
    pub kind: String,
    /// The query: a plain string, or `query.query` of the Prometheus variable editor's
    /// object form; for a `datasource` variable the plugin type (`prometheus`).
    pub query: String,
    /// `definition`, the query as the editor shows it (empty if absent).
    pub definition: String,
    /// The variable's own data source (`{"type": ..., "uid": ...}`), if set.
    pub datasource: Option<Value>,
    /// Several values may be selected.
    pub multi: bool,
    /// An "All" option exists.
    pub include_all: bool,
    /// The value "All" stands for (`allValue`), if set.
    pub all_value: Option<String>,
}

/// One query of one panel (`panels[].targets[]`, rows' nested panels included).
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    /// The panel's id.
    pub panel_id: i64,
    /// The panel's title.
    pub panel_title: String,
    /// The panel's type (`timeseries`, `stat`, `table`, ...).
    pub panel_type: String,
    /// The panel's data source, if set.
    pub panel_datasource: Option<Value>,
    /// The target's `refId` (`A`, `B`, ...).
    pub ref_id: String,
    /// The PromQL as written, with Grafana variables.
    pub expr: String,
    /// The target's data source, if set.
    pub datasource: Option<Value>,
    /// An instant query (`instant: true` and not `range: true`).
    pub instant: bool,
}

impl Target {
    /// The target's data-source UID (`datasource.uid`), if set.
    pub fn datasource_uid(&self) -> Option<&str> {
        self.datasource.as_ref()?.get("uid")?.as_str()
    }

    /// The panel's data-source UID, if set.
    pub fn panel_datasource_uid(&self) -> Option<&str> {
        self.panel_datasource.as_ref()?.get("uid")?.as_str()
    }
}

/// A target's PromQL with every variable replaced: ready for `/api/v1/query`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    /// The panel's title.
    pub panel_title: String,
    /// The target's `refId`.
    pub ref_id: String,
    /// The expression after substitution.
    pub expr: String,
    /// An instant query in Grafana (otherwise a range query).
    pub instant: bool,
}

/// What Grafana's variables become.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Substitutions {
    /// `$instance` (same forms as `interface`): a regex of Prometheus target instances.
    pub instance: String,
    /// `$interface`, `${interface}`, `${interface:regex}`, `[[interface]]`: a regex, as
    /// Grafana renders a multi-value variable inside `=~"..."` (`.*` is "All", as the
    /// dashboard's `allValue`; `wg0|eth0` two interfaces).
    pub interface: String,
    /// `$__rate_interval`.
    pub rate_interval: Duration,
    /// `$__interval` (and `$__interval_ms`).
    pub interval: Duration,
    /// `$__range` (and `$__range_s`, `$__range_ms`): the dashboard's time range.
    pub range: Duration,
}

impl Default for Substitutions {
    /// All instances and interfaces, 1m rate interval, 15s interval, 1h range.
    fn default() -> Self {
        Substitutions {
            instance: ".*".to_owned(),
            interface: ".*".to_owned(),
            rate_interval: Duration::from_secs(60),
            interval: Duration::from_secs(15),
            range: Duration::from_secs(3600),
        }
    }
}

/// Replaces Grafana variables in `expr`: `$name`, `${name}`, `${name:format}` and
/// `[[name]]` for `instance`, `interface`, `__rate_interval`, `__interval`, `__interval_ms`,
/// `__range`, `__range_s` and `__range_ms`. A `$` not followed by a name (a regex anchor
/// such as `"eth0$"`) is left alone.
///
/// Errors on any other variable, so no `$something` reaches Prometheus unnoticed.
pub fn substitute(expr: &str, subst: &Substitutions) -> Result<String> {
    let value = |name: &str| -> Result<String> {
        Ok(match name {
            "instance" => subst.instance.clone(),
            "interface" => subst.interface.clone(),
            "__rate_interval" => prom_duration(subst.rate_interval),
            "__interval" => prom_duration(subst.interval),
            "__interval_ms" => subst.interval.as_millis().to_string(),
            "__range" => prom_duration(subst.range),
            "__range_s" => subst.range.as_secs().to_string(),
            "__range_ms" => subst.range.as_millis().to_string(),
            other => bail!("unknown Grafana variable ${other} in {expr:?}"),
        })
    };
    let is_name = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut out = String::with_capacity(expr.len());
    let mut rest = expr;
    while let Some(pos) = rest.find(['$', '[']) {
        out.push_str(&rest[..pos]);
        let tail = &rest[pos..];
        if let Some(inner) = tail.strip_prefix("${") {
            let end = inner
                .find('}')
                .with_context(|| format!("unterminated ${{ in {expr:?}"))?;
            let name = inner[..end].split(':').next().unwrap_or_default();
            out.push_str(&value(name)?);
            rest = &inner[end + 1..];
        } else if let Some(inner) = tail.strip_prefix("[[") {
            match inner.find("]]") {
                Some(end) if !inner[..end].is_empty() && inner[..end].chars().all(is_name) => {
                    out.push_str(&value(&inner[..end])?);
                    rest = &inner[end + 2..];
                }
                _ => {
                    out.push('[');
                    rest = &tail[1..];
                }
            }
        } else if let Some(inner) = tail.strip_prefix('$') {
            let len = inner.find(|c: char| !is_name(c)).unwrap_or(inner.len());
            if len == 0 {
                out.push('$');
            } else {
                out.push_str(&value(&inner[..len])?);
            }
            rest = &inner[len..];
        } else {
            // A lone '[' (a range selector such as `[5m]`).
            out.push('[');
            rest = &tail[1..];
        }
    }
    out.push_str(rest);
    Ok(out)
}

/// A parsed dashboard.
#[derive(Debug, Clone)]
pub struct Dashboard {
    json: Value,
}

impl Dashboard {
    /// Parses dashboard JSON.
    ///
    /// Errors when it is not JSON or has no `panels` array.
    pub fn parse(text: &str) -> Result<Dashboard> {
        let json: Value = serde_json::from_str(text).context("the dashboard is not valid JSON")?;
        if !json["panels"].is_array() {
            bail!("the dashboard has no `panels` array");
        }
        Ok(Dashboard { json })
    }

    /// Reads and parses the dashboard at `path`.
    pub fn load(path: &Path) -> Result<Dashboard> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        Dashboard::parse(&text).with_context(|| format!("parsing {}", path.display()))
    }

    /// Reads this repository's dashboard ([`dashboard_path`]).
    pub fn load_default() -> Result<Dashboard> {
        Dashboard::load(&dashboard_path())
    }

    /// The whole JSON document.
    pub fn json(&self) -> &Value {
        &self.json
    }

    /// `templating.list`, in order.
    pub fn variables(&self) -> Vec<Variable> {
        let Some(list) = self.json["templating"]["list"].as_array() else {
            return Vec::new();
        };
        list.iter()
            .map(|v| Variable {
                name: text(&v["name"]),
                kind: text(&v["type"]),
                query: match &v["query"] {
                    Value::Object(o) => o.get("query").map(text).unwrap_or_default(),
                    other => text(other),
                },
                definition: text(&v["definition"]),
                datasource: v.get("datasource").filter(|d| !d.is_null()).cloned(),
                multi: v["multi"].as_bool().unwrap_or(false),
                include_all: v["includeAll"].as_bool().unwrap_or(false),
                all_value: v["allValue"].as_str().map(str::to_owned),
            })
            .collect()
    }

    /// The variable named `name`.
    pub fn variable(&self, name: &str) -> Option<Variable> {
        self.variables().into_iter().find(|v| v.name == name)
    }

    /// Every panel, depth first: top-level panels and rows, then the panels nested in
    /// each (collapsed) row right after it.
    pub fn panels(&self) -> Vec<&Value> {
        fn walk<'a>(panels: &'a Value, out: &mut Vec<&'a Value>) {
            for p in panels.as_array().into_iter().flatten() {
                out.push(p);
                walk(&p["panels"], out);
            }
        }
        let mut out = Vec::new();
        walk(&self.json["panels"], &mut out);
        out
    }

    /// Every target of every panel that has an `expr` (nested panels included).
    pub fn targets(&self) -> Vec<Target> {
        let mut out = Vec::new();
        for panel in self.panels() {
            for t in panel["targets"].as_array().into_iter().flatten() {
                let Some(expr) = t["expr"].as_str() else {
                    continue;
                };
                out.push(Target {
                    panel_id: panel["id"].as_i64().unwrap_or(-1),
                    panel_title: text(&panel["title"]),
                    panel_type: text(&panel["type"]),
                    panel_datasource: panel.get("datasource").filter(|d| !d.is_null()).cloned(),
                    ref_id: text(&t["refId"]),
                    expr: expr.to_owned(),
                    datasource: t.get("datasource").filter(|d| !d.is_null()).cloned(),
                    instant: t["instant"].as_bool().unwrap_or(false)
                        && !t["range"].as_bool().unwrap_or(false),
                });
            }
        }
        out
    }

    /// Every target's PromQL with the variables replaced (see [`substitute`]).
    ///
    /// Errors name the panel and target of an expression using an unknown variable.
    pub fn queries(&self, subst: &Substitutions) -> Result<Vec<Query>> {
        self.targets()
            .into_iter()
            .map(|t| {
                Ok(Query {
                    expr: substitute(&t.expr, subst).with_context(|| {
                        format!("panel {:?} target {}", t.panel_title, t.ref_id)
                    })?,
                    panel_title: t.panel_title,
                    ref_id: t.ref_id,
                    instant: t.instant,
                })
            })
            .collect()
    }
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests;

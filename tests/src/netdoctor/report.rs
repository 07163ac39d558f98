//! The whole `--json` report: parsed, schema-checked, and asked for its parts.

use anyhow::{bail, Context, Result};
use serde::Deserialize;
use serde_json::Value;

use super::fields::{array_field, field, str_field, u64_field};
use super::records::{Flow, TooBig, Tunnel};
use super::DirCounters;

/// A parsed `netdoctor flows --json` document. Parsing checks every
/// documented key and type.
#[derive(Debug, Clone)]
pub struct Report {
    /// The raw document.
    pub json: Value,
    /// `counters.ingress`.
    pub ingress: DirCounters,
    /// `counters.egress`.
    pub egress: DirCounters,
    /// `flows`.
    pub flows: Vec<Flow>,
    /// `flows_total`.
    pub flows_total: u64,
    /// `tunnels`.
    pub tunnels: Vec<Tunnel>,
    /// `too_big`.
    pub too_big: Vec<TooBig>,
    /// `duration_s`.
    pub duration_s: f64,
}

impl Report {
    /// Parses and schema-checks netdoctor's JSON output.
    pub fn parse(stdout: &str) -> Result<Report> {
        let json: Value = serde_json::from_str(stdout)
            .with_context(|| format!("netdoctor output is not one JSON document: {stdout}"))?;
        let iface = field(&json, "interface")?;
        str_field(iface, "name")?;
        u64_field(iface, "index")?;
        u64_field(iface, "mtu")?;
        str_field(iface, "kind")?;
        str_field(iface, "link")?;
        field(iface, "up")?
            .as_bool()
            .context("interface.up is not a boolean")?;
        let hooks = field(&json, "hooks")?;
        for key in ["ingress", "egress", "method", "local_tcp"] {
            str_field(hooks, key)?;
        }
        let buckets = array_field(&json, "size_buckets")?;
        let counters = field(&json, "counters")?;
        let ingress = dir_counters(counters, "ingress")?;
        let egress = dir_counters(counters, "egress")?;
        for (dir, c) in [("ingress", &ingress), ("egress", &egress)] {
            if c.size_buckets.len() != buckets.len() {
                bail!(
                    "counters.{dir}.size_buckets has {} entries, size_buckets {} labels",
                    c.size_buckets.len(),
                    buckets.len()
                );
            }
        }
        let report = Report {
            ingress,
            egress,
            flows: array_field(&json, "flows")?
                .iter()
                .map(Flow::from_json)
                .collect::<Result<_>>()?,
            flows_total: u64_field(&json, "flows_total")?,
            tunnels: array_field(&json, "tunnels")?
                .iter()
                .map(Tunnel::from_json)
                .collect::<Result<_>>()?,
            too_big: array_field(&json, "too_big")?
                .iter()
                .map(TooBig::from_json)
                .collect::<Result<_>>()?,
            duration_s: field(&json, "duration_s")?
                .as_f64()
                .context("duration_s is not a number")?,
            json,
        };
        Ok(report)
    }

    /// `interface.<key>` as a string (name, kind, link).
    pub fn interface_str(&self, key: &str) -> Result<&str> {
        str_field(field(&self.json, "interface")?, key)
    }

    /// `interface.<key>` as a number (index, mtu).
    pub fn interface_u64(&self, key: &str) -> Result<u64> {
        u64_field(field(&self.json, "interface")?, key)
    }

    /// `hooks.<key>`.
    pub fn hook(&self, key: &str) -> Result<&str> {
        str_field(field(&self.json, "hooks")?, key)
    }

    /// The counters of `direction` ("ingress" or "egress").
    pub fn counters(&self, direction: &str) -> Result<&DirCounters> {
        match direction {
            "ingress" => Ok(&self.ingress),
            "egress" => Ok(&self.egress),
            other => bail!("no direction {other:?}"),
        }
    }

    /// All flows, one per line, for assertion messages.
    pub fn describe_flows(&self) -> String {
        self.flows
            .iter()
            .map(Flow::describe)
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// `counters.<dir>` as the agent's own type: every field required, each of its type.
fn dir_counters(counters: &Value, dir: &str) -> Result<DirCounters> {
    DirCounters::deserialize(field(counters, dir)?)
        .with_context(|| format!("counters.{dir} is not netdoctor's DirCounters"))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn counters_are_read_as_the_agent_writes_them_and_every_field_is_required() {
        let written = DirCounters {
            packets: 7,
            size_buckets: vec![1, 2, 3],
            local_tcp_max_segment_hits: 4,
            ..DirCounters::default()
        };
        let counters = json!({ "ingress": serde_json::to_value(&written).expect("serialize") });
        assert_eq!(
            dir_counters(&counters, "ingress").expect("read back"),
            written
        );

        let mut missing = counters.clone();
        missing["ingress"]
            .as_object_mut()
            .expect("an object")
            .remove("df_over_mtu");
        let e = format!(
            "{:#}",
            dir_counters(&missing, "ingress").expect_err("a missing field")
        );
        assert!(
            e.contains("counters.ingress") && e.contains("df_over_mtu"),
            "{e}"
        );
        let mut mistyped = counters;
        mistyped["ingress"]["packets"] = json!("7");
        let e = format!(
            "{:#}",
            dir_counters(&mistyped, "ingress").expect_err("a mistyped field")
        );
        assert!(e.contains("counters.ingress"), "{e}");
        assert!(dir_counters(&json!({}), "egress").is_err());
    }
}

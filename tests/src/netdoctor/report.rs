//! The whole `--json` report: parsed, schema-checked, and asked for its parts.

use anyhow::{bail, Context, Result};
use serde_json::Value;

use super::fields::{array_field, field, str_field, u64_field};
use super::records::{DirCounters, Flow, TooBig, Tunnel};

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
        let ingress = DirCounters::from_json(field(counters, "ingress")?)?;
        let egress = DirCounters::from_json(field(counters, "egress")?)?;
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

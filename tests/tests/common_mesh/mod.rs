//! Shared by `diagnose_tap_mesh.rs` and `seed_scenarios.rs`: running
//! `netdoctor diagnose IFACE --json` inside a lab namespace and reading its report, with
//! the documented top-level schema checked on every run.
//!
//! Each test binary uses a different subset of these helpers.
#![allow(dead_code)]

use std::process::Output;
use std::time::Duration;

use anyhow::{bail, ensure, Context, Result};
use netdoctor_lab::{ci, netdoctor, BgProcess, Netns};
use serde_json::Value;

/// Skip-or-fail gate of every lab test here: root, BPF, and `tools` on PATH.
pub fn lab_ready(tools: &[&str]) -> bool {
    ci::require_bpf_or_skip() && ci::require_tools_or_skip(tools)
}

/// Finding ids that are about the tunnel MTU.
pub const MTU_FINDINGS: &[&str] = &[
    "mtu.tunnel_exceeds_underlay",
    "mtu.tunnel_undersized",
    "mtu.underlay_fragmentation",
];

/// A parsed `netdoctor diagnose --json` report.
#[derive(Debug, Clone)]
pub struct Diagnosis {
    /// The whole document.
    pub json: Value,
    /// netdoctor's exit code.
    pub exit_code: i32,
    /// What netdoctor printed on stderr (progress lines).
    pub stderr: String,
}

fn severity_exit_code(severity: &str) -> Result<i32> {
    Ok(match severity {
        "info" => 0,
        "warning" => 1,
        "critical" => 2,
        other => bail!("unknown severity {other:?}"),
    })
}

impl Diagnosis {
    /// Parses netdoctor's output and checks the documented schema: `interface`, `kind`,
    /// `duration_s`, `facts.{iface,tunnel,peers,host,traffic,flows,drops,probe}`,
    /// `findings[]` (`id`, `severity`, `summary`, `fix`, `evidence`) and `notes[]`; the
    /// exit code must follow the worst severity (0 none/info, 1 warning, 2 critical).
    pub fn parse(iface: &str, out: &Output) -> Result<Diagnosis> {
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        let exit_code = out
            .status
            .code()
            .context("netdoctor was killed by a signal")?;
        let json: Value = serde_json::from_str(&stdout).with_context(|| {
            format!(
                "netdoctor diagnose {iface} (exit {exit_code}) printed no JSON report; \
                 stderr: {stderr} stdout: {stdout}"
            )
        })?;
        let d = Diagnosis {
            json,
            exit_code,
            stderr,
        };
        ensure!(
            d.str("/interface")? == iface,
            "report is about {:?}, not {iface}",
            d.str("/interface")?
        );
        d.str("/kind")?;
        d.f64("/duration_s")?;
        for key in [
            "iface", "tunnel", "peers", "host", "traffic", "flows", "drops", "probe",
        ] {
            d.at(&format!("/facts/{key}"))?;
        }
        ensure!(d.at("/notes")?.is_array(), "notes is not an array");
        let mut worst = 0;
        for f in d.findings()? {
            for key in ["id", "severity", "summary", "fix"] {
                f.get(key)
                    .and_then(Value::as_str)
                    .with_context(|| format!("finding without string {key:?}: {f}"))?;
            }
            ensure!(
                f.get("evidence").is_some_and(Value::is_object),
                "finding without evidence object: {f}"
            );
            let sev = f.get("severity").and_then(Value::as_str).unwrap_or("");
            worst = worst.max(severity_exit_code(sev)?);
        }
        ensure!(
            d.exit_code == worst,
            "exit code {} does not match the worst finding (expected {worst}): {}",
            d.exit_code,
            d.describe()
        );
        Ok(d)
    }

    /// The value at a JSON pointer (`/facts/tunnel/kind`).
    pub fn at(&self, pointer: &str) -> Result<&Value> {
        self.json
            .pointer(pointer)
            .with_context(|| format!("{pointer} missing in the report: {}", self.describe()))
    }

    /// A string at a JSON pointer.
    pub fn str(&self, pointer: &str) -> Result<&str> {
        self.at(pointer)?
            .as_str()
            .with_context(|| format!("{pointer} is not a string"))
    }

    /// An integer at a JSON pointer.
    pub fn i64(&self, pointer: &str) -> Result<i64> {
        self.at(pointer)?
            .as_i64()
            .with_context(|| format!("{pointer} is not an integer"))
    }

    /// A number at a JSON pointer.
    pub fn f64(&self, pointer: &str) -> Result<f64> {
        self.at(pointer)?
            .as_f64()
            .with_context(|| format!("{pointer} is not a number"))
    }

    /// A boolean at a JSON pointer.
    pub fn bool(&self, pointer: &str) -> Result<bool> {
        self.at(pointer)?
            .as_bool()
            .with_context(|| format!("{pointer} is not a boolean"))
    }

    /// `findings`.
    pub fn findings(&self) -> Result<&Vec<Value>> {
        self.json
            .get("findings")
            .and_then(Value::as_array)
            .context("findings is not an array")
    }

    /// Ids of all findings, in report order.
    pub fn ids(&self) -> Vec<String> {
        self.findings()
            .map(|fs| {
                fs.iter()
                    .filter_map(|f| f.get("id").and_then(Value::as_str))
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    }

    /// All findings with `id`.
    pub fn all(&self, id: &str) -> Vec<&Value> {
        self.findings()
            .map(|fs| {
                fs.iter()
                    .filter(|f| f.get("id").and_then(Value::as_str) == Some(id))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The single finding `id`; errors (with the whole report) if absent or repeated.
    pub fn finding(&self, id: &str) -> Result<&Value> {
        match self.all(id).as_slice() {
            [f] => Ok(f),
            other => bail!(
                "expected exactly one finding {id}, got {}: {}",
                other.len(),
                self.describe()
            ),
        }
    }

    /// Errors if any finding in `ids` is present.
    pub fn assert_none_of(&self, ids: &[&str]) -> Result<()> {
        let present: Vec<String> = self
            .ids()
            .into_iter()
            .filter(|i| ids.contains(&i.as_str()))
            .collect();
        ensure!(
            present.is_empty(),
            "unexpected findings {present:?}: {}",
            self.describe()
        );
        Ok(())
    }

    /// `facts.flows`.
    pub fn flows(&self) -> Result<&Vec<Value>> {
        self.at("/facts/flows")?
            .as_array()
            .context("facts.flows is not an array")
    }

    /// A compact description for assertion messages: findings with summary and fix, the
    /// tunnel facts, the flows, drops and notes.
    pub fn describe(&self) -> String {
        let findings: Vec<String> = self
            .json
            .get("findings")
            .and_then(Value::as_array)
            .map(|fs| {
                fs.iter()
                    .map(|f| {
                        format!(
                            "\n  [{}] {}: {} | fix: {}",
                            f.get("severity").and_then(Value::as_str).unwrap_or("?"),
                            f.get("id").and_then(Value::as_str).unwrap_or("?"),
                            f.get("summary").and_then(Value::as_str).unwrap_or("?"),
                            f.get("fix").and_then(Value::as_str).unwrap_or("?"),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        let part = |p: &str| {
            self.json
                .pointer(p)
                .map(ToString::to_string)
                .unwrap_or_else(|| "null".into())
        };
        format!(
            "exit {}; findings:{}\n tunnel: {}\n peers: {}\n traffic: {}\n flows: {}\n drops: {}\n probe: {}\n notes: {}\n stderr: {}",
            self.exit_code,
            if findings.is_empty() {
                " none".to_owned()
            } else {
                findings.concat()
            },
            part("/facts/tunnel"),
            part("/facts/peers"),
            part("/facts/traffic"),
            part("/facts/flows"),
            part("/facts/drops"),
            part("/facts/probe"),
            part("/notes"),
            self.stderr.trim()
        )
    }
}

/// Runs `netdoctor diagnose IFACE --json --duration DURATION [extra...]` inside `ns`
/// (netdoctor must see the interface, the tunnel daemon's sockets and the sysctls of that
/// namespace) and parses the report. Any exit code other than 0/1/2 is an error.
pub fn diagnose(ns: &Netns, iface: &str, duration: &str, extra: &[&str]) -> Result<Diagnosis> {
    let mut args = vec!["diagnose", iface, "--json", "--duration", duration];
    args.extend_from_slice(extra);
    let out = netdoctor::run(Some(ns), &args, Duration::from_secs(120))
        .with_context(|| format!("netdoctor diagnose {iface} in {}", ns.name()))?;
    let d = Diagnosis::parse(iface, &out)
        .with_context(|| format!("netdoctor diagnose {iface} in {}", ns.name()))?;
    println!(
        "netdoctor diagnose {iface} in {}: exit {}, findings {:?}",
        ns.name(),
        d.exit_code,
        d.ids()
    );
    Ok(d)
}

/// Joins a scoped thread, turning a panic into an error.
pub fn join<T>(handle: std::thread::ScopedJoinHandle<'_, Result<T>>, what: &str) -> Result<T> {
    match handle.join() {
        Ok(result) => result.with_context(|| what.to_owned()),
        Err(_) => bail!("thread {what} panicked"),
    }
}

/// Waits up to `timeout` until `ifname` exists in `ns` (a daemon creating its TUN/TAP),
/// failing early if `daemon` exits.
pub fn wait_for_link(
    ns: &Netns,
    ifname: &str,
    daemon: &mut BgProcess,
    timeout: Duration,
) -> Result<()> {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        let present = ns
            .output(&["ip", "link", "show", "dev", ifname])
            .map(|o| o.status.success())
            .unwrap_or(false);
        if present {
            return Ok(());
        }
        if let Some(status) = daemon.try_status()? {
            bail!(
                "`{}` exited ({status}) before creating {ifname}: {}{}",
                daemon.label(),
                daemon.stdout().unwrap_or_default().trim(),
                daemon.stderr().unwrap_or_default().trim()
            );
        }
        if std::time::Instant::now() >= deadline {
            bail!(
                "{ifname} did not appear in {} within {timeout:?}; `{}` says: {}{}",
                ns.name(),
                daemon.label(),
                daemon.stdout().unwrap_or_default().trim(),
                daemon.stderr().unwrap_or_default().trim()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `mtu N` as the fix text of the MTU rules writes it.
pub fn mtu_fix(iface: &str, mtu: i64) -> String {
    format!("ip link set dev {iface} mtu {mtu}")
}

//! A `netdoctor diagnose --json` report as the scenario tests read it: the documented
//! schema checked on every report, accessors for facts and findings, and the checks every
//! scenario makes (exit code from the worst finding, a healthy twin).
//!
//! ```no_run
//! use netdoctor_lab::{diagnosis::Diagnosis, netdoctor, Netns};
//! # fn main() -> anyhow::Result<()> {
//! # let ns = Netns::new()?;
//! let args = ["diagnose", "wg0", "--json"];
//! let out = netdoctor::run(Some(&ns), &args, std::time::Duration::from_secs(60))?;
//! let d = Diagnosis::from_output("diagnose wg0", &out)?;
//! d.check_exit_code()?;
//! let mtu = d.i64("/facts/tunnel/max_mtu")?;
//! # let _ = mtu;
//! # Ok(())
//! # }
//! ```

use std::process::Output;

use anyhow::{bail, ensure, Context, Result};
use serde_json::Value;

/// Sections of `facts` every report has.
const FACT_SECTIONS: [&str; 8] = [
    "iface", "tunnel", "peers", "host", "traffic", "flows", "drops", "probe",
];

/// A parsed report with the run's exit code and stderr.
#[derive(Debug, Clone)]
pub struct Diagnosis {
    /// What was run (for messages).
    pub label: String,
    /// Exit code: 0 nothing wrong (or info only), 1 warning, 2 critical, 3 unknown.
    pub code: i32,
    /// The whole document.
    pub json: Value,
    /// What netdoctor printed on stderr (progress lines, notes).
    pub stderr: String,
}

/// The exit code a finding of `severity` calls for (Nagios convention).
fn severity_code(severity: &str) -> Result<i32> {
    Ok(match severity {
        "info" => 0,
        "warning" => 1,
        "critical" => 2,
        other => bail!("unknown severity {other:?}"),
    })
}

fn str_or<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("?")
}

impl Diagnosis {
    /// Parses a report and checks the documented schema: `interface`, `kind` (strings),
    /// `duration_s` (number), `facts.{iface,tunnel,peers,host,traffic,flows,drops,probe}`
    /// (`peers` and `flows` arrays), `findings[]` (string `id`, `severity` of info, warning
    /// or critical, `summary` and `fix`; object `evidence`) and `notes[]` (strings). The
    /// exit code is not checked here (see [`Diagnosis::check_exit_code`]), so that tests of
    /// the checks themselves can build reports that break it.
    pub fn parse(label: impl Into<String>, code: i32, stdout: &str, stderr: &str) -> Result<Self> {
        let label = label.into();
        let json: Value = serde_json::from_str(stdout).with_context(|| {
            format!(
                "`{label}` (exit {code}) printed no JSON report; stderr: {} stdout: {}",
                stderr.trim(),
                stdout.trim()
            )
        })?;
        let d = Diagnosis {
            label,
            code,
            json,
            stderr: stderr.to_owned(),
        };
        d.check_schema()
            .with_context(|| format!("`{}`: the report breaks the schema", d.label))?;
        Ok(d)
    }

    /// [`Diagnosis::parse`] on a finished process's output; a process killed by a signal
    /// is an error.
    pub fn from_output(label: impl Into<String>, out: &Output) -> Result<Self> {
        let label = label.into();
        let code = out.status.code().with_context(|| {
            format!(
                "`{label}` was killed ({}); stderr: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            )
        })?;
        Diagnosis::parse(
            label,
            code,
            &String::from_utf8_lossy(&out.stdout),
            &String::from_utf8_lossy(&out.stderr),
        )
    }

    fn check_schema(&self) -> Result<()> {
        for key in [
            "interface",
            "kind",
            "duration_s",
            "facts",
            "findings",
            "notes",
        ] {
            ensure!(self.json.get(key).is_some(), "key {key:?} missing");
        }
        self.str("/interface")?;
        self.str("/kind")?;
        self.f64("/duration_s")?;
        for section in FACT_SECTIONS {
            self.at(&format!("/facts/{section}"))?;
        }
        for array in ["/facts/peers", "/facts/flows", "/findings", "/notes"] {
            ensure!(self.at(array)?.is_array(), "{array} is not an array");
        }
        for f in self.findings() {
            for key in ["id", "severity", "summary", "fix"] {
                f.get(key)
                    .and_then(Value::as_str)
                    .with_context(|| format!("finding without string {key:?}: {f}"))?;
            }
            severity_code(str_or(f, "severity"))?;
            ensure!(
                f.get("evidence").is_some_and(Value::is_object),
                "finding without evidence object: {f}"
            );
        }
        for n in self.findings_or_notes("notes") {
            ensure!(n.is_string(), "a note is not a string: {n}");
        }
        Ok(())
    }

    fn findings_or_notes(&self, key: &str) -> &[Value] {
        self.json
            .get(key)
            .and_then(Value::as_array)
            .map_or(&[], Vec::as_slice)
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

    /// A fact by dotted path, `tunnel.max_mtu` or `peers.0.path_mtu` (`null` when absent).
    pub fn fact(&self, path: &str) -> &Value {
        path.split('.')
            .fold(&self.json["facts"], |v, key| match key.parse::<usize>() {
                Ok(i) => &v[i],
                Err(_) => &v[key],
            })
    }

    /// `facts.flows`.
    pub fn flows(&self) -> &[Value] {
        self.fact("flows").as_array().map_or(&[], Vec::as_slice)
    }

    /// The local TCP connection that sent the most data (iperf3's data connection in a
    /// scenario under load).
    pub fn bulk_flow(&self) -> Result<&Value> {
        self.flows()
            .iter()
            .max_by_key(|f| f.get("data_segs_sent").and_then(Value::as_i64).unwrap_or(0))
            .with_context(|| {
                format!(
                    "no local TCP connection in the report:
{}",
                    self.describe()
                )
            })
    }

    /// The local TCP connections to `remote` (`ip:port`) that carried data (100 segments or
    /// more): a bulk tool's data connections, not its control connection.
    pub fn data_flows_to(&self, remote: &str) -> Vec<&Value> {
        self.flows()
            .iter()
            .filter(|f| {
                f["name"].as_str().and_then(|n| n.rsplit(" -> ").next()) == Some(remote)
                    && f["data_segs_sent"].as_i64().unwrap_or(0) >= 100
            })
            .collect()
    }

    /// There are `streams` data connections to `remote` and each was limited by `limit`
    /// (`receiver_window`, `congestion`, ...) at least half the time.
    pub fn expect_limited(&self, remote: &str, limit: &str, streams: usize) -> Result<()> {
        let flows = self.data_flows_to(remote);
        ensure!(
            flows.len() == streams,
            "{} data connections to {remote}, expected {streams}:\n{}",
            flows.len(),
            self.describe()
        );
        for f in flows {
            ensure!(
                f["limit"] == limit && f["limit_share"].as_f64() >= Some(0.5),
                "expected {limit} at least half the time: {f}\n{}",
                self.describe()
            );
        }
        Ok(())
    }

    /// Every finding, in report order.
    pub fn findings(&self) -> &[Value] {
        self.findings_or_notes("findings")
    }

    /// Ids of all findings, in report order.
    pub fn ids(&self) -> Vec<&str> {
        self.findings().iter().map(|f| str_or(f, "id")).collect()
    }

    /// All findings with `id` (a per-peer finding can repeat).
    pub fn all(&self, id: &str) -> Vec<&Value> {
        self.findings()
            .iter()
            .filter(|f| f.get("id").and_then(Value::as_str) == Some(id))
            .collect()
    }

    /// The single finding `id`; errors (with the whole report) if absent or repeated.
    pub fn finding(&self, id: &str) -> Result<&Value> {
        match self.all(id).as_slice() {
            [f] => Ok(f),
            other => bail!(
                "expected exactly one finding {id}, got {}:\n{}",
                other.len(),
                self.describe()
            ),
        }
    }

    /// The findings with `id`: at least one, all with `severity`. Returns the first.
    pub fn expect_finding(&self, id: &str, severity: &str) -> Result<&Value> {
        let found = self.all(id);
        let first = *found.first().with_context(|| {
            format!(
                "no finding {id} (got {:?}):\n{}",
                self.ids(),
                self.describe()
            )
        })?;
        for f in &found {
            let s = str_or(f, "severity");
            ensure!(
                s == severity,
                "{id} has severity {s}, expected {severity}:\n{}",
                self.describe()
            );
        }
        Ok(first)
    }

    /// Errors if any finding in `ids` is present.
    pub fn assert_none_of(&self, ids: &[&str]) -> Result<()> {
        let present: Vec<&str> = self.ids().into_iter().filter(|i| ids.contains(i)).collect();
        ensure!(
            present.is_empty(),
            "unexpected findings {present:?}:\n{}",
            self.describe()
        );
        Ok(())
    }

    /// Warning and critical findings.
    pub fn problems(&self) -> Vec<&Value> {
        self.findings()
            .iter()
            .filter(|f| matches!(str_or(f, "severity"), "warning" | "critical"))
            .collect()
    }

    /// The exit code the findings call for: the worst severity's.
    pub fn expected_code(&self) -> i32 {
        self.findings()
            .iter()
            .filter_map(|f| severity_code(str_or(f, "severity")).ok())
            .max()
            .unwrap_or(0)
    }

    /// The exit code is the worst finding's (0 none/info, 1 warning, 2 critical).
    pub fn check_exit_code(&self) -> Result<()> {
        ensure!(
            self.code == self.expected_code(),
            "exit code {} does not match the worst finding (expected {}):\n{}",
            self.code,
            self.expected_code(),
            self.describe()
        );
        Ok(())
    }

    /// A report whose observation Ctrl-C ended: the exit code its findings call for, a window
    /// of more than half a second and less than `less_than_s`, and the note and the progress
    /// line saying it ended early.
    pub fn expect_ended_early(&self, less_than_s: f64) -> Result<()> {
        self.check_exit_code()?;
        let secs = self.f64("/duration_s")?;
        let noted = self.json["notes"].as_array().is_some_and(|n| {
            n.iter()
                .any(|n| n.as_str().is_some_and(|n| n.contains("ended early")))
        });
        ensure!(
            secs > 0.5
                && secs < less_than_s
                && noted
                && self.stderr.contains("interrupted: reporting"),
            "`{}`: {secs} s observed (expected under {less_than_s}), the early end noted: \
             {noted}:\n{}",
            self.label,
            self.describe()
        );
        Ok(())
    }

    /// A healthy twin: exit 0 and no warning or critical finding.
    pub fn expect_healthy(&self) -> Result<()> {
        let bad: Vec<&str> = self.problems().iter().map(|f| str_or(f, "id")).collect();
        ensure!(
            bad.is_empty() && self.code == 0,
            "expected a healthy diagnosis (exit 0, no warning/critical), got {bad:?}, exit {}:\n{}",
            self.code,
            self.describe()
        );
        Ok(())
    }

    /// Everything a failed assertion should show: the run, every finding (severity, id,
    /// subject, summary, evidence, fix), the facts, the notes and stderr.
    pub fn describe(&self) -> String {
        let findings: String = self
            .findings()
            .iter()
            .map(|f| {
                format!(
                    "\n  [{}] {} {}: {}\n    evidence {}\n    fix {}",
                    str_or(f, "severity"),
                    str_or(f, "id"),
                    f.get("subject").and_then(Value::as_str).unwrap_or("-"),
                    str_or(f, "summary"),
                    f.get("evidence").map(Value::to_string).unwrap_or_default(),
                    str_or(f, "fix"),
                )
            })
            .collect();
        let facts: String = FACT_SECTIONS
            .iter()
            .map(|s| format!("\n {s}: {}", self.fact(s)))
            .collect();
        format!(
            "`{}` exit {}\nfindings:{}{facts}\n notes: {}\n stderr: {}",
            self.label,
            self.code,
            if findings.is_empty() {
                " none"
            } else {
                &findings
            },
            self.json["notes"],
            self.stderr.trim()
        )
    }
}

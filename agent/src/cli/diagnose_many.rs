//! `netdoctor diagnose` of several interfaces (none named, `--all`, or several IFACEs): a
//! line per interface (name, kind, worst severity, finding count), then each interface's
//! report as `diagnose IFACE` prints it; `--json` one document holding every report.

use serde::Serialize;

use super::diagnose::{paint, print};
use crate::diagnose::Report;
use crate::rules::finding::Severity;

/// The documented `--json` shape of a diagnosis of several interfaces (docs/json.md).
#[derive(Debug, Serialize)]
pub(super) struct Many {
    /// The interfaces diagnosed, in the order of `reports`.
    pub(super) interfaces: Vec<String>,
    /// The worst severity of any report (`null`: no finding); the exit code follows it.
    pub(super) worst: Option<Severity>,
    /// One report per interface, each as `diagnose IFACE --json` prints it.
    pub(super) reports: Vec<Report>,
}

impl Many {
    pub(super) fn new(reports: Vec<Report>) -> Self {
        Many {
            interfaces: reports.iter().map(|r| r.interface.clone()).collect(),
            worst: reports.iter().filter_map(Report::worst).max(),
            reports,
        }
    }

    /// The summary lines, then every report under a line naming its interface.
    pub(super) fn print(&self, color: bool, width: usize) {
        for line in self.summary(color) {
            println!("{line}");
        }
        for r in &self.reports {
            println!();
            println!("── {} ──", r.interface);
            print(r, color, width);
        }
    }

    /// "3 interfaces observed for 5.0s, worst: CRITICAL", then one line per interface:
    /// "  wg1   wireguard  CRITICAL  2 findings".
    fn summary(&self, color: bool) -> Vec<String> {
        let duration = self
            .reports
            .iter()
            .map(|r| r.duration_s)
            .fold(0.0, f64::max);
        let count = match self.reports.len() {
            1 => "1 interface".to_owned(),
            n => format!("{n} interfaces"),
        };
        let mut lines = vec![format!(
            "{count} observed for {duration:.1}s, worst: {}",
            label(self.worst, color, 0)
        )];
        let name_w = column_width(self.reports.iter().map(|r| r.interface.as_str()));
        let kind_w = column_width(self.reports.iter().map(|r| r.kind.as_str()));
        for r in &self.reports {
            let count = match r.findings.len() {
                0 => "no findings".to_owned(),
                1 => "1 finding".to_owned(),
                n => format!("{n} findings"),
            };
            lines.push(format!(
                "  {:<name_w$}  {:<kind_w$}  {}  {count}",
                r.interface,
                r.kind,
                label(r.worst(), color, 8)
            ));
        }
        lines
    }
}

fn column_width<'a>(values: impl Iterator<Item = &'a str>) -> usize {
    values.map(|v| v.chars().count()).max().unwrap_or(0)
}

/// A severity as the summary prints it, `width` columns wide: `OK` without a finding.
fn label(worst: Option<Severity>, color: bool, width: usize) -> String {
    match worst {
        Some(s) => paint(
            &format!("{:<width$}", s.to_string().to_uppercase()),
            s,
            color,
        ),
        None => format!("{:<width$}", "OK"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::finding::Finding;

    fn report(name: &str, severities: &[Severity]) -> Report {
        Report {
            interface: name.into(),
            kind: "wireguard".into(),
            duration_s: 5.02,
            facts: Default::default(),
            findings: severities
                .iter()
                .map(|&severity| Finding {
                    id: "mtu.tunnel_exceeds_underlay".into(),
                    severity,
                    summary: String::new(),
                    evidence: Default::default(),
                    fix: String::new(),
                    reference: None,
                    subject: None,
                    unknown: Default::default(),
                })
                .collect(),
            not_evaluated: Vec::new(),
            notes: Vec::new(),
        }
    }

    #[test]
    fn the_summary_names_each_interface_its_worst_and_its_count() {
        let many = Many::new(vec![
            report("wg0", &[]),
            report("wg-broken", &[Severity::Warning, Severity::Critical]),
            report("wg2", &[Severity::Info]),
        ]);
        assert_eq!(many.worst, Some(Severity::Critical));
        assert_eq!(
            many.summary(false),
            [
                "3 interfaces observed for 5.0s, worst: CRITICAL",
                "  wg0        wireguard  OK        no findings",
                "  wg-broken  wireguard  CRITICAL  2 findings",
                "  wg2        wireguard  INFO      1 finding",
            ]
        );
        let json = serde_json::to_value(&many).expect("json");
        assert_eq!(
            json["interfaces"],
            serde_json::json!(["wg0", "wg-broken", "wg2"])
        );
        assert_eq!(json["worst"], "critical");
        assert_eq!(json["reports"][1]["interface"], "wg-broken");
        let healthy = Many::new(vec![report("wg0", &[])]);
        assert_eq!(
            healthy.summary(false)[0],
            "1 interface observed for 5.0s, worst: OK"
        );
        assert_eq!(
            serde_json::to_value(&healthy).expect("json")["worst"],
            serde_json::Value::Null
        );
    }
}

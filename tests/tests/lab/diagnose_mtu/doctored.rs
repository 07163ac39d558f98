//! The checks of [`crate::diagnose_mtu::report`] must be able to fail: they are run on doctored reports.

use anyhow::{ensure, Result};
use netdoctor_lab::diagnosis::Diagnosis;
use serde_json::Value;

use crate::diagnose_mtu::report::{expect_evidence, expect_fix, MtuChecks};

fn doctored(code: i32, findings: Value) -> Result<Diagnosis> {
    let doc = serde_json::json!({
        "interface": "wg0", "kind": "wireguard", "duration_s": 3.0,
        "facts": {"iface": {"name": "wg0", "kind": "wireguard"}, "tunnel": {}, "peers": [],
                  "host": {}, "traffic": {}, "flows": [], "drops": {}, "probe": {}},
        "findings": findings, "notes": []
    });
    Diagnosis::parse("doctored", code, &doc.to_string(), "")
}

#[test]
fn report_checks_reject_wrong_reports() -> Result<()> {
    let exceeds = serde_json::json!([{
        "id": "mtu.tunnel_exceeds_underlay", "severity": "critical", "summary": "s",
        "evidence": {"tunnel_mtu": 1480}, "fix": "ip link set dev wg0 mtu 1440"
    }]);
    let good = doctored(2, exceeds.clone())?;
    let f = good.expect("mtu.tunnel_exceeds_underlay", "critical")?;
    expect_evidence(&good, f, "tunnel_mtu", &1480.into())?;
    expect_fix(&good, f, "mtu 1440")?;
    good.expect_code(2)?;
    good.expect_header("wg0", "3s")?;

    let warning_only = doctored(1, exceeds.clone())?;
    let critical_exit_0 = doctored(0, exceeds.clone())?;
    let clean_exit_1 = doctored(1, serde_json::json!([]))?;
    let no_fix =
        serde_json::json!([{"id": "x", "severity": "warning", "summary": "s", "evidence": {}}]);
    let mut no_notes = doctored(0, serde_json::json!([]))?.json;
    no_notes.as_object_mut().map(|doc| doc.remove("notes"));
    let parse = |doc: &str| Diagnosis::parse("x", 0, doc, "").map(drop);
    let id = "mtu.tunnel_exceeds_underlay";
    let must_fail: Vec<(&str, Result<()>)> = vec![
        (
            "absent id",
            good.expect("pmtu.blackhole", "critical").map(drop),
        ),
        ("wrong severity", good.expect(id, "warning").map(drop)),
        (
            "exit code below the finding",
            warning_only.expect(id, "critical").map(drop),
        ),
        (
            "exit 0 with a critical finding",
            critical_exit_0.expect_healthy(),
        ),
        ("healthy with a finding", good.expect_healthy()),
        ("healthy with exit 1", clean_exit_1.expect_healthy()),
        ("present id", good.expect_absent(id)),
        ("wrong exit code", good.expect_code(0)),
        (
            "wrong evidence",
            expect_evidence(&good, f, "tunnel_mtu", &1440.into()),
        ),
        (
            "missing evidence",
            expect_evidence(&good, f, "largest_fitting_mtu", &1440.into()),
        ),
        ("wrong fix", expect_fix(&good, f, "mtu 1480")),
        ("wrong interface", good.expect_header("wg1", "3s")),
        ("wrong duration", good.expect_header("wg0", "10s")),
        ("no JSON", parse("oops")),
        ("missing notes", parse(&no_notes.to_string())),
        ("finding without fix", doctored(1, no_fix).map(drop)),
    ];
    for (what, result) in must_fail {
        ensure!(result.is_err(), "check passed on a doctored report: {what}");
    }
    Ok(())
}

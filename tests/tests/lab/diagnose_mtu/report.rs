//! Running `netdoctor diagnose` and reading its report: the checks the MTU scenarios make
//! on a report, the observation window and the iperf3 traffic they share.

use anyhow::{ensure, Context, Result};
use netdoctor_lab::diagnosis::Diagnosis;
use netdoctor_lab::observe::{self, Wall};
use netdoctor_lab::{traffic, Iperf3Opts, Netns};
use serde_json::Value;

/// Observation window of every diagnosis (short, to keep the file's runtime down).
pub(crate) const DURATION: &str = "3s";

/// Rate of the iperf3 traffic through tunnels: userspace WireGuard starved of CPU (two
/// cores, shared with parallel tests) drops packets, which is a real
/// `tcp.high_retransmits`. 20 Mbit/s for 2 s is still ~3500 full-size segments.
pub(crate) const TWIN_RATE: &str = "20M";

/// The MTU scenarios' checks on a report, beside the shared ones of [`Diagnosis`].
pub(crate) trait MtuChecks {
    /// An integer fact by dotted path.
    fn fact_i64(&self, path: &str) -> Result<i64>;
    /// Requires finding `id` with `severity`, and an exit code that matches the worst
    /// finding (at least that of `id`). Returns the finding.
    fn expect(&self, id: &str, severity: &str) -> Result<&Value>;
    /// Requires `interface`, `kind` and `duration_s` to describe what was asked.
    fn expect_header(&self, iface: &str, duration: &str) -> Result<()>;
    /// Requires exactly `code` as exit code.
    fn expect_code(&self, code: i32) -> Result<()>;
    /// Requires that finding `id` is absent.
    fn expect_absent(&self, id: &str) -> Result<()>;
}

impl MtuChecks for Diagnosis {
    fn fact_i64(&self, path: &str) -> Result<i64> {
        self.fact(path)
            .as_i64()
            .with_context(|| format!("facts.{path} is not an integer: {}", self.fact(path)))
    }

    fn expect(&self, id: &str, severity: &str) -> Result<&Value> {
        let f = self.expect_finding(id, severity)?;
        let min = if severity == "critical" { 2 } else { 1 };
        ensure!(
            self.code == self.expected_code() && self.code >= min,
            "exit code {} does not match the findings (expected {}, at least {min} for {id})\n{}",
            self.code,
            self.expected_code(),
            self.describe()
        );
        Ok(f)
    }

    fn expect_header(&self, iface: &str, duration: &str) -> Result<()> {
        let asked: f64 = duration
            .trim_end_matches('s')
            .parse()
            .with_context(|| format!("duration {duration:?} is not N s"))?;
        let observed = self.json["duration_s"].as_f64().unwrap_or(-1.0);
        ensure!(
            self.json["interface"] == iface
                && self.json["kind"].is_string()
                && self.json["kind"] == self.json["facts"]["iface"]["kind"]
                && self.fact("iface.name") == &Value::from(iface)
                && (asked..asked + 2.0).contains(&observed),
            "header: expected interface {iface}, kind = facts.iface.kind, duration_s ≈ {asked}\n{}",
            self.describe()
        );
        Ok(())
    }

    fn expect_code(&self, code: i32) -> Result<()> {
        ensure!(
            self.code == code,
            "exit code {} instead of {code}\n{}",
            self.code,
            self.describe()
        );
        Ok(())
    }

    fn expect_absent(&self, id: &str) -> Result<()> {
        ensure!(
            self.all(id).is_empty(),
            "unexpected {id}\n{}",
            self.describe()
        );
        Ok(())
    }
}

pub(crate) fn str_or(v: &Value) -> &str {
    v.as_str().unwrap_or("<not a string>")
}

/// Requires `evidence.<key> == expected` in finding `f`.
pub(crate) fn expect_evidence(d: &Diagnosis, f: &Value, key: &str, expected: &Value) -> Result<()> {
    ensure!(
        f["evidence"].get(key) == Some(expected),
        "{}: evidence {key} is {:?}, expected {expected}\n{}",
        str_or(&f["id"]),
        f["evidence"].get(key),
        d.describe()
    );
    Ok(())
}

/// Requires that `fix` of finding `f` contains `needle`.
pub(crate) fn expect_fix(d: &Diagnosis, f: &Value, needle: &str) -> Result<()> {
    ensure!(
        str_or(&f["fix"]).contains(needle),
        "{}: fix does not name {needle:?}: {}\n{}",
        str_or(&f["id"]),
        str_or(&f["fix"]),
        d.describe()
    );
    Ok(())
}

/// Runs `netdoctor diagnose IFACE --duration 3s --json [extra]` inside `ns`; once the
/// observation window has opened, runs `during` (traffic), keeps what it returns alive
/// until netdoctor is done, and returns the report with it. The diagnosis is held to its
/// time ([`observe::diagnose_during`]).
pub(crate) fn diagnose_with<T: Send>(
    ns: &Netns,
    iface: &str,
    extra: &[&str],
    during: impl FnOnce() -> Result<T> + Send,
) -> Result<(Diagnosis, T)> {
    diagnose_for(ns, iface, DURATION, extra, during).map(|(d, kept, _)| (d, kept))
}

/// [`diagnose_with`] with an explicit observation time (`N s`), and how long it took.
pub(crate) fn diagnose_for<T: Send>(
    ns: &Netns,
    iface: &str,
    duration: &str,
    extra: &[&str],
    during: impl FnOnce() -> Result<T> + Send,
) -> Result<(Diagnosis, T, Wall)> {
    let window = observe::window(duration)?;
    let (diagnosis, kept, wall) = observe::diagnose_timed(ns, iface, window, extra, during)?;
    diagnosis.expect_header(iface, duration)?;
    Ok((diagnosis, kept, wall))
}

/// `diagnose_with` without traffic.
pub(crate) fn diagnose_idle(ns: &Netns, iface: &str) -> Result<Diagnosis> {
    diagnose_with(ns, iface, &[], || Ok(())).map(|(d, ())| d)
}

/// iperf3 from `client` to `server_ip` for 2 s at `rate`; the sender's report.
pub(crate) fn iperf3(
    client: &Netns,
    server_ip: &str,
    port: u16,
    rate: &str,
) -> Result<traffic::Iperf3Report> {
    let mut opts = Iperf3Opts::new(server_ip);
    opts.port = port;
    opts.duration_secs = 2;
    opts.bitrate = Some(rate.to_owned());
    traffic::iperf3_client(client, &opts)
}

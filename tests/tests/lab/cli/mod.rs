//! The real `netdoctor` binary's command line: help, usage errors and exit
//! codes. Most tests need no privileges; the ones that attach programs need
//! root and BPF (skip elsewhere, fail under CI=true).
//!
//! Build the binary first: `cargo build -p netdoctor`.

use std::process::Output;
use std::time::Duration;

use anyhow::{ensure, Result};
use netdoctor_lab::netdoctor::{self, Report, EXIT_UNKNOWN};
use netdoctor_lab::{ci, lab_guard, Netns};

const TIMEOUT: Duration = Duration::from_secs(30);

fn run(args: &[&str]) -> Result<Output> {
    netdoctor::run(None, args, TIMEOUT)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Runs `args`, requires exit code 3 and a message on stderr containing
/// every one of `needles`; returns stderr.
fn expect_usage_error(args: &[&str], needles: &[&str]) -> Result<String> {
    let out = run(args)?;
    let stderr = text(&out.stderr);
    ensure!(
        out.status.code() == Some(EXIT_UNKNOWN),
        "`netdoctor {}` exited with {} instead of {EXIT_UNKNOWN}; stderr: {stderr}",
        args.join(" "),
        out.status
    );
    for needle in needles {
        ensure!(
            stderr.contains(needle),
            "`netdoctor {}`: stderr does not mention {needle:?}: {stderr}",
            args.join(" ")
        );
    }
    ensure!(
        out.stdout.is_empty(),
        "`netdoctor {}` printed on stdout: {}",
        args.join(" "),
        text(&out.stdout)
    );
    Ok(stderr)
}

#[test]
fn help_exits_0_and_describes_the_subcommand() -> Result<()> {
    let out = run(&["--help"])?;
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(stdout.contains("Usage: netdoctor"), "{stdout}");
    assert!(
        stdout.contains("flows"),
        "--help must list `flows`: {stdout}"
    );

    let out = run(&["flows", "--help"])?;
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    for option in [
        "<INTERFACE>",
        "--duration",
        "--json",
        "--top",
        "--ingress",
        "--xdp-mode",
        "--attach",
        "--tunnel-port",
        "--max-flows",
    ] {
        assert!(
            stdout.contains(option),
            "`flows --help` lacks {option}: {stdout}"
        );
    }

    let out = run(&["--version"])?;
    assert_eq!(out.status.code(), Some(0));
    assert!(
        text(&out.stdout).starts_with("netdoctor "),
        "{}",
        text(&out.stdout)
    );
    Ok(())
}

#[test]
fn unknown_subcommand_exits_3() -> Result<()> {
    expect_usage_error(&["frobnicate"], &["frobnicate"])?;
    expect_usage_error(&[], &["Usage"])?;
    Ok(())
}

#[test]
fn missing_interface_argument_exits_3() -> Result<()> {
    expect_usage_error(&["flows"], &["<INTERFACE>"])?;
    Ok(())
}

#[test]
fn bad_duration_exits_3() -> Result<()> {
    for (args, why) in [
        (["flows", "eth0", "--duration", "abc"], "not a duration"),
        (["flows", "eth0", "--duration", "0s"], "is zero"),
        (["flows", "eth0", "--duration", "0"], "is zero"),
        (["diagnose", "eth0", "--duration", "-5"], "negative"),
        (["drops", "--duration", "-5s", "--json"], "negative"),
        (
            ["diagnose", "eth0", "--duration", "2d"],
            "too long: at most 1day",
        ),
        (["flows", "eth0", "--duration", "999999999999"], "too long"),
        (
            ["probe", "127.0.0.1", "--timeout", "5m"],
            "too long: at most 1m",
        ),
    ] {
        expect_usage_error(&args, &[args[args.len() - 2], why])?;
    }
    // The agent's settings, from the environment too.
    let out = std::process::Command::new(netdoctor::binary()?)
        .args(["agent", "--listen", "127.0.0.1:1"])
        .env("NETDOCTOR_INTERVAL", "0")
        .output()?;
    let stderr = text(&out.stderr);
    ensure!(
        out.status.code() == Some(EXIT_UNKNOWN)
            && stderr.contains("--interval")
            && stderr.contains("is zero"),
        "NETDOCTOR_INTERVAL=0: exit {}, stderr: {stderr}",
        out.status
    );
    Ok(())
}

/// A bare number is seconds, as for `timeout 5`, `sleep 5`, `iperf3 -t 5`.
#[test]
fn bare_numbers_are_seconds() -> Result<()> {
    lab_guard!();
    let ns = Netns::new()?;
    for (args, asked) in [
        (
            &["diagnose", "lo", "--duration", "1", "--no-probe", "--json"][..],
            1.0,
        ),
        (
            &["flows", "lo", "--duration", "1.5", "--json", "--top", "1"],
            1.5,
        ),
        (
            &["drops", "--duration", "1", "--json", "--interface", "lo"],
            1.0,
        ),
    ] {
        let out = netdoctor::run(Some(&ns), args, Duration::from_secs(60))?;
        let stderr = text(&out.stderr);
        ensure!(
            out.status.code() == Some(0),
            "`netdoctor {}` exited {}: {stderr}",
            args.join(" "),
            out.status
        );
        let json: serde_json::Value = serde_json::from_slice(&out.stdout)?;
        let took = json["duration_s"].as_f64().unwrap_or_default();
        ensure!(
            (asked..asked + 1.5).contains(&took),
            "`netdoctor {}` observed {took} s",
            args.join(" ")
        );
    }
    Ok(())
}

#[test]
fn bad_tunnel_ports_exit_3() -> Result<()> {
    expect_usage_error(
        &["flows", "eth0", "--tunnel-port", "99999=fastd"],
        &["--tunnel-port", "99999", "not a UDP port"],
    )?;
    expect_usage_error(
        &["flows", "eth0", "--tunnel-port", "0=fastd"],
        &["not a UDP port"],
    )?;
    // WireGuard is recognised by shape on any port; a port for it is refused.
    expect_usage_error(
        &["flows", "eth0", "--tunnel-port", "1000=wireguard"],
        &["--tunnel-port", "unknown tunnel kind", "wireguard"],
    )?;
    expect_usage_error(&["flows", "eth0", "--tunnel-port", "1000"], &["PORT=KIND"])?;
    // The flow table's size is checked before anything loads.
    expect_usage_error(
        &["flows", "eth0", "--max-flows", "100"],
        &["--max-flows", "1024 to 16777216"],
    )?;
    let nine: Vec<String> = (10000..10009).map(|p| format!("{p}=fastd")).collect();
    let mut args = vec!["flows", "eth0"];
    for p in &nine {
        args.extend(["--tunnel-port", p.as_str()]);
    }
    expect_usage_error(&args, &["--tunnel-port", "at most 8"])?;
    Ok(())
}

#[test]
fn bad_enum_values_exit_3() -> Result<()> {
    expect_usage_error(
        &["flows", "eth0", "--ingress", "bogus"],
        &["--ingress", "bogus"],
    )?;
    expect_usage_error(
        &["flows", "eth0", "--attach", "bogus"],
        &["--attach", "bogus"],
    )?;
    Ok(())
}

#[test]
fn unknown_interface_exits_3() -> Result<()> {
    if !ci::require_root_or_skip() {
        return Ok(());
    }
    // In a fresh namespace, so no interface of the host can match.
    let ns = Netns::new()?;
    let out = netdoctor::run(Some(&ns), &["flows", "no-such-iface"], TIMEOUT)?;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(EXIT_UNKNOWN), "{stderr}");
    assert!(
        stderr.contains("no interface named") && stderr.contains("no-such-iface"),
        "{stderr}"
    );
    assert!(
        out.stdout.is_empty(),
        "stdout: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    Ok(())
}

#[test]
fn flows_on_loopback_prints_the_json_schema() -> Result<()> {
    lab_guard!();
    let ns = Netns::new()?;
    let out = netdoctor::run(
        Some(&ns),
        &["flows", "lo", "--duration", "1s", "--json"],
        Duration::from_secs(60),
    )?;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("netdoctor: watching lo"),
        "no watching line: {stderr}"
    );
    // Report::parse checks every documented key and its type.
    let report = Report::parse(&text(&out.stdout))?;
    assert_eq!(report.interface_str("name")?, "lo");
    assert_eq!(report.interface_str("kind")?, "loopback");
    assert_eq!(report.interface_u64("index")?, 1);
    assert_eq!(report.interface_u64("mtu")?, u64::from(ns.mtu("lo")?));
    assert_eq!(report.json.pointer("/interface/up"), Some(&true.into()));
    assert_eq!(report.hook("ingress")?, "tc");
    assert_eq!(report.hook("egress")?, "tc");
    assert_eq!(report.hook("method")?, "link");
    assert!(
        (1.0..3.0).contains(&report.duration_s),
        "duration_s {} for --duration 1s",
        report.duration_s
    );
    let labels = report
        .json
        .get("size_buckets")
        .and_then(|b| b.as_array())
        .map(Vec::len);
    assert_eq!(labels, Some(report.ingress.size_buckets.len()));
    assert!(report.flows.len() as u64 <= report.flows_total);
    // Every documented top-level key is there (later milestones may add more).
    for key in [
        "interface",
        "hooks",
        "duration_s",
        "size_buckets",
        "counters",
        "flows_total",
        "flows",
        "tunnels",
        "too_big",
    ] {
        assert!(
            report.json.get(key).is_some(),
            "top-level key {key:?} missing"
        );
    }
    Ok(())
}

#[test]
fn logs_carry_no_color_codes_when_stderr_is_not_a_terminal() -> Result<()> {
    lab_guard!();
    let ns = Netns::new()?;
    // -v: info-level logs ("attached ..."), captured through a pipe as a
    // service manager or `2> file` would.
    let out = netdoctor::run(
        Some(&ns),
        &["-v", "flows", "lo", "--duration", "100ms"],
        Duration::from_secs(60),
    )?;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("attached"), "no info log line: {stderr}");
    assert!(
        !stderr.contains('\u{1b}'),
        "ANSI escape sequences in logs written to a pipe: {:?}",
        stderr
            .lines()
            .find(|l| l.contains('\u{1b}'))
            .unwrap_or_default()
    );
    Ok(())
}

mod rules;

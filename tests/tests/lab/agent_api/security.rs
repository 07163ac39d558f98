//! 6. Security: public addresses need a token; tokens; bad parameters.

use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use netdoctor_lab::agent::{Agent, Auth};
use netdoctor_lab::netdoctor;
use netdoctor_lab::{lab_guard, Netns};

use crate::agent_api::helpers::{expect_error, interfaces};

#[test]
fn agent_refuses_a_public_address_without_a_token() -> Result<()> {
    lab_guard!("ss");
    let ns = Netns::new()?;
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("netdoctor.db");
    let started = Instant::now();
    let out = netdoctor::run(
        Some(&ns),
        &[
            "agent",
            "--listen",
            "0.0.0.0:9470",
            "--database",
            &db.to_string_lossy(),
            "--interval",
            "1s",
        ],
        Duration::from_secs(30),
    )?;
    let took = started.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    ensure!(
        out.status.code().is_some_and(|c| c != 0),
        "agent on 0.0.0.0 without a token: expected a non-zero exit, got {}; stderr: {stderr}",
        out.status
    );
    ensure!(
        stderr.contains("--token-file"),
        "the refusal does not mention --token-file: {stderr}"
    );
    ensure!(
        took < Duration::from_secs(5),
        "refusing took {took:?} (expected before anything is loaded)"
    );
    // Nothing listens, nothing was attached.
    let listening = ns.run(&["ss", "-Htln"])?;
    ensure!(
        listening.trim().is_empty(),
        "something listens: {listening}"
    );
    Ok(())
}

#[test]
fn agent_checks_tokens_and_rejects_bad_parameters() -> Result<()> {
    lab_guard!();
    let ns = Netns::new()?;
    let dir = tempfile::tempdir()?;
    let token = format!(
        "{:032x}",
        (u128::from(std::process::id()) << 64) | 0x5eed_cafe_f00d
    );
    ensure!(token.len() == 32);
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, format!("{token}\n"))?;
    // Only root may read it: the agent refuses a token file others may read.
    std::fs::set_permissions(&token_file, std::fs::Permissions::from_mode(0o600))?;
    let token_path = token_file.to_string_lossy().into_owned();
    let agent = Agent::start_with_token(
        &ns,
        &["--no-probe", "--token-file", &token_path],
        Some(&token),
    )?;

    // /healthz needs no token.
    let r = agent.request("GET", "/healthz", Auth::Missing)?;
    ensure!(
        r.status == 200 && r.json["status"] == "ok",
        "{}",
        r.describe()
    );

    // Neither do the dashboard's static files (they hold no data).
    let r = agent.request("GET", "/", Auth::Missing)?;
    ensure!(
        r.status == 200 && r.content_type.starts_with("text/html"),
        "dashboard page without a token: {}",
        r.describe()
    );

    // Everything else does: missing, wrong, truncated, or another scheme gives 401.
    let wrong = format!("Bearer {}", "0".repeat(32));
    let short = format!("Bearer {}", &token[..31]);
    let longer = format!("Bearer {token}x");
    let basic = format!("Basic {token}");
    let paths = [
        ("GET", "/readyz"),
        ("GET", "/metrics"),
        ("GET", "/api/v1/interfaces"),
        ("GET", "/api/v1/findings?state=all"),
        ("GET", "/api/v1/samples"),
        ("POST", "/api/v1/diagnose/lo?duration=1s&probe=false"),
    ];
    for (method, path) in paths {
        for auth in [
            Auth::Missing,
            Auth::Header(&wrong),
            Auth::Header(&short),
            Auth::Header(&longer),
            Auth::Header(&basic),
            Auth::Header("Bearer "),
        ] {
            let r = agent.request(method, path, auth)?;
            expect_error(&r, 401, "unauthorized", None)
                .with_context(|| format!("{method} {path} with {auth:?}"))?;
            ensure!(
                r.www_authenticate.starts_with("Bearer"),
                "401 without WWW-Authenticate: Bearer: {:?}",
                r.www_authenticate
            );
        }
    }
    // The right token opens every read endpoint.
    for path in [
        "/readyz",
        "/api/v1/interfaces",
        "/api/v1/flows",
        "/api/v1/sockets",
        "/api/v1/findings?state=all",
        "/api/v1/drops",
        "/api/v1/samples",
    ] {
        let r = agent.get(path)?;
        ensure!(r.status == 200 && r.json.is_object(), "{}", r.describe());
    }
    ensure!(agent.metrics()?.contains("netdoctor_build_info"));

    // Bad parameters: 400 naming the parameter, never a 5xx.
    let long_value = "a".repeat(300);
    let huge_query = format!("interface={}", "a".repeat(5000));
    let bad: Vec<(&str, String, &str)> = vec![
        ("GET", "/api/v1/flows?limit=abc".into(), "limit"),
        ("GET", "/api/v1/flows?limit=0".into(), "limit"),
        ("GET", "/api/v1/sockets?limit=100000".into(), "limit"),
        ("GET", "/api/v1/findings?limit=-1".into(), "limit"),
        ("GET", "/api/v1/samples?limit=1.5".into(), "limit"),
        ("GET", "/api/v1/findings?offset=-1".into(), "offset"),
        ("GET", "/api/v1/samples?offset=1000001".into(), "offset"),
        (
            "GET",
            "/api/v1/flows?offset=99999999999999999999".into(),
            "offset",
        ),
        ("GET", "/api/v1/findings?since=abc".into(), "since"),
        ("GET", "/api/v1/samples?since=abc".into(), "since"),
        ("GET", "/api/v1/samples?until=-5".into(), "until"),
        (
            "GET",
            "/api/v1/samples?since=2000&until=1000".into(),
            "since",
        ),
        ("GET", "/api/v1/findings?state=bogus".into(), "state"),
        ("GET", "/api/v1/findings?state=".into(), "state"),
        ("GET", "/api/v1/flows?bogus=1".into(), "bogus"),
        ("GET", "/api/v1/interfaces?verbose=1".into(), "verbose"),
        ("GET", "/api/v1/drops?limit=10".into(), "limit"),
        (
            "GET",
            format!("/api/v1/findings?interface={long_value}"),
            "interface",
        ),
        ("GET", format!("/api/v1/findings?{huge_query}"), "query"),
        ("GET", format!("/api/v1/interfaces?{huge_query}"), "query"),
        (
            "POST",
            "/api/v1/diagnose/lo?duration=100s".into(),
            "duration",
        ),
        (
            "POST",
            "/api/v1/diagnose/lo?duration=abc".into(),
            "duration",
        ),
        ("POST", "/api/v1/diagnose/lo?duration=0s".into(), "duration"),
        ("POST", "/api/v1/diagnose/lo?duration=0".into(), "duration"),
        ("POST", "/api/v1/diagnose/lo?duration=-5".into(), "duration"),
        ("POST", "/api/v1/diagnose/lo?duration=61".into(), "duration"),
        (
            "POST",
            "/api/v1/diagnose/lo?duration=500ms".into(),
            "duration",
        ),
        (
            "POST",
            "/api/v1/diagnose/lo?duration=99999999999999999999".into(),
            "duration",
        ),
        ("POST", "/api/v1/diagnose/lo?probe=maybe".into(), "probe"),
        ("POST", "/api/v1/diagnose/lo?force=1".into(), "force"),
    ];
    let mut failures = Vec::new();
    for (method, path, parameter) in &bad {
        let r = agent.request(method, path, Auth::Agent)?;
        if let Err(e) = expect_error(&r, 400, "bad_parameter", Some(parameter)) {
            failures.push(format!("{e:#}"));
        }
    }
    ensure!(
        failures.is_empty(),
        "bad parameters not answered with 400 naming them:\n{}",
        failures.join("\n")
    );

    // Malformed query strings: a client error, never a server error.
    for path in [
        "/api/v1/findings?limit=%FF",
        "/api/v1/findings?limit=%zz",
        "/api/v1/findings?=&&==",
        "/api/v1/findings?limit=1&limit=2",
    ] {
        let r = agent.get(path)?;
        ensure!(
            r.status < 500,
            "malformed query answered with a server error: {}",
            r.describe()
        );
    }

    // A bare number is seconds, as on the command line.
    let r = agent.post("/api/v1/diagnose/lo?duration=1&probe=false")?;
    let took = r.json["duration_s"].as_f64().unwrap_or_default();
    ensure!(
        r.status == 200 && (1.0..2.5).contains(&took),
        "duration=1 observed {took} s: {}",
        r.describe()
    );

    // Still serving, and the process is alive.
    let r = agent.get("/api/v1/interfaces")?;
    ensure!(
        r.status == 200 && interfaces(&r).iter().any(|i| i["name"] == "lo"),
        "{}",
        r.describe()
    );
    ensure!(agent.get("/healthz")?.status == 200);
    Ok(())
}

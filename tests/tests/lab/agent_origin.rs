//! The agent answers only requests meant for it: a web page the user opens must not read
//! the API by rebinding its own DNS name to the agent's address, nor make the agent run
//! diagnoses with a cross-site "simple" POST. The real binary in a lab namespace, real
//! HTTP with the headers a browser sends. Also: the history database is private.
//!
//! Needs root and BPF; skips elsewhere, fails under CI=true.

use std::os::unix::fs::PermissionsExt;

use anyhow::{ensure, Context, Result};
use netdoctor_lab::agent::{Agent, Auth, Reply, DEFAULT_PORT};
use netdoctor_lab::{lab_guard, Netns, PairTopology};

/// Every kind of endpoint: probes, metrics, the dashboard, the API, and the POST.
const ENDPOINTS: &[(&str, &str)] = &[
    ("GET", "/healthz"),
    ("GET", "/readyz"),
    ("GET", "/metrics"),
    ("GET", "/"),
    ("GET", "/app.js"),
    ("GET", "/api/v1/interfaces"),
    ("GET", "/api/v1/interfaces/lo"),
    ("GET", "/api/v1/sockets"),
    ("GET", "/api/v1/flows"),
    ("GET", "/api/v1/findings?state=all"),
    ("GET", "/api/v1/samples"),
    ("GET", "/api/v1/drops"),
    ("POST", "/api/v1/diagnose/lo?duration=1s&probe=false"),
];

/// A diagnosis short enough for a test, of an interface every namespace has.
const DIAGNOSE: &str = "/api/v1/diagnose/lo?duration=1s&probe=false";

fn expect_refused(r: &Reply, code: &str) -> Result<()> {
    ensure!(
        r.status == 403 && r.error_code() == Some(code),
        "expected 403 {code}: {}",
        r.describe()
    );
    Ok(())
}

/// No response may carry CORS headers: they would let other origins read it.
fn expect_no_cors(r: &Reply) -> Result<()> {
    let cors: Vec<&String> = r
        .header_names
        .iter()
        .filter(|h| h.starts_with("access-control-"))
        .collect();
    ensure!(cors.is_empty(), "CORS headers {cors:?}: {}", r.describe());
    Ok(())
}

#[test]
fn a_rebound_name_or_a_cross_site_post_is_refused() -> Result<()> {
    lab_guard!();
    let ns = Netns::new()?;
    let agent = Agent::start(&ns, &["--no-probe"])?;
    let port = DEFAULT_PORT;

    // DNS rebinding: a page's own name now points at 127.0.0.1. Every endpoint refuses.
    let rebound = [
        format!("evil.example:{port}"),
        "evil.example".to_owned(),
        format!("localhost.evil.example:{port}"),
        format!("127.0.0.1.nip.io:{port}"),
    ];
    for host in &rebound {
        for (method, path) in ENDPOINTS {
            let r = agent.request_with(method, path, Auth::Agent, &[("Host", host)])?;
            expect_refused(&r, "foreign_host").with_context(|| format!("Host {host}"))?;
            expect_no_cors(&r)?;
        }
    }

    // The agent's own names, with any port (ssh -L, kubectl port-forward).
    for host in [
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        format!("[::1]:{port}"),
        "localhost:8080".to_owned(),
        "127.0.0.1".to_owned(),
    ] {
        for path in ["/api/v1/interfaces", "/metrics", "/", "/healthz"] {
            let r = agent.request_with("GET", path, Auth::Agent, &[("Host", &host)])?;
            ensure!(r.status == 200, "Host {host}: {}", r.describe());
            expect_no_cors(&r)?;
        }
    }

    // Cross-site POSTs a page can send without a preflight, and their near relatives.
    let evil = "http://evil.example";
    let cross_site: &[&[(&str, &str)]] = &[
        &[("Origin", evil), ("Content-Type", "text/plain")],
        &[("Content-Type", "text/plain")],
        &[("Content-Type", "application/x-www-form-urlencoded")],
        &[("Content-Type", "multipart/form-data; boundary=x")],
        &[("Origin", evil), ("Content-Type", "application/json")],
        &[("Origin", "null"), ("Content-Type", "application/json")],
        &[
            ("Sec-Fetch-Site", "cross-site"),
            ("Content-Type", "application/json"),
        ],
    ];
    for headers in cross_site {
        let r = agent.request_with("POST", DIAGNOSE, Auth::Agent, headers)?;
        expect_refused(&r, "cross_site").with_context(|| format!("{headers:?}"))?;
        expect_no_cors(&r)?;
    }
    // A POST without a content type at all (curl -X POST): refused, saying what to add.
    let r = agent.request_with("POST", DIAGNOSE, Auth::Agent, &[("Content-Type", "")])?;
    expect_refused(&r, "cross_site")?;
    ensure!(r.text.contains("application/json"), "{}", r.describe());

    // A CORS preflight gets no permission.
    let r = agent.request_with(
        "OPTIONS",
        DIAGNOSE,
        Auth::Agent,
        &[
            ("Origin", evil),
            ("Access-Control-Request-Method", "POST"),
            ("Access-Control-Request-Headers", "content-type"),
        ],
    )?;
    expect_no_cors(&r)?;

    // What the dashboard sends from its own page still runs a diagnosis.
    let own = format!("http://127.0.0.1:{port}");
    let r = agent.request_with(
        "POST",
        DIAGNOSE,
        Auth::Agent,
        &[
            ("Origin", &own),
            ("Sec-Fetch-Site", "same-origin"),
            ("Content-Type", "application/json"),
        ],
    )?;
    ensure!(
        r.status == 200 && r.json["interface"] == "lo",
        "{}",
        r.describe()
    );
    expect_no_cors(&r)?;

    // The history is the agent's alone.
    for file in [
        agent.database().to_path_buf(),
        agent.database().with_extension("db-wal"),
        agent.database().with_extension("db-shm"),
    ] {
        let mode = std::fs::metadata(&file)
            .with_context(|| format!("{}", file.display()))?
            .permissions()
            .mode()
            & 0o777;
        ensure!(mode == 0o600, "{} has mode {mode:o}", file.display());
    }
    Ok(())
}

#[test]
fn a_public_listener_answers_its_address_and_allowed_names_only() -> Result<()> {
    lab_guard!();
    let pair = PairTopology::new(1500)?;
    let dir = tempfile::tempdir()?;
    let token = "0123456789abcdef0123456789abcdef";
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, token)?;
    std::fs::set_permissions(&token_file, std::fs::Permissions::from_mode(0o600))?;
    let port = DEFAULT_PORT + 1;
    let listen = format!("0.0.0.0:{port}");
    let agent = Agent::start_with_token(
        &pair.a,
        &[
            "--no-probe",
            "--listen",
            &listen,
            "--token-file",
            &token_file.to_string_lossy(),
            "--allowed-host",
            "node1.example,netdoctor.example",
        ],
        Some(token),
    )?;
    for host in [
        format!("{}:{port}", PairTopology::A_IP),
        format!("node1.example:{port}"),
        "NetDoctor.Example".to_owned(),
        format!("localhost:{port}"),
    ] {
        let r = agent.request_with("GET", "/api/v1/interfaces", Auth::Agent, &[("Host", &host)])?;
        ensure!(r.status == 200, "Host {host}: {}", r.describe());
    }
    // The token does not make another name acceptable, and the name is checked first.
    for auth in [Auth::Agent, Auth::Missing] {
        let r = agent.request_with(
            "GET",
            "/api/v1/interfaces",
            auth,
            &[("Host", &format!("evil.example:{port}"))],
        )?;
        expect_refused(&r, "foreign_host")?;
    }
    Ok(())
}

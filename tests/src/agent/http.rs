//! HTTP requests with `ureq`, from the calling thread's network namespace or from a
//! short-lived thread that entered another one.

use std::fs::File;
use std::path::Path;

use anyhow::{bail, Context, Result};
use serde_json::Value;

use super::{Reply, HTTP_TIMEOUT};

/// Sends `METHOD URL` with `headers` from the calling thread's network namespace (any
/// HTTP status is a reply), e.g. to an agent that is not an [`Agent`](super::Agent),
/// like one in a container.
pub fn request_url(method: &str, url: &str, headers: &[(&str, &str)]) -> Result<Reply> {
    let headers: Vec<(String, String)> = headers
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    http(method, url, &headers, format!("{method} {url}"))
}

/// Runs one HTTP request on a new thread inside the namespace at `ns_path`.
pub(super) fn http_in_netns(
    ns_path: &Path,
    method: &str,
    url: &str,
    headers: Vec<(String, String)>,
    label: &str,
) -> Result<Reply> {
    let file = File::open(ns_path).with_context(|| format!("opening {}", ns_path.display()))?;
    let (method, url, label) = (method.to_owned(), url.to_owned(), label.to_owned());
    let handle = std::thread::Builder::new()
        .name("agent-http".into())
        .spawn(move || -> Result<Reply> {
            nix::sched::setns(&file, nix::sched::CloneFlags::CLONE_NEWNET)
                .context("setns(CLONE_NEWNET)")?;
            http(&method, &url, &headers, label)
        })
        .context("spawning the HTTP thread")?;
    match handle.join() {
        Ok(result) => result,
        Err(_) => bail!("the HTTP thread panicked"),
    }
}

fn http(method: &str, url: &str, headers: &[(String, String)], label: String) -> Result<Reply> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .proxy(None)
        .timeout_global(Some(HTTP_TIMEOUT))
        .build()
        .into();
    let response = match method {
        "GET" | "OPTIONS" => {
            let mut req = if method == "GET" {
                agent.get(url)
            } else {
                agent.options(url)
            };
            for (k, v) in headers {
                req = req.header(k, v);
            }
            req.call()
        }
        "POST" => {
            let mut req = agent.post(url);
            for (k, v) in headers {
                req = req.header(k, v);
            }
            req.send_empty()
        }
        other => bail!("unsupported method {other}"),
    };
    let mut response = response.with_context(|| format!("{label} failed"))?;
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned()
    };
    let content_type = header("content-type");
    let www_authenticate = header("www-authenticate");
    let retry_after = header("retry-after");
    let header_names = response
        .headers()
        .keys()
        .map(|k| k.as_str().to_ascii_lowercase())
        .collect();
    let status = response.status().as_u16();
    let bytes = response
        .body_mut()
        .with_config()
        .limit(64 << 20)
        .read_to_vec()
        .with_context(|| format!("reading the body of {label}"))?;
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let json = serde_json::from_str(&text).unwrap_or(Value::Null);
    Ok(Reply {
        request: label,
        status,
        content_type,
        www_authenticate,
        retry_after,
        header_names,
        text,
        json,
    })
}

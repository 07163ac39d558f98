//! Who may ask. Two browser attacks reach an agent on loopback from any web page the user
//! opens, and this module stops both before a handler runs:
//!
//! - **DNS rebinding.** A page at `http://evil.example:9469/` rebinds its name to
//!   127.0.0.1 and then reads the API as its own origin. Its requests still say
//!   `Host: evil.example:9469`, so every request must name this agent in `Host`: a
//!   loopback name or address on a loopback listener, the listen address (any address
//!   when it is unspecified) otherwise, and the names given with `--allowed-host`. The
//!   port is not checked: `ssh -L` and `kubectl port-forward` change it, and the name is
//!   what an attacker controls.
//! - **Cross-site requests that run work.** A page can send a "simple" POST (form
//!   content types) to any address without a CORS preflight. A POST must therefore carry
//!   `Content-Type: application/json`, which no page can send to another origin without
//!   a preflight this agent never grants (it sends no CORS headers), and an `Origin` or
//!   `Sec-Fetch-Site` header, when present, must say the request comes from the agent's
//!   own pages.
//!
//! Requests without `Host` (HTTP/1.0 tools) come from no browser and are let through.

use std::net::{IpAddr, SocketAddr};

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::error::ApiError;
use super::AppState;

/// The `Host` values this agent answers to.
#[derive(Debug, Clone)]
pub struct HostPolicy {
    listen: IpAddr,
    /// `--allowed-host` names, lower case, without a trailing dot.
    names: Vec<String>,
}

impl HostPolicy {
    /// The policy of an agent listening on `listen` with extra `names` allowed.
    pub fn new(listen: SocketAddr, names: &[String]) -> Self {
        HostPolicy {
            listen: listen.ip(),
            names: names.iter().map(|n| normalize(n)).collect(),
        }
    }

    /// Whether `host` (a `Host` header value or a URI authority, with or without a port)
    /// names this agent.
    pub fn allows(&self, host: &str) -> bool {
        let Some(name) = host_name(host) else {
            return false;
        };
        if self.names.contains(&name) {
            return true;
        }
        // A loopback listener is reached by loopback names; an unspecified one by every
        // address, loopback included.
        let loopback_reachable = self.listen.is_loopback() || self.listen.is_unspecified();
        match name.parse::<IpAddr>() {
            // An address literal cannot be rebound: it is what the client connected to.
            Ok(ip) => {
                ip == self.listen
                    || self.listen.is_unspecified()
                    || (loopback_reachable && ip.is_loopback())
            }
            Err(_) => loopback_reachable && name == "localhost",
        }
    }
}

/// The host part of a `Host` value, lower case, without brackets, port or trailing dot;
/// `None` when it is not a valid authority (or carries user information).
fn host_name(value: &str) -> Option<String> {
    let authority: axum::http::uri::Authority = value.trim().parse().ok()?;
    if authority.as_str().contains('@') {
        return None;
    }
    let host = authority.host();
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    Some(normalize(host))
}

fn normalize(name: &str) -> String {
    name.trim().trim_end_matches('.').to_ascii_lowercase()
}

/// What the request says it is addressed to: the absolute-form URI's authority, else the
/// `Host` header. `Err` when `Host` is not text.
fn addressed_to(request: &Request) -> Result<Option<String>, ()> {
    if let Some(authority) = request.uri().authority() {
        return Ok(Some(authority.as_str().to_owned()));
    }
    match request.headers().get(header::HOST) {
        None => Ok(None),
        Some(v) => v.to_str().map(|s| Some(s.to_owned())).map_err(|_| ()),
    }
}

/// Refuses requests addressed to a name that is not this agent's.
pub async fn check_host(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let allowed = match addressed_to(&request) {
        Ok(None) => true,
        Ok(Some(host)) => state.hosts.allows(&host),
        Err(()) => false,
    };
    if !allowed {
        let host = request
            .headers()
            .get(header::HOST)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
            .unwrap_or_default();
        tracing::warn!(host, path = %request.uri().path(), "refused: Host names another site");
        return ApiError::ForeignHost(host).into_response();
    }
    next.run(request).await
}

/// Refuses requests that run work (anything but GET and HEAD) when a web page of another
/// site could have sent them.
pub async fn check_cross_site(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    if request.method() == Method::GET || request.method() == Method::HEAD {
        return next.run(request).await;
    }
    if let Err(reason) = same_site(request.headers(), &state.hosts) {
        tracing::warn!(path = %request.uri().path(), "refused: {reason}");
        return ApiError::CrossSite(reason).into_response();
    }
    next.run(request).await
}

/// Why a request that runs work may come from another site, if it may.
fn same_site(headers: &HeaderMap, hosts: &HostPolicy) -> Result<(), String> {
    let text = |name: header::HeaderName| {
        headers.get(name).map(|v| {
            String::from_utf8_lossy(v.as_bytes())
                .trim()
                .to_ascii_lowercase()
        })
    };
    if let Some(site) = text(header::HeaderName::from_static("sec-fetch-site")) {
        if site != "same-origin" && site != "none" {
            return Err(format!(
                "the browser says it comes from a page of {site} site"
            ));
        }
    }
    if let Some(origin) = text(header::ORIGIN) {
        let authority = origin
            .split_once("://")
            .map(|(_, rest)| rest.trim_end_matches('/'));
        if !authority.is_some_and(|a| hosts.allows(a)) {
            return Err(format!(
                "it comes from a page of {origin:?}, not of this agent"
            ));
        }
    }
    let json = text(header::CONTENT_TYPE).is_some_and(|ct| {
        ct.split(';')
            .next()
            .is_some_and(|t| t.trim() == "application/json")
    });
    if !json {
        return Err(
            "it lacks `Content-Type: application/json`, so any web page could have \
                    sent it (e.g. curl -X POST -H 'Content-Type: application/json' URL)"
                .into(),
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(listen: &str, names: &[&str]) -> HostPolicy {
        let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
        HostPolicy::new(listen.parse().expect("listen address"), &names)
    }

    #[test]
    fn loopback_listener_answers_loopback_names_only() {
        let p = policy("127.0.0.1:9469", &[]);
        for ok in [
            "127.0.0.1:9469",
            "127.0.0.1",
            "localhost:9469",
            "LOCALHOST:8080",
            "localhost.",
            "[::1]:9469",
            "127.0.0.2:1",
        ] {
            assert!(p.allows(ok), "{ok} must be allowed");
        }
        for bad in [
            "evil.example:9469",
            "evil.example",
            "localhost.evil.example",
            "127.0.0.1.nip.io:9469",
            "10.0.0.1:9469",
            "user@127.0.0.1:9469",
            "",
            "127.0.0.1:9469/x",
        ] {
            assert!(!p.allows(bad), "{bad:?} must be refused");
        }
    }

    #[test]
    fn public_listener_answers_its_address_and_allowed_names() {
        let p = policy("10.1.2.3:9469", &["Node1.Example."]);
        assert!(p.allows("10.1.2.3:9469"));
        assert!(p.allows("node1.example:443"));
        assert!(!p.allows("10.1.2.4:9469"));
        assert!(!p.allows("localhost:9469"));
        assert!(!p.allows("node2.example"));

        let any = policy("[::]:9469", &[]);
        assert!(any.allows("192.0.2.7:9469"));
        assert!(any.allows("[2001:db8::1]:9469"));
        assert!(any.allows("localhost:9469"));
        assert!(!any.allows("evil.example:9469"));
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, v.parse().expect("header value"));
        }
        h
    }

    #[test]
    fn only_same_site_json_posts_pass() {
        let p = policy("127.0.0.1:9469", &[]);
        let json = ("content-type", "application/json; charset=utf-8");
        assert!(same_site(&headers(&[json]), &p).is_ok());
        assert!(same_site(&headers(&[json, ("origin", "http://127.0.0.1:9469")]), &p).is_ok());
        assert!(same_site(&headers(&[json, ("sec-fetch-site", "same-origin")]), &p).is_ok());
        for bad in [
            headers(&[]),
            headers(&[("content-type", "text/plain")]),
            headers(&[("content-type", "application/x-www-form-urlencoded")]),
            headers(&[json, ("origin", "http://evil.example")]),
            headers(&[json, ("origin", "null")]),
            headers(&[json, ("sec-fetch-site", "cross-site")]),
            headers(&[json, ("sec-fetch-site", "same-site")]),
        ] {
            assert!(same_site(&bad, &p).is_err(), "{bad:?} must be refused");
        }
    }
}

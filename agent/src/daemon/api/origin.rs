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
//! `Host` and `Origin` are parsed exactly ([`authority`](super::authority)) and compared
//! whole. A request with two `Host` headers, a `Host` that does not parse, or an HTTP/1.1
//! request without one gets 400 (RFC 9112 §3.2); HTTP/1.0 requests without `Host` come from
//! no browser and are let through.

use std::net::{IpAddr, SocketAddr};

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, Method, Version};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::authority::{self, Host};
use super::error::ApiError;
use super::AppState;

/// The `Host` values this agent answers to.
#[derive(Debug, Clone)]
pub struct HostPolicy {
    listen: IpAddr,
    /// `--allowed-host` names and addresses.
    names: Vec<Host>,
}

impl HostPolicy {
    /// The policy of an agent listening on `listen` with extra `names` allowed; an error
    /// names the first of them that is not a host.
    pub fn new(listen: SocketAddr, names: &[String]) -> anyhow::Result<Self> {
        let names = names
            .iter()
            .map(|n| {
                authority::parse_name(n).map_err(|e| anyhow::anyhow!("--allowed-host {n:?}: {e}"))
            })
            .collect::<anyhow::Result<_>>()?;
        Ok(HostPolicy {
            listen: listen.ip(),
            names,
        })
    }

    /// Whether `host` (a `Host` header value or a URI authority, with or without a port)
    /// names this agent.
    #[cfg(test)]
    pub fn allows(&self, host: &str) -> bool {
        self.check(host).unwrap_or(false)
    }

    /// Whether `value` names this agent; `Err` says why it is no host at all.
    pub fn check(&self, value: &str) -> Result<bool, String> {
        authority::parse_host(value).map(|h| self.names_agent(&h))
    }

    /// Whether `host` is one of this agent's names.
    fn names_agent(&self, host: &Host) -> bool {
        if self.names.contains(host) {
            return true;
        }
        // A loopback listener is reached by loopback names; an unspecified one by every
        // address, loopback included.
        let loopback_reachable = self.listen.is_loopback() || self.listen.is_unspecified();
        match host {
            // An address literal cannot be rebound: it is what the client connected to.
            Host::Ip(ip) => {
                *ip == self.listen
                    || self.listen.is_unspecified()
                    || (loopback_reachable && ip.is_loopback())
            }
            Host::Name(name) => loopback_reachable && name == "localhost",
        }
    }
}

/// What the request says it is addressed to: the absolute-form URI's authority, else the
/// `Host` header; `None` for an HTTP/1.0 request without one. `Err` says why the request
/// is malformed.
fn addressed_to(request: &Request) -> Result<Option<String>, String> {
    let mut hosts = request.headers().get_all(header::HOST).iter();
    let host = hosts.next();
    if hosts.next().is_some() {
        return Err("more than one Host header".into());
    }
    if let Some(authority) = request.uri().authority() {
        return Ok(Some(authority.as_str().to_owned()));
    }
    match host {
        None if request.version() >= Version::HTTP_11 => {
            Err("an HTTP/1.1 request without a Host header".into())
        }
        None => Ok(None),
        Some(v) => v
            .to_str()
            .map(|s| Some(s.to_owned()))
            .map_err(|_| "a Host header that is not text".into()),
    }
}

/// Refuses requests addressed to a name that is not this agent's (403), and requests whose
/// `Host` is malformed (400).
pub async fn check_host(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let refused = match addressed_to(&request) {
        Ok(None) => None,
        Ok(Some(host)) => match state.hosts.check(&host) {
            Ok(true) => None,
            Ok(false) => Some(ApiError::ForeignHost(host)),
            Err(e) => Some(ApiError::BadHost(format!("Host {host:?}: {e}"))),
        },
        Err(e) => Some(ApiError::BadHost(e)),
    };
    if let Some(error) = refused {
        tracing::warn!(path = %request.uri().path(), "refused: {error}");
        return error.into_response();
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
    let texts = |name: header::HeaderName| -> Vec<String> {
        headers
            .get_all(name)
            .iter()
            .map(|v| {
                String::from_utf8_lossy(v.as_bytes())
                    .trim()
                    .to_ascii_lowercase()
            })
            .collect()
    };
    for site in texts(header::HeaderName::from_static("sec-fetch-site")) {
        if site != "same-origin" && site != "none" {
            return Err(format!(
                "the browser says it comes from a page of {site} site"
            ));
        }
    }
    for origin in texts(header::ORIGIN) {
        if !authority::parse_origin(&origin).is_ok_and(|h| hosts.names_agent(&h)) {
            return Err(format!(
                "it comes from a page of {origin:?}, not of this agent"
            ));
        }
    }
    let json = headers
        .get(header::CONTENT_TYPE)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).to_ascii_lowercase())
        .is_some_and(|ct| {
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
        HostPolicy::new(listen.parse().expect("listen address"), &names).expect("policy")
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

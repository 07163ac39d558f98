//! The application as `netdoctor agent` builds it, on an in-memory store and the default
//! configuration (loopback `127.0.0.1:9469`), and requests as a client sends them.

use std::sync::Arc;

use axum::body::Body;
use axum::http::{header, request, HeaderMap, Method, Request, StatusCode};
use axum::Router;
use serde_json::Value;
use tower::ServiceExt;

use crate::daemon::config::{Config, Overrides};
use crate::daemon::state::Shared;
use crate::daemon::store::{Retention, Store};

/// The token of [`App::with_token`].
pub const TOKEN: &str = "0123456789abcdef0123456789abcdef";
/// What a client of the default listener sends as `Host`.
pub const HOST: &str = "127.0.0.1:9469";

/// The router and the state behind it.
#[derive(Debug)]
pub struct App {
    router: Router,
    /// The view, store and configuration the handlers read (for tests that publish a
    /// view or store history before asking).
    pub shared: Arc<Shared>,
}

/// An answer: status, headers, body (as text, and as JSON when it is).
#[derive(Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub text: String,
    pub json: Value,
}

impl Reply {
    /// `error.code` of a JSON error.
    pub fn code(&self) -> Option<&str> {
        self.json.pointer("/error/code").and_then(Value::as_str)
    }

    /// `error.parameter` of a `bad_parameter` error.
    pub fn parameter(&self) -> Option<&str> {
        self.json
            .pointer("/error/parameter")
            .and_then(Value::as_str)
    }

    /// Asserts a JSON error: status, code and (when given) parameter.
    #[track_caller]
    pub fn expect_error(&self, status: u16, code: &str, parameter: Option<&str>) {
        assert!(
            self.status.as_u16() == status
                && self.code() == Some(code)
                && parameter.is_none_or(|p| self.parameter() == Some(p)),
            "expected {status} {code} {parameter:?}, got {} {}",
            self.status,
            self.text
        );
    }
}

impl App {
    /// The agent with its defaults: loopback, no token.
    pub fn new() -> Self {
        Self::with(|_| {})
    }

    /// The agent with [`TOKEN`] as its bearer token.
    pub fn with_token() -> Self {
        Self::with(|c| c.token = Some(TOKEN.to_owned()))
    }

    /// The agent with its default configuration changed by `edit`.
    pub fn with(edit: impl FnOnce(&mut Config)) -> Self {
        let mut config = Config::resolve(&Overrides::default()).expect("default configuration");
        edit(&mut config);
        let store = Store::open_in_memory(Retention::default()).expect("in-memory store");
        let shared = Arc::new(Shared::new(config, Arc::new(store)).expect("shared state"));
        let router = crate::daemon::api::router(shared.clone()).expect("router");
        App { router, shared }
    }

    /// A request as a client of this agent starts it: `Host` names the agent, and a POST
    /// says `Content-Type: application/json`.
    pub fn request(method: Method, uri: &str) -> request::Builder {
        Self::request_to(method, uri, HOST)
    }

    /// [`App::request`] with `host` as its `Host` header.
    pub fn request_to(method: Method, uri: &str, host: &str) -> request::Builder {
        let json = method == Method::POST;
        let builder = Request::builder()
            .method(method)
            .uri(uri)
            .header(header::HOST, host);
        if json {
            builder.header(header::CONTENT_TYPE, "application/json")
        } else {
            builder
        }
    }

    /// Sends `request` through the whole router.
    pub async fn send(&self, request: request::Builder) -> Reply {
        let request = request.body(Body::empty()).expect("request");
        let response = self
            .router
            .clone()
            .oneshot(request)
            .await
            .expect("the router is infallible");
        let (parts, body) = response.into_parts();
        let bytes = axum::body::to_bytes(body, 16 << 20)
            .await
            .expect("response body");
        let text = String::from_utf8_lossy(&bytes).into_owned();
        Reply {
            status: parts.status,
            headers: parts.headers,
            json: serde_json::from_str(&text).unwrap_or(Value::Null),
            text,
        }
    }

    /// `GET uri` as a client of this agent sends it.
    pub async fn get(&self, uri: &str) -> Reply {
        self.send(Self::request(Method::GET, uri)).await
    }
}

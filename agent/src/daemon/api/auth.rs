//! Bearer-token check and request-size guard, in front of everything but `/healthz`.
//!
//! One rule for every method: the dashboard's static files (which hold no data) are served
//! without a token whatever the method (GET, HEAD; others get 405 from the router), and
//! everything else needs it. The token travels as RFC 9110 credentials: the scheme
//! `Bearer` in any case, one or more spaces, the token; exactly one `Authorization` header.

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::error::ApiError;
use super::AppState;

/// Longest query string accepted: parameters are short; anything longer is a mistake or
/// an attack.
const MAX_QUERY_LEN: usize = 2048;

/// Compares without stopping at the first difference, so timing reveals nothing of the
/// token.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The token of the request's one `Authorization: Bearer TOKEN` header, if it has exactly
/// one such header.
fn bearer(headers: &HeaderMap) -> Option<&str> {
    let mut values = headers.get_all(header::AUTHORIZATION).iter();
    let value = values.next()?;
    if values.next().is_some() {
        return None;
    }
    let value = value.to_str().ok()?.trim_matches([' ', '\t']);
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim_start_matches(' ');
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty() && !token.contains([' ', '\t']))
        .then_some(token)
}

/// Rejects oversized query strings and, when a token is configured, requests without it.
pub async fn guard(State(state): State<AppState>, request: Request, next: Next) -> Response {
    if request
        .uri()
        .query()
        .is_some_and(|q| q.len() > MAX_QUERY_LEN)
    {
        return ApiError::bad(
            "query",
            format!("query string longer than {MAX_QUERY_LEN} bytes"),
        )
        .into_response();
    }
    if let Some(token) = &state.shared.config.token {
        let public_asset = super::dashboard::is_asset(request.uri().path());
        let given = bearer(request.headers());
        if !public_asset && !given.is_some_and(|g| same(g.as_bytes(), token.as_bytes())) {
            return ApiError::Unauthorized.into_response();
        }
    }
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::AUTHORIZATION, value.parse().expect("header value"));
        h
    }

    #[test]
    fn the_scheme_is_case_insensitive_and_spaces_are_optional_whitespace() {
        for ok in [
            "Bearer t0k3n",
            "bearer t0k3n",
            "BEARER t0k3n",
            "Bearer   t0k3n",
            " Bearer t0k3n\t",
        ] {
            assert_eq!(bearer(&one(ok)), Some("t0k3n"), "{ok:?}");
        }
        for bad in [
            "Basic t0k3n",
            "Bearer",
            "Bearer ",
            "Bearert0k3n",
            "Bearer\tt0k3n",
            "Bearer t0k 3n",
            "Bearers t0k3n",
        ] {
            assert_eq!(bearer(&one(bad)), None, "{bad:?}");
        }
        let mut two = one("Bearer t0k3n");
        two.append(
            header::AUTHORIZATION,
            "Bearer t0k3n".parse().expect("value"),
        );
        assert_eq!(bearer(&two), None, "two Authorization headers");
    }
}

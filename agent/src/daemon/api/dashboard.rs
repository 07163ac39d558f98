//! The dashboard: static files from `dashboard/web/`, embedded in the binary at build
//! time, so it works offline and matches the agent's version.

use axum::extract::Path;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use rust_embed::RustEmbed;

use super::AppState;

#[derive(RustEmbed)]
#[folder = "../dashboard/web/"]
struct Assets;

/// Routes of this module.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/", get(|| async { serve("index.html") }))
        .route(
            "/{*path}",
            get(|Path(path): Path<String>| async move { serve(&path) }),
        )
}

/// Whether `path` is one of the embedded files (served without a token: they hold no
/// data; the page asks for the token and sends it with its API calls).
pub fn is_asset(path: &str) -> bool {
    let p = path.trim_start_matches('/');
    p.is_empty() || Assets::get(p).is_some()
}

fn serve(path: &str) -> Response {
    match Assets::get(path) {
        Some(file) => (
            [
                (header::CONTENT_TYPE, file.metadata.mimetype().to_owned()),
                (header::CACHE_CONTROL, "no-cache".to_owned()),
            ],
            file.data,
        )
            .into_response(),
        None => (StatusCode::NOT_FOUND, "not found").into_response(),
    }
}

//! The React demo of `frontend-demo/`, built into `frontend-demo/dist/` and
//! embedded in the binary: `/` serves its page, `/assets/…` its files.
//! `npm run build --prefix frontend-demo` rebuilds it; a test fails when
//! the build is older than its sources.

use std::borrow::Cow;

use axum::Router;
use axum::extract::Path;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use bytes::Bytes;

#[derive(rust_embed::Embed)]
#[folder = "frontend-demo/dist/"]
struct Dist;

pub fn routes() -> Router {
    Router::new()
        .route(
            "/",
            get(|headers: HeaderMap| async move { file("index.html", &headers) }),
        )
        .route(
            "/assets/{*path}",
            get(|Path(path): Path<String>, headers: HeaderMap| async move {
                file(&format!("assets/{path}"), &headers)
            }),
        )
}

const POLICY: &str = "default-src 'self'; script-src 'self'; style-src 'self'; \
    img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; \
    form-action 'self'; object-src 'none'";

fn file(path: &str, headers: &HeaderMap) -> Response {
    let Some(file) = Dist::get(path) else {
        return (StatusCode::NOT_FOUND, "no such file").into_response();
    };
    let etag = format!("\"{}\"", hex::encode(file.metadata.sha256_hash()));
    // The page must be fetched again after an upgrade; Vite names every
    // asset by its content hash, so those never change under their name.
    let cache = if path.starts_with("assets/") {
        "public, max-age=31536000, immutable"
    } else {
        "no-cache"
    };
    let fresh = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|tags| tags.to_str().ok())
        .is_some_and(|tags| matches(tags, &etag));
    let mut response = if fresh {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        let body = match file.data {
            Cow::Borrowed(bytes) => Bytes::from_static(bytes),
            Cow::Owned(bytes) => Bytes::from(bytes),
        };
        body.into_response()
    };
    let headers = response.headers_mut();
    if let Ok(value) = HeaderValue::from_str(file.metadata.mimetype()) {
        headers.insert(header::CONTENT_TYPE, value);
    }
    if let Ok(value) = HeaderValue::from_str(&etag) {
        headers.insert(header::ETAG, value);
    }
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
    // The page holds the chat and the buttons that approve: no other site
    // may frame it, and it runs only its own code.
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(POLICY),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    response
}

/// `If-None-Match`: `*`, or a list of tags compared weakly (RFC 9110 13.1.2).
fn matches(tags: &str, etag: &str) -> bool {
    tags.split(',')
        .map(|tag| tag.trim())
        .any(|tag| tag == "*" || tag.trim_start_matches("W/") == etag)
}

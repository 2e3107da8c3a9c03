//! `POST /api/confirmations/{id}` through toolgate's router: whatever the
//! body, a client error with a JSON `{"error": …}`, never a 5xx, and never
//! a decision (no confirmation was issued).
#![no_main]

use std::sync::OnceLock;

use axum::body::Body;
use axum::http::Request;
use libfuzzer_sys::fuzz_target;
use toolgate::config::Settings;
use toolgate::ids::{Clock, Ids};
use toolgate::{App, Config};
use tower::ServiceExt;

struct Server {
    runtime: tokio::runtime::Runtime,
    router: axum::Router,
}

fn server() -> &'static Server {
    static SERVER: OnceLock<Server> = OnceLock::new();
    SERVER.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap_or_else(|e| panic!("{e}"));
        let settings = Settings::new(Config::default()).unwrap_or_else(|e| panic!("{e}"));
        let router = runtime.block_on(async {
            App::new(settings)
                .with_ids(Ids::sequential())
                .with_clock(Clock::manual(1_800_000_000_000))
                .router()
        });
        Server { runtime, router }
    })
}

fuzz_target!(|body: &[u8]| {
    let server = server();
    // A request from curl on this machine: the guard lets it through to the handler.
    let request = Request::post("/api/confirmations/adk-1")
        .header("host", "127.0.0.1:8080")
        .header("content-type", "application/json")
        .body(Body::from(body.to_vec()))
        .unwrap_or_else(|e| panic!("{e}"));
    let (status, text) = server.runtime.block_on(async {
        let response = server
            .router
            .clone()
            .oneshot(request)
            .await
            .unwrap_or_else(|e| match e {});
        let status = response.status();
        let text = axum::body::to_bytes(response.into_body(), usize::MAX).await;
        (status, text.unwrap_or_else(|e| panic!("{e}")))
    });
    assert!(status.is_client_error(), "{status}: {text:?}");
    let error: serde_json::Value =
        serde_json::from_slice(&text).unwrap_or_else(|e| panic!("{e}: {text:?}"));
    assert!(error["error"].is_string(), "{status}: {error}");
});

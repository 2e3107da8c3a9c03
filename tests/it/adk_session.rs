//! In front of an ADK agent (`model.provider: adk`) whose server misbehaves:
//! a mock of ADK's session API on 127.0.0.1:0 (no real ADK needed).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::http::StatusCode;
use axum::routing::get;

use crate::common::{Server, loopback};

/// The session ADK sends is 9 MiB, past the 8 MiB a whole JSON answer may
/// take: toolgate stops reading and the turn ends with an error instead
/// of holding it all (and going on to run the agent).
#[tokio::test]
async fn an_oversized_session_is_refused_not_read_on() -> anyhow::Result<()> {
    let runs = Arc::new(AtomicUsize::new(0));
    let counted = runs.clone();
    let session = format!(
        r#"{{"id":"chat-big","appName":"payments","userId":"anonymous","events":[],"pad":"{}"}}"#,
        "a".repeat(9 << 20)
    );
    let app = axum::Router::new()
        .route(
            "/apps/payments/users/{user}/sessions/{id}",
            get(move || {
                let session = session.clone();
                async move { ([("content-type", "application/json")], session) }
            }),
        )
        .fallback(move || {
            counted.fetch_add(1, Ordering::Relaxed);
            async { StatusCode::INTERNAL_SERVER_ERROR }
        });
    let (listener, url) = loopback().await;
    // A test's upstream: it lives as long as the test's runtime.
    #[allow(clippy::disallowed_methods)]
    tokio::spawn(async move { axum::serve(listener, app).await });

    let yaml = format!("model:\n  provider: adk\n  baseUrl: {url}\n  app: payments\n");
    let server = Server::from_yaml(&yaml).await;
    let reply = server.says("chat-big", "Send 50 USD to Hanako").await;
    let errors = reply.of_type("error");
    assert_eq!(errors.len(), 1, "{}", reply.body);
    let text = errors[0]["errorText"].as_str().unwrap_or_default();
    assert!(
        text.contains("larger than 8388608 bytes"),
        "the error says why: {text}"
    );
    assert_eq!(runs.load(Ordering::Relaxed), 0, "the agent was not run");
    Ok(())
}

//! The `toolgate` binary as a user runs it.

mod common;

use std::process::Command;

use common::{Binary, user_says};

#[tokio::test]
async fn serve_prints_the_real_address_and_answers() {
    let server = Binary::serve(&[]);
    assert!(
        server.url.starts_with("http://127.0.0.1:"),
        "{}",
        server.url
    );
    assert!(!server.url.ends_with(":0"));
    let client = reqwest::Client::new();
    let health = client
        .get(format!("{}/healthz", server.url))
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(health.text().await.ok().as_deref(), Some("ok"));
    let body = client
        .post(format!("{}/stream", server.url))
        .body(user_says("c", "Send 50 USD to Hanako").to_string())
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .text()
        .await
        .unwrap_or_default();
    assert!(
        body.contains(r#""toolName":"adk_request_confirmation""#),
        "{body}"
    );
    assert!(
        body.contains(r#""hint":"Send 50 USD to Hanako?""#),
        "{body}"
    );
}

#[test]
fn an_unknown_config_key_is_an_error_naming_it() {
    let path = std::env::temp_dir().join(format!("toolgate-cli-{}.yaml", std::process::id()));
    std::fs::write(&path, "stream:\n  keepAliveSecs: 5\n  bufferSize: 3\n")
        .unwrap_or_else(|e| panic!("{e}"));
    let output = Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args(["serve", "--bind", "127.0.0.1:0", "--config"])
        .arg(&path)
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let _ = std::fs::remove_file(&path);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("unknown field `bufferSize`"), "{stderr}");
}

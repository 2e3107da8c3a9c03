//! Deciding a confirmation through the API instead of the chat, and a page
//! that reloads restoring its open questions.

use crate::common;
use crate::common::Must;
use crate::common::assert_contains;
use crate::common::from_json;

use common::{Server, fixture, user_says};
use serde_json::{Value, json};

struct Client<'a> {
    server: &'a Server,
    http: reqwest::Client,
}

impl<'a> Client<'a> {
    /// Alice's client, once she has asked to pay Hanako in `chat-pay`.
    async fn asked(server: &'a Server) -> Self {
        let client = Client {
            server,
            http: reqwest::Client::new(),
        };
        client
            .chat("alice", user_says("chat-pay", "Send 50 USD to Hanako"))
            .await;
        client
    }

    async fn send(&self, user: &str, request: reqwest::RequestBuilder) -> (u16, String) {
        let response = request.header("x-user", user).send().await.must();
        (
            response.status().as_u16(),
            response.text().await.unwrap_or_default(),
        )
    }

    async fn chat(&self, user: &str, body: Value) -> common::Reply {
        let (status, body) = self
            .send(
                user,
                self.http
                    .post(format!("{}/stream", self.server.url))
                    .header("content-type", "application/json")
                    .body(body.to_string()),
            )
            .await;
        common::Reply {
            status,
            headers: Default::default(),
            body,
        }
    }

    async fn open(&self, user: &str) -> Value {
        let url = format!("{}/api/confirmations?chatId=chat-pay", self.server.url);
        let (_, body) = self.send(user, self.http.get(url)).await;
        from_json(&body)
    }

    async fn decide(&self, user: &str, id: &str, decision: Value) -> (u16, Value) {
        let url = format!("{}/api/confirmations/{id}", self.server.url);
        let (status, body) = self
            .send(
                user,
                self.http
                    .post(url)
                    .header("content-type", "application/json")
                    .body(decision.to_string()),
            )
            .await;
        (status, serde_json::from_str(&body).unwrap_or(Value::Null))
    }
}

async fn server() -> Server {
    let mut config = toolgate::Config::default();
    config.auth.principal_header = Some("x-user".into());
    Server::with_config(config).await
}

#[tokio::test]
async fn approve_through_the_api_then_the_chat_reports_it() {
    let server = server().await;
    let client = Client::asked(&server).await;

    let open = client.open("alice").await;
    assert_eq!(open.as_array().map(Vec::len), Some(1));
    assert_eq!(open[0]["id"], "adk-3");
    assert_eq!(
        open[0]["originalFunctionCall"],
        json!({"id": "call-2", "name": "process_payment", "args": {"amount": 50, "recipient": "Hanako", "currency": "USD"}})
    );
    assert_eq!(open[0]["hint"], "Send 50 USD to Hanako?");
    // What a card needs: the time left on the server's clock, and whether
    // the arguments may be edited (not without `editable: true`).
    assert_eq!(open[0]["expiresInMs"], 86_400_000);
    assert_eq!(open[0]["editable"], false);
    assert_eq!(
        client.open("mallory").await,
        json!([]),
        "another user sees nothing"
    );
    let (status, _) = client
        .decide("mallory", "adk-3", json!({"approved": true}))
        .await;
    assert_eq!(status, 404);

    let (status, first) = client
        .decide("alice", "adk-3", json!({"approved": true}))
        .await;
    assert_eq!(status, 200, "{first}");
    assert_eq!(first["outcome"]["kind"], "output");
    assert_eq!(first["outcome"]["output"]["status"], "completed");
    assert_eq!(server.payments(), 1);
    let (status, again) = client
        .decide("alice", "adk-3", json!({"approved": true}))
        .await;
    assert_eq!(
        (status, &again),
        (200, &first),
        "the same decision twice is fine"
    );
    let (status, conflict) = client
        .decide("alice", "adk-3", json!({"approved": false}))
        .await;
    assert_eq!(
        (status, conflict),
        (
            409,
            json!({"error": "confirmation `adk-3` was already approved"})
        )
    );
    assert_eq!(client.open("alice").await, json!([]));
    // Every attempt is in the audit log, the refused ones too.
    let (_, log) = client
        .send(
            "alice",
            client.http.get(format!("{}/api/audit", server.url)),
        )
        .await;
    let decisions: Vec<String> = log
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .map(|e| e["decision"].as_str().unwrap_or("").to_owned())
        .collect();
    assert_eq!(decisions, ["asked", "approved", "replayed", "refused"]);
    let (_, theirs) = client
        .send(
            "mallory",
            client.http.get(format!("{}/api/audit", server.url)),
        )
        .await;
    assert_contains(
        &theirs,
        r#""reason":"no confirmation `adk-3` for this user""#,
    );

    // The page still shows the question; its next request learns the outcome.
    let reply = client
        .chat("alice", fixture("pay_hanako_unanswered.json"))
        .await;
    assert_eq!(
        reply.of_type("tool-output-available")[0],
        json!({"type": "tool-output-available", "toolCallId": "adk-3", "output": {"confirmed": true}})
    );
    assert_eq!(reply.text(), common::paid_hanako(&first));
    assert_eq!(server.payments(), 1);
}

#[tokio::test]
async fn deny_through_the_api() {
    let server = server().await;
    let client = Client::asked(&server).await;
    let (status, denied) = client
        .decide(
            "alice",
            "adk-3",
            json!({"approved": false, "reason": "not today"}),
        )
        .await;
    assert_eq!(
        (status, denied),
        (
            200,
            json!({"id": "adk-3", "outcome": {"kind": "denied", "reason": "not today"}})
        )
    );
    let (status, _) = client
        .decide("alice", "adk-3", json!({"approved": true}))
        .await;
    assert_eq!(status, 409);
    let reply = client
        .chat("alice", fixture("pay_hanako_unanswered.json"))
        .await;
    assert_eq!(
        reply.text(),
        "The process_payment call was denied: not today."
    );
    assert_eq!(server.payments(), 0);
}

#[tokio::test]
async fn a_bad_decision_body_is_a_clear_400() {
    let server = server().await;
    let client = Client::asked(&server).await;
    for (body, error) in [
        (
            json!({}),
            r#"invalid request: missing `approved` (`confirmed`), or `decision: "respond"`"#,
        ),
        (
            json!({"approved": true, "bogus": 1}),
            "invalid request: unknown key `bogus`",
        ),
        (
            json!({"approved": true, "remember": "forever"}),
            r#"invalid JSON body: invalid value: string "forever", expected "once", "session", "global" or {"scope": "window", "minutes": N} at line 1 column 38"#,
        ),
    ] {
        assert_eq!(
            client.decide("alice", "adk-3", body).await,
            (400, json!({"error": error}))
        );
    }
    assert_eq!(server.payments(), 0);
}

//! Notifications: a question delivered to a real local receiver (an axum
//! server on 127.0.0.1:0 that checks the signature with its own HMAC code
//! and records what it got), retried, recorded in the audit log; and the
//! signed links: GET shows, POST decides once, a tampered token decides
//! nothing.

use crate::common::Must;
use crate::common::assert_contains;
use serde_json::{Value, json};
use toolgate::Config;

use crate::common::receiver::{PUBLIC_URL, Receiver, SECRET_ENV, secret, webhook};
use crate::common::{START_MS, Server, fixture, paid_hanako, user_says, wait};

async fn server(yaml: &str) -> Server {
    let config = Config::from_yaml(yaml).must();
    Server::with_config(config).await
}

/// The path of a link, to follow it on the server under test.
fn path(link: &Value) -> String {
    let link = link.as_str().unwrap_or_else(|| panic!("no link: {link}"));
    link.strip_prefix(PUBLIC_URL)
        .unwrap_or_else(|| panic!("{link} is not under {PUBLIC_URL}"))
        .to_owned()
}

/// The audit log's events of one decision.
async fn audit(server: &Server, decision: &str) -> Vec<Value> {
    server
        .get("/api/audit")
        .await
        .json_lines()
        .into_iter()
        .filter(|e| e["decision"] == decision)
        .collect()
}

/// Waits until the audit log holds an event of `decision`.
async fn audited(server: &Server, decision: &str) -> Vec<Value> {
    wait::until_ok(&format!("a `{decision}` audit event"), || async {
        let events = audit(server, decision).await;
        if events.is_empty() {
            Err("none".to_owned())
        } else {
            Ok(events)
        }
    })
    .await
}

/// A POST as the link's page sends it: JSON, from its own origin.
async fn press(server: &Server, path: &str, body: Value) -> (u16, Value) {
    press_from(server, path, body, &server.url).await
}

async fn press_from(server: &Server, path: &str, body: Value, origin: &str) -> (u16, Value) {
    let response = reqwest::Client::new()
        .post(format!("{}{path}", server.url))
        .header("content-type", "application/json")
        .header("origin", origin)
        .header("sec-fetch-site", "same-origin")
        .body(body.to_string())
        .send()
        .await
        .must();
    let status = response.status().as_u16();
    let body = response.text().await.unwrap_or_default();
    (status, serde_json::from_str(&body).unwrap_or(Value::Null))
}

#[tokio::test]
async fn a_question_is_delivered_signed_with_links() {
    let receiver = Receiver::start(&[200]).await;
    let server = server(&webhook(&receiver)).await;
    let reply = server.says("chat-pay", "Send 50 USD to Hanako").await;
    assert!(
        reply
            .of_type("tool-input-available")
            .iter()
            .any(|c| c["toolCallId"] == "adk-3"),
        "the card is shown: {}",
        reply.body
    );
    let got = receiver.until(1).await;
    let got = &got[0];
    assert!(got.signed_with(&secret()), "{got:?}");
    assert!(!got.signed_with("another key"));
    assert_eq!(
        got.headers["x-toolgate-timestamp"],
        (START_MS / 1_000).to_string()
    );
    assert_eq!(got.headers["content-type"], "application/json");
    let mut body = got.json();
    let links = body
        .as_object_mut()
        .and_then(|b| b.remove("links"))
        .unwrap_or_default();
    assert_eq!(
        body,
        json!({
            "type": "confirmation.requested",
            "id": "adk-3",
            "chatId": "chat-pay",
            "requester": "anonymous",
            "tool": "internal--process_payment",
            "call": {"id": "call-2", "name": "process_payment", "args": {"amount": 50, "recipient": "Hanako", "currency": "USD"}},
            "hint": "Send 50 USD to Hanako?",
            "issuedAtMs": START_MS,
            "expiresAtMs": START_MS + 86_400_000,
        })
    );
    let (approve, deny) = (path(&links["approve"]), path(&links["deny"]));
    assert!(approve.starts_with("/confirmations/link/"), "{approve}");
    assert!(deny.starts_with("/confirmations/link/") && deny != approve);
    let delivered = audited(&server, "notified").await;
    assert_eq!(delivered.len(), 1);
    assert_eq!(
        delivered[0]["by"],
        format!("webhook 1 ({})", receiver.host())
    );
    assert_eq!(delivered[0]["reason"], Value::Null);
    assert_eq!(delivered[0]["confirmationId"], "adk-3");
    assert_eq!(server.payments(), 0);
}

#[tokio::test]
async fn a_failing_receiver_is_retried_and_the_delivery_recorded() {
    let flaky = Receiver::start(&[500, 200]).await;
    let down = Receiver::start(&[503]).await;
    let refusing = Receiver::start(&[404]).await;
    let yaml = format!(
        "toolConfirmation:\n  publicUrl: {PUBLIC_URL}\n  notify:\n{}",
        [&flaky, &down, &refusing]
            .iter()
            .map(|r| format!(
                "    - {{webhook: '{}/hook', secretEnv: {SECRET_ENV}}}\n",
                r.url
            ))
            .collect::<String>()
    );
    let server = server(&yaml).await;
    server.says("chat-pay", "Send 50 USD to Hanako").await;
    let got = flaky.until(2).await;
    assert_eq!(got[0].body, got[1].body, "the same question again");
    assert!(got.iter().all(|g| g.signed_with(&secret())));
    wait::until_ok("three deliveries recorded", || async {
        let events = audit(&server, "notified").await;
        if events.len() == 3 {
            Ok(())
        } else {
            Err(format!("{events:?}"))
        }
    })
    .await;
    let events = audit(&server, "notified").await;
    let by_reason: Vec<(String, Value)> = events
        .iter()
        .map(|e| {
            (
                e["by"].as_str().unwrap_or("").to_owned(),
                e["reason"].clone(),
            )
        })
        .collect();
    for (name, reason) in [
        (format!("webhook 1 ({})", flaky.host()), Value::Null),
        (
            format!("webhook 2 ({})", down.host()),
            json!("status 503 after 3 attempts"),
        ),
        (
            format!("webhook 3 ({})", refusing.host()),
            json!("status 404"),
        ),
    ] {
        assert!(
            by_reason.contains(&(name.clone(), reason.clone())),
            "{name}: {reason} not in {by_reason:?}"
        );
    }
    assert_eq!(down.got().len(), 3, "three attempts");
    assert_eq!(refusing.got().len(), 1, "a 4xx is not retried");
    let log = server.get("/api/audit").await.body;
    assert!(!log.contains("/hook"), "no URL in the audit log: {log}");
}

#[tokio::test]
async fn the_slack_body() {
    let receiver = Receiver::start(&[200]).await;
    let yaml = format!(
        "toolConfirmation:\n  publicUrl: {PUBLIC_URL}/\n  notify:\n    - {{slack: '{}/services/T0/B0/SECRET'}}\n",
        receiver.url
    );
    let server = server(&yaml).await;
    server.says("chat-pay", "Send 50 USD to Hanako").await;
    let got = receiver.until(1).await;
    assert!(!got[0].headers.contains_key("x-toolgate-signature"));
    let body = got[0].json();
    assert_eq!(
        body["text"],
        "Approval needed: Send 50 USD to Hanako? (internal--process_payment, requested by anonymous)"
    );
    assert_eq!(
        body["blocks"][0],
        json!({"type": "section", "text": {"type": "plain_text", "emoji": false,
            "text": "Send 50 USD to Hanako?\nTool: internal--process_payment\nRequested by: anonymous"}})
    );
    let actions = &body["blocks"][1];
    assert_eq!(actions["type"], "actions");
    let buttons = actions["elements"]
        .as_array()
        .unwrap_or_else(|| panic!("{actions}"));
    assert_eq!(buttons.len(), 2);
    for (button, text) in buttons.iter().zip(["Approve", "Deny"]) {
        assert_eq!(button["type"], "button");
        assert_eq!(button["text"], json!({"type": "plain_text", "text": text}));
        assert!(path(&button["url"]).starts_with("/confirmations/link/"));
    }
    let events = audited(&server, "notified").await;
    assert_eq!(events[0]["by"], "slack 1");
    let log = server.get("/api/audit").await.body;
    assert!(!log.contains("SECRET"), "{log}");
}

/// A server whose question `adk-3` was delivered: its approve and deny paths.
async fn asked() -> (Server, Receiver, String, String) {
    let receiver = Receiver::start(&[200]).await;
    let server = server(&webhook(&receiver)).await;
    server.says("chat-pay", "Send 50 USD to Hanako").await;
    let body = receiver.until(1).await[0].json();
    let (approve, deny) = (
        path(&body["links"]["approve"]),
        path(&body["links"]["deny"]),
    );
    (server, receiver, approve, deny)
}

#[tokio::test]
async fn get_on_a_link_decides_nothing() {
    let (server, _receiver, approve, deny) = asked().await;
    for _ in 0..3 {
        let page = server.get(&approve).await;
        assert_eq!(page.status, 200, "{}", page.body);
        assert!(
            page.body.contains("Send 50 USD to Hanako?"),
            "{}",
            page.body
        );
        assert!(page.body.contains("internal--process_payment"));
        assert!(page.body.contains("anonymous"));
        assert!(
            page.body
                .contains(r#"<button id="decide" type="button" class="approve">Approve</button>"#)
        );
    }
    let page = server.get(&deny).await;
    assert!(
        page.body.contains(r#"<textarea id="reason""#),
        "{}",
        page.body
    );
    assert!(page.body.contains(">Deny</button>"));
    assert_eq!(page.headers["content-type"], "text/html; charset=utf-8");
    assert_eq!(page.headers["cache-control"], "no-store");
    assert_eq!(page.headers["referrer-policy"], "no-referrer");
    let policy = page.headers["content-security-policy"]
        .to_str()
        .unwrap_or_default();
    assert!(
        policy.starts_with("default-src 'none'; script-src 'sha256-")
            && policy.contains("connect-src 'self'")
            && !policy.contains("unsafe"),
        "{policy}"
    );
    assert!(!page.body.contains("src=") && !page.body.contains("href="));
    let open = server.get("/api/confirmations?chatId=chat-pay").await;
    let open: Value = serde_json::from_str(&open.body).unwrap_or_default();
    assert_eq!(open[0]["id"], "adk-3", "still open: {open}");
    assert_eq!(server.payments(), 0);
}

#[tokio::test]
async fn the_approve_link_runs_the_call_once() {
    let (server, receiver, approve, deny) = asked().await;
    // The page's own fetch: JSON, from the page's origin.
    let (status, first) = press(&server, &approve, json!({})).await;
    assert_eq!(status, 200, "{first}");
    assert_eq!(first["id"], "adk-3");
    assert_eq!(first["decision"], "approve");
    assert_eq!(first["outcome"]["kind"], "output");
    assert_eq!(first["outcome"]["output"]["status"], "completed");
    assert_eq!(server.payments(), 1);
    let (status, again) = press(&server, &approve, json!({})).await;
    assert_eq!((status, &again), (200, &first), "the recorded outcome");
    assert_eq!(server.payments(), 1, "not run again");
    let (status, conflict) = press(&server, &deny, json!({"reason": "no"})).await;
    assert_eq!(
        (status, conflict),
        (
            409,
            json!({"error": "confirmation `adk-3` was already approved"})
        )
    );
    let page = server.get(&approve).await;
    assert!(
        page.body.contains("Already approved: the call ran."),
        "{}",
        page.body
    );
    assert!(!page.body.contains(r#"id="decide""#));

    let approved = audit(&server, "approved").await;
    assert_eq!(
        approved[0]["by"],
        format!(
            "user through a signed link (webhook 1 ({}))",
            receiver.host()
        )
    );
    // The chat's next request reports the outcome.
    let reply = server.chat(&fixture("pay_hanako_unanswered.json")).await;
    assert_eq!(reply.text(), paid_hanako(&first));
    assert_eq!(server.payments(), 1);
}

#[tokio::test]
async fn the_deny_link_takes_a_reason() {
    let (server, _receiver, approve, deny) = asked().await;
    let (status, refused) = press(&server, &approve, json!({"reason": "why"})).await;
    assert_eq!(
        (status, refused),
        (
            400,
            json!({"error": "invalid request: an approval takes no reason"})
        )
    );
    let (status, denied) = press(&server, &deny, json!({"reason": "not today"})).await;
    assert_eq!(
        (status, denied),
        (
            200,
            json!({"id": "adk-3", "decision": "deny", "outcome": {"kind": "denied", "reason": "not today"}})
        )
    );
    let page = server.get(&approve).await;
    assert!(page.body.contains("Already denied."), "{}", page.body);
    assert_eq!(server.payments(), 0);
}

#[tokio::test]
async fn a_tampered_or_expired_link_is_refused() {
    let (server, _receiver, approve, _deny) = asked().await;
    // The id part of the token, changed by one character.
    let (head, token) = approve
        .rsplit_once('/')
        .unwrap_or_else(|| panic!("{approve}"));
    let mut parts: Vec<String> = token.split('.').map(str::to_owned).collect();
    let id = parts[1].clone();
    parts[1] = format!(
        "{}{}",
        &id[..id.len() - 1],
        if id.ends_with('A') { "B" } else { "A" }
    );
    let tampered = format!("{head}/{}", parts.join("."));
    let page = server.get(&tampered).await;
    assert_eq!(page.status, 403);
    assert!(
        page.body.contains("this link is not valid"),
        "{}",
        page.body
    );
    let (status, body) = press(&server, &tampered, json!({})).await;
    assert_eq!(
        (status, body),
        (403, json!({"error": "this link is not valid"}))
    );
    for garbage in [
        "/confirmations/link/adk-3",
        "/confirmations/link/v1.a.b.c.d.e",
    ] {
        assert_eq!(press(&server, garbage, json!({})).await.0, 403, "{garbage}");
    }
    // Another origin's page cannot press the button.
    let (status, _) = press_from(&server, &approve, json!({}), "https://evil.example").await;
    assert_eq!(status, 403);
    assert_eq!(server.payments(), 0);

    server
        .clock
        .advance(std::time::Duration::from_millis(86_400_001));
    let page = server.get(&approve).await;
    assert_eq!(page.status, 410);
    assert!(page.body.contains("this link has expired"), "{}", page.body);
    let (status, body) = press(&server, &approve, json!({})).await;
    assert_eq!(
        (status, body),
        (410, json!({"error": "this link has expired"}))
    );
    assert_eq!(server.payments(), 0);
}

#[tokio::test]
async fn notification_settings_are_checked() {
    let error = |yaml: &str| {
        toolgate::config::Settings::from_yaml(yaml)
            .err()
            .map(|e| e.to_string())
    };
    assert_eq!(
        error(&format!(
            "toolConfirmation:\n  publicUrl: {PUBLIC_URL}\n  notify: [{{webhook: 'https://h.example', secretEnv: TOOLGATE_TEST_UNSET_VARIABLE}}]\n"
        )),
        Some("invalid config: toolConfirmation.notify[1]: environment variable TOOLGATE_TEST_UNSET_VARIABLE (secretEnv) is not set".into())
    );
    assert_eq!(
        error("toolConfirmation:\n  notify: [{slack: 'https://hooks.slack.com/services/SECRET'}]\n"),
        Some("invalid config: toolConfirmation.publicUrl: required when notification targets are configured: the links lead there".into())
    );
    assert_eq!(
        error(&format!(
            "toolConfirmation:\n  tools:\n    process_payment:\n      notify: [{{webhook: 'https://h.example'}}]\n  publicUrl: {PUBLIC_URL}\n"
        )),
        Some("invalid config: toolConfirmation.tools.process_payment.notify[1]: a webhook needs secretEnv: the environment variable holding its signing key".into())
    );
    let unknown =
        error("toolConfirmation:\n  notify: [{slack: 'https://s.example', channel: x}]\n")
            .unwrap_or_default();
    assert_contains(&unknown, "unknown field `channel`");
    assert_eq!(
        error(&format!(
            "toolConfirmation:\n  publicUrl: {PUBLIC_URL}\n  notify: [{{slack: 'https://s.example/SECRET'}}]\n"
        )),
        None
    );
}

#[tokio::test]
async fn a_tools_own_targets_replace_the_default() {
    let default = Receiver::start(&[200]).await;
    let own = Receiver::start(&[200]).await;
    let yaml = format!(
        "toolConfirmation:\n  publicUrl: {PUBLIC_URL}\n  notify:\n    - {{webhook: '{}/d', secretEnv: {SECRET_ENV}}}\n  tools:\n    process_payment:\n      notify:\n        - {{webhook: '{}/own', secretEnv: {SECRET_ENV}}}\n",
        default.url, own.url
    );
    let server = server(&yaml).await;
    server.says("chat-pay", "Send 50 USD to Hanako").await;
    own.until(1).await;
    let events = audited(&server, "notified").await;
    assert_eq!(
        events[0]["by"],
        format!("webhook 1 ({}) for process_payment", own.host())
    );
    assert!(default.got().is_empty());
}

#[tokio::test]
async fn a_link_needs_no_api_key() -> anyhow::Result<()> {
    use sha2::Digest;
    let receiver = Receiver::start(&[200]).await;
    let hash = hex::encode(sha2::Sha256::digest(b"alice-key"));
    let yaml = format!(
        "{}auth:\n  apiKeys: [{{principal: alice, sha256: '{hash}'}}]\n",
        webhook(&receiver)
    );
    let server = server(&yaml).await;
    let asked = reqwest::Client::new()
        .post(format!("{}/stream", server.url))
        .header("content-type", "application/json")
        .header("authorization", "Bearer alice-key")
        .body(user_says("chat-pay", "Send 50 USD to Hanako").to_string())
        .send()
        .await?;
    assert_eq!(asked.status(), 200);
    let body = receiver.until(1).await[0].json();
    assert_eq!(body["requester"], "alice");
    assert_eq!(server.get("/api/audit").await.status, 401, "keys are on");
    let approve = path(&body["links"]["approve"]);
    assert_eq!(server.get(&approve).await.status, 200);
    let (status, decided) = press(&server, &approve, json!({})).await;
    assert_eq!(status, 200, "{decided}");
    assert_eq!(server.payments(), 1);
    Ok(())
}

/// With approvers, a link decides as whoever follows it (here named by the
/// proxy's principal header): the same approvers and four eyes as the API.
#[tokio::test]
async fn a_link_to_a_question_with_approvers_checks_who_follows_it() -> anyhow::Result<()> {
    let receiver = Receiver::start(&[200]).await;
    let yaml = format!(
        "{}auth:\n  principalHeader: X-User\n  roles: {{finance: [lead]}}\n",
        webhook(&receiver).replace(
            "toolConfirmation:\n",
            "toolConfirmation:\n  tools:\n    process_payment: {approvers: [role:finance], requireDistinctApprover: true}\n",
        )
    );
    let server = server(&yaml).await;
    let body = user_says("chat-pay", "Send 50 USD to Hanako").to_string();
    server
        .post_with("/stream", &[("x-user", "clerk")], body)
        .await;
    let approve = path(&receiver.until(1).await[0].json()["links"]["approve"]);
    let follow = |who: Option<&'static str>| {
        let mut request = reqwest::Client::new()
            .post(format!("{}{approve}", server.url))
            .header("content-type", "application/json")
            .header("origin", &server.url);
        if let Some(who) = who {
            request = request.header("x-user", who);
        }
        async move {
            let response = request.body("{}").send().await.must();
            let status = response.status().as_u16();
            let text = response.text().await.unwrap_or_default();
            let body: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
            (status, body["error"].as_str().unwrap_or("").to_owned())
        }
    };
    let (status, why) = follow(None).await;
    assert_eq!(status, 403, "{why}");
    assert_contains(&why, "sign in to decide through a link");
    let (status, why) = follow(Some("clerk")).await;
    assert_eq!(status, 403, "{why}");
    assert_contains(&why, "may not approve this call themselves");
    assert_eq!(server.payments(), 0);
    let (status, why) = follow(Some("lead")).await;
    assert_eq!(status, 200, "{why}");
    assert_eq!(server.payments(), 1);
    Ok(())
}

/// The whole story: a clerk's payment waits for a finance approver, who is
/// told with a signed link and approves through it; the clerk keeps
/// chatting meanwhile and the chat then learns the outcome. A second
/// payment nobody answers ends as expired everywhere it shows.
#[tokio::test]
async fn a_clerks_payment_waits_for_finance_who_approves_from_the_link() -> anyhow::Result<()> {
    let receiver = Receiver::start(&[200, 200]).await;
    let yaml = format!(
        "{}auth:\n  principalHeader: X-User\n  roles: {{finance: [lead]}}\n",
        webhook(&receiver).replace(
            "toolConfirmation:\n",
            "toolConfirmation:\n  timeout: 60000\n  tools:\n    process_payment: {approvers: [role:finance], requireDistinctApprover: true}\n",
        )
    );
    let server = server(&yaml).await;
    let clerk = [("x-user", "clerk")];
    let ask = user_says("chat-pay", "Send 50 USD to Hanako").to_string();
    let asked = server.post_with("/stream", &clerk, ask).await;
    assert!(
        asked.body.contains("waiting for approval by role:finance"),
        "{}",
        asked.body
    );
    let delivered = receiver.until(1).await[0].json();
    assert_eq!(delivered["requester"], "clerk");
    let approve = path(&delivered["links"]["approve"]);

    // The clerk keeps chatting while the card waits.
    let mut chat = fixture("pay_hanako_unanswered.json");
    chat["messages"][1]["parts"][1]["input"]["toolConfirmation"]["hint"] =
        json!("Send 50 USD to Hanako? (waiting for approval by role:finance)");
    if let Some(messages) = chat["messages"].as_array_mut() {
        messages.push(json!({"id": "u2", "role": "user", "parts": [{"type": "text", "text": "What's the weather in Paris?"}]}));
    }
    let weather = server.post_with("/stream", &clerk, chat.to_string()).await;
    assert!(weather.text().contains("Paris"), "{}", weather.body);
    assert_eq!(server.payments(), 0);

    // The approver follows the link (signed in through the proxy).
    let approved = reqwest::Client::new()
        .post(format!("{}{approve}", server.url))
        .header("content-type", "application/json")
        .header("origin", &server.url)
        .header("x-user", "lead")
        .body("{}")
        .send()
        .await?;
    assert_eq!(approved.status().as_u16(), 200);
    assert_eq!(server.payments(), 1);

    // The clerk's next message brings the outcome into the chat.
    let later = server.post_with("/stream", &clerk, chat.to_string()).await;
    let brought = later.of_type("data-toolgate-outcome");
    assert_eq!(brought.len(), 1, "{}", later.body);
    assert_eq!(brought[0]["data"]["outcome"]["kind"], "output");

    // A second payment nobody answers: expired in the stream's next
    // message, the API, the audit log and on its link's page.
    let ask = user_says("chat-two", "Send 20 USD to Jiro").to_string();
    server.post_with("/stream", &clerk, ask).await;
    let second = receiver.until(2).await[1].json();
    let id = second["id"].as_str().unwrap_or_default().to_owned();
    server.clock.advance(std::time::Duration::from_secs(61));
    let late = server.approve_with(id, &[("x-user", "lead")]).await;
    assert_eq!(late.status, 410, "{}", late.body);
    let page = server.get(&path(&second["links"]["approve"])).await;
    assert!(
        page.status == 410 || page.body.contains("expired"),
        "{}",
        page.body
    );
    let open = server
        .get_with("/api/confirmations?chatId=chat-two", &clerk)
        .await;
    assert_eq!(open.body, "[]");
    let audit = server.get_with("/api/audit?chatId=chat-two", &clerk).await;
    assert!(
        audit.body.contains(r#""decision":"expired""#),
        "{}",
        audit.body
    );
    assert_eq!(server.payments(), 1);
    Ok(())
}

/// Sends a link POST's head announcing `length` bytes and `sent` of them,
/// and reads the answer (`None` if none came within `limit`: the server
/// was still reading the body).
async fn post_head(
    server: &Server,
    path: &str,
    length: usize,
    sent: &str,
    limit: std::time::Duration,
) -> Option<(u16, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let authority = server.url.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(authority).await.must();
    let head = format!(
        "POST {path} HTTP/1.1\r\nhost: {authority}\r\ncontent-type: application/json\r\ncontent-length: {length}\r\n\r\n{sent}"
    );
    stream.write_all(head.as_bytes()).await.must();
    let mut reply = Vec::new();
    let mut buf = [0u8; 4096];
    let read = async {
        // The head and a short JSON body: up to the body's closing brace.
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => reply.extend_from_slice(&buf[..n]),
            }
            let text = String::from_utf8_lossy(&reply);
            if text.contains("\r\n\r\n") && text.trim_end().ends_with('}') {
                break;
            }
        }
    };
    tokio::time::timeout(limit, read).await.ok()?;
    let text = String::from_utf8_lossy(&reply).into_owned();
    let status = text.split(' ').nth(1)?.parse().ok()?;
    let body = text.split_once("\r\n\r\n")?.1.to_owned();
    Some((status, body))
}

/// No key guards a link's POST: its token is checked before a byte of the
/// body is read, and then only a small body is. The old server read up to
/// `stream.maxBodyBytes` (4 MiB), at a byte per `bodyReadSecs`, first.
#[tokio::test]
async fn a_links_token_is_checked_before_its_body_is_read() {
    let (server, _receiver, approve, _deny) = asked().await;
    let limit = std::time::Duration::from_secs(10);
    // 4 MiB announced, a few bytes sent, then silence (bodyReadSecs: 30).
    let forged = "/confirmations/link/v1.a.b.c.d.e";
    let refused = post_head(&server, forged, 4 << 20, "{\"re", limit).await;
    let (status, body) = refused.unwrap_or_else(|| panic!("the body was read first"));
    assert_eq!(
        (status, body.as_str()),
        (403, r#"{"error":"this link is not valid"}"#)
    );
    // A valid token's body is small: a large one is refused unread.
    let large = post_head(&server, &approve, 1 << 20, "{\"re", limit).await;
    let (status, _) = large.unwrap_or_else(|| panic!("the body was read first"));
    assert_eq!(status, 413);
    assert_eq!(server.payments(), 0);
    // The link still works with a small body.
    let (status, _) = press(&server, &approve, json!({})).await;
    assert_eq!(status, 200);
    assert_eq!(server.payments(), 1);
}

/// One user's burst takes only its share of the delivery slots: alice's 70
/// questions, whose deliveries her receiver never answers, and then bob's
/// one, which is delivered at once; none of alice's is dropped (they wait
/// their turn).
#[tokio::test]
async fn a_burst_of_one_user_does_not_keep_anothers_question_untold() {
    use std::sync::{Arc, Mutex};

    let got: Arc<Mutex<Vec<String>>> = Arc::default();
    let record = got.clone();
    let app = axum::Router::new().fallback(axum::routing::post(move |body: axum::body::Bytes| {
        let record = record.clone();
        async move {
            let body: Value = serde_json::from_slice(&body).unwrap_or_default();
            let requester = body["requester"].as_str().unwrap_or_default().to_owned();
            record
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(requester.clone());
            if requester == "alice" {
                // Alice's receiver is stuck: her deliveries hold their slots.
                std::future::pending::<()>().await;
            }
            axum::http::StatusCode::OK
        }
    }));
    let (listener, url) = crate::common::loopback().await;
    // A test's receiver: it lives as long as the test's runtime.
    #[allow(clippy::disallowed_methods)]
    tokio::spawn(async move { axum::serve(listener, app).await });
    let yaml = format!(
        "toolConfirmation:\n  publicUrl: {PUBLIC_URL}\n  notify:\n    - {{webhook: '{url}/hook', secretEnv: {SECRET_ENV}}}\nauth:\n  principalHeader: X-User\n"
    );
    let server = server(&yaml).await;
    let ask = |who: &'static str, chat: String| {
        let server = &server;
        async move {
            let body = user_says(&chat, "Send 50 USD to Hanako").to_string();
            let reply = server.post_with("/stream", &[("x-user", who)], body).await;
            assert_eq!(
                reply.of_type("tool-input-available").len(),
                1,
                "{}",
                reply.body
            );
        }
    };
    for i in 0..70 {
        ask("alice", format!("chat-{i}")).await;
    }
    ask("bob", "chat-bob".to_owned()).await;

    let told = |who: &str| {
        got.lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter(|r| *r == who)
            .count()
    };
    wait::until_true("bob's question delivered", || told("bob") == 1).await;
    let bobs = wait::until_ok("bob's delivery recorded", || async {
        let reply = server.get_with("/api/audit", &[("x-user", "bob")]).await;
        let mut notified = reply.json_lines();
        notified.retain(|e| e["decision"] == "notified");
        if notified.is_empty() {
            Err(reply.body)
        } else {
            Ok(notified)
        }
    })
    .await;
    assert_eq!(bobs.len(), 1);
    assert_eq!(bobs[0]["reason"], Value::Null, "delivered: {}", bobs[0]);
    // Alice's deliveries wait their turn: a few in flight, none dropped.
    assert!(told("alice") < 70, "{} of alice's in flight", told("alice"));
    let alices = server.get_with("/api/audit", &[("x-user", "alice")]).await;
    assert!(
        !alices.body.contains("\"notified\""),
        "nothing of alice's ended, nothing dropped: {}",
        alices.body
    );
}

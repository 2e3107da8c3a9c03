//! Verified approvers: who decided, and how toolgate knew them, in the
//! audit log; `approverIdentity` refusing a key holder's decision on every
//! face (the API, `/live`, the chat's own answer) and every grant; the
//! inbox's `mayApprove` as the pipeline judges an OIDC caller.

use serde_json::{Value, json};

use super::bearer;
use super::issuer::{Issuer, Key};
use crate::common::ws::{connect, next, send};
use crate::common::{Must, Reply, Server, api_keys, approval, asked, from_json, user_says};
use toolgate::store::Store;

const PAY: &str = "Send 50 USD to Hanako";

/// `auth` with the issuer, keys for `bob` (role finance) and `clerk`,
/// and `process_payment`'s `rule`.
fn config(issuer: &Issuer, rule: &str) -> String {
    let keys = api_keys(&[("bob", "bob-key"), ("clerk", "clerk-key")]);
    let keys = keys.trim_start_matches("auth:\n");
    let auth = issuer.config(&format!("{keys}  roles: {{finance: [bob]}}\n"));
    format!("{auth}toolConfirmation:\n  tools:\n    process_payment: {rule}\n")
}

async fn post(server: &Server, path: &str, credential: &str, body: impl ToString) -> Reply {
    let headers = bearer(credential);
    let headers: Vec<_> = headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
    server.post_with(path, &headers, body.to_string()).await
}

async fn get(server: &Server, path: &str, credential: &str) -> Reply {
    let headers = bearer(credential);
    let headers: Vec<_> = headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
    server.get_with(path, &headers).await
}

/// The id of the question `reply` asks.
fn question(reply: &Reply) -> String {
    crate::common::body::question(&reply.body)
}

/// The events of the audit log `credential` reads with this decision.
async fn audited(server: &Server, credential: &str, decision: &str) -> Vec<Value> {
    let audit = get(server, "/api/audit", credential).await;
    assert_eq!(audit.status, 200, "{}", audit.body);
    audit
        .json_lines()
        .into_iter()
        .filter(|e| e["decision"] == decision)
        .collect()
}

#[tokio::test]
async fn an_oidc_approvers_decision_is_audited_with_its_source_and_subject() {
    let key = Key::ec("k1");
    let issuer = Issuer::start(&[&key]).await;
    let rule = "{approvers: [role:finance], approverIdentity: oidc}";
    let server = Server::from_yaml(&config(&issuer, rule)).await;
    let clerk = key.sign(&issuer.claims("clerk@example.com", &[]));
    let carol = key.sign(&issuer.claims("carol@example.com", &["fin-approvers"]));
    let asked = post(&server, "/stream", &clerk, user_says("chat-pay", PAY)).await;
    let id = question(&asked);
    let path = format!("/api/confirmations/{id}");
    let approve = json!({"approved": true});

    // Bob holds the role, but through a key: not enough for this tool.
    let bob = post(&server, &path, "bob-key", &approve).await;
    assert_eq!(bob.status, 403, "{}", bob.body);
    assert!(bob.body.contains("known by oidc"), "{}", bob.body);
    assert_eq!(server.payments(), 0);

    // The inbox as each sees it: the asker may not approve, Carol may,
    // Bob's key decides nothing of it.
    let inbox = |credential: String| {
        let server = &server;
        async move { from_json::<Value>(&get(server, "/api/confirmations", &credential).await.body) }
    };
    let mine = inbox(clerk.clone()).await;
    assert_eq!(
        (mine[0]["id"].as_str(), mine[0]["mayApprove"].as_bool()),
        (Some(id.as_str()), Some(false)),
        "{mine}"
    );
    let hers = inbox(carol.clone()).await;
    assert_eq!(
        (hers[0]["id"].as_str(), hers[0]["mayApprove"].as_bool()),
        (Some(id.as_str()), Some(true)),
        "{hers}"
    );
    assert_eq!(inbox("bob-key".into()).await, json!([]));
    let stranger = key.sign(&issuer.claims("dave@example.com", &["staff"]));
    assert_eq!(inbox(stranger).await, json!([]));

    let approved = post(&server, &path, &carol, &approve).await;
    assert_eq!(approved.status, 200, "{}", approved.body);
    assert_eq!(server.payments(), 1);

    // Who decided, and how toolgate knew them, in the asker's audit log.
    let approved = audited(&server, &clerk, "approved").await;
    assert_eq!(
        approved[0]["approver"],
        json!({"source": "oidc", "principal": "carol@example.com",
               "issuer": issuer.url, "subject": "sub-carol@example.com"}),
        "{approved:?}"
    );
    let refused = audited(&server, &clerk, "refused").await;
    assert_eq!(
        refused[0]["approver"],
        json!({"source": "key", "principal": "bob"}),
        "{refused:?}"
    );
    let asked = audited(&server, &clerk, "asked").await;
    assert_eq!(asked[0]["approver"], json!({"source": "policy"}));
}

#[tokio::test]
async fn a_key_holders_answer_in_the_chat_or_on_live_is_not_an_oidc_approval() {
    let key = Key::ec("k1");
    let issuer = Issuer::start(&[&key]).await;
    let server = Server::from_yaml(&config(&issuer, "{approverIdentity: oidc}")).await;

    // The asker answers in the chat with a key: refused, nothing runs.
    let first = post(&server, "/stream", "clerk-key", user_says("chat-key", PAY)).await;
    assert_eq!(asked(&first), 1, "{}", first.body);
    let answer = post(
        &server,
        "/stream",
        "clerk-key",
        approval("chat-key", &first),
    )
    .await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert!(answer.body.contains("known by oidc"), "{}", answer.body);
    assert_eq!(server.payments(), 0);

    // On /live, a confirm frame with the key: refused the same way.
    let mut socket = connect(&server).await;
    let id = question(&first);
    send(
        &mut socket,
        json!({"type": "confirm", "confirmationId": id, "confirmed": true,
               "headers": {"authorization": "Bearer clerk-key"}}),
    )
    .await;
    let frame = next(&mut socket).await;
    assert_eq!(frame["type"], "error", "{frame}");
    assert!(
        frame["errorText"]
            .as_str()
            .unwrap_or_default()
            .contains("known by oidc"),
        "{frame}"
    );
    assert_eq!(server.payments(), 0);

    // Signed in, the same user's answer in the chat runs the call.
    let token = key.sign(&issuer.claims("erin@example.com", &[]));
    let first = post(&server, "/stream", &token, user_says("chat-oidc", PAY)).await;
    let answer = post(&server, "/stream", &token, approval("chat-oidc", &first)).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(server.payments(), 1, "{}", answer.body);
    let approved = audited(&server, &token, "approved").await;
    assert_eq!(approved[0]["approver"]["source"], "oidc", "{approved:?}");
    assert_eq!(approved[0]["approver"]["subject"], "sub-erin@example.com");
}

#[tokio::test]
async fn a_key_holders_remembered_approval_decides_no_tool_that_needs_oidc() {
    let key = Key::ec("k1");
    let issuer = Issuer::start(&[&key]).await;
    let store = Store::memory();
    let on = |rule: &str| {
        let config = toolgate::Config::from_yaml(&config(&issuer, rule)).must();
        let store = store.clone();
        // Ids unlike the other server's: both write to one store.
        Server::with(config, move |app| {
            app.with_store(store).with_ids(toolgate::ids::Ids::random())
        })
    };
    // No least identity yet: the clerk's key approves, remembered everywhere.
    let before = on("{editable: false}").await;
    let first = post(&before, "/stream", "clerk-key", user_says("chat-1", PAY)).await;
    let mut remember = approval("chat-1", &first);
    remember["messages"][1]["parts"][1]["output"]["remember"] = json!("global");
    let answer = post(&before, "/stream", "clerk-key", remember).await;
    assert_eq!(before.payments(), 1, "{}", answer.body);
    let again = post(&before, "/stream", "clerk-key", user_says("chat-2", PAY)).await;
    assert_eq!((asked(&again), before.payments()), (0, 2), "{}", again.body);

    // The tool now needs an OIDC approver: the grant decides nothing.
    let after = on("{approverIdentity: oidc}").await;
    let asks = post(&after, "/stream", "clerk-key", user_says("chat-3", PAY)).await;
    assert_eq!(asks.status, 200, "{}", asks.body);
    assert_eq!((asked(&asks), after.payments()), (1, 0), "{}", asks.body);
    // And a signed-in approval may not be remembered for it either.
    let token = key.sign(&issuer.claims("erin@example.com", &[]));
    let first = post(&after, "/stream", &token, user_says("chat-4", PAY)).await;
    let id = question(&first);
    let path = format!("/api/confirmations/{id}");
    let remembered = post(
        &after,
        &path,
        &token,
        json!({"approved": true, "remember": "global"}),
    )
    .await;
    assert_eq!(remembered.status, 400, "{}", remembered.body);
    assert!(
        remembered.body.contains("`remember`"),
        "{}",
        remembered.body
    );
    assert_eq!(after.payments(), 0);
}

#[test]
fn config_check_wants_an_approver_identity_someone_can_have() {
    let rule = |auth: &str, rule: &str| {
        format!("{auth}toolConfirmation:\n  tools:\n    process_payment: {rule}\n")
    };
    let header = "auth:\n  principalHeader: X-User\n";
    let keys = api_keys(&[("bob", "bob-key")]);
    let cases = [
        (
            rule(header, "{approverIdentity: oidc}"),
            Some("process_payment.approverIdentity"),
        ),
        (
            rule(header, "{approverIdentity: key}"),
            Some("process_payment.approverIdentity"),
        ),
        (rule(header, "{approverIdentity: proxy-header}"), None),
        (rule(&keys, "{approverIdentity: key}"), None),
        (
            rule(
                &keys,
                "{approvers: [bob], escalate: [{when: 'amount > 1', approvers: [bob], approverIdentity: oidc}]}",
            ),
            Some("process_payment.escalate[0].approverIdentity"),
        ),
    ];
    for (yaml, bad) in cases {
        let config = toolgate::Config::from_yaml(&yaml).must();
        let error = toolgate::config::Settings::new(config)
            .err()
            .map(|e| e.to_string());
        match bad {
            Some(key) => assert!(
                error.as_deref().unwrap_or_default().contains(key),
                "{yaml}: {error:?}"
            ),
            None => assert_eq!(error, None, "{yaml}"),
        }
    }
    let typo = rule(&keys, "{approverIdentity: password}");
    assert!(toolgate::Config::from_yaml(&typo).is_err(), "{typo}");
}

#[tokio::test]
async fn the_mcp_face_asks_in_the_client_only_a_user_known_as_the_tool_needs() {
    use crate::mcp_face::{Client, is_error, pay, request_state, text_of};
    let key = Key::ec("k1");
    let issuer = Issuer::start(&[&key]).await;
    let server = Server::from_yaml(&config(&issuer, "{approverIdentity: oidc}")).await;

    // A key's user is not asked in the client, and an answer anyway decides nothing.
    let by_key = Client::new(&server).with_header("authorization", "Bearer clerk-key");
    let first = by_key.call("process_payment", pay(5), json!({})).await;
    assert_eq!(first["result"]["resultType"], "input_required", "{first}");
    assert_eq!(first["result"]["inputRequests"], Value::Null, "{first}");
    let answer = json!({"requestState": request_state(&first),
        "inputResponses": {"approval": {"action": "accept", "content": {"approve": true}}}});
    let second = by_key.call("process_payment", pay(5), answer).await;
    assert_eq!(second["result"]["resultType"], "input_required", "{second}");
    assert_eq!(server.payments(), 0);

    // Signed in, the same form approves, audited as the token's subject.
    let token = key.sign(&issuer.claims("erin@example.com", &[]));
    let signed_in = Client::new(&server).with_header("authorization", &format!("Bearer {token}"));
    let first = signed_in.call("process_payment", pay(5), json!({})).await;
    let form = &first["result"]["inputRequests"]["approval"];
    assert_eq!(form["method"], "elicitation/create", "{first}");
    let answer = json!({"requestState": request_state(&first),
        "inputResponses": {"approval": {"action": "accept", "content": {"approve": true}}}});
    let second = signed_in.call("process_payment", pay(5), answer).await;
    assert!(!is_error(&second), "{second}");
    assert!(text_of(&second).contains("completed"), "{second}");
    assert_eq!(server.payments(), 1);
    let approved = audited(&server, &token, "approved").await;
    assert_eq!(approved[0]["approver"]["source"], "oidc", "{approved:?}");
    assert_eq!(approved[0]["client"], "hand-client 1.2.3");
}

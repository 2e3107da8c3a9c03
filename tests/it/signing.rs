//! Signed confirmations: the signature travels through the client in
//! `providerMetadata` / `callProviderMetadata`, is checked before any store
//! lookup, and keys can be rotated.

use crate::common;

use common::{Server, fixture};
use serde_json::{Value, json};
use toolgate::Config;
use toolgate::confirm::Signer;
use toolgate::store::Store;

fn signer(keys: &[&str]) -> Option<Signer> {
    Signer::new(keys.iter().map(|k| (*k).to_owned()))
}

async fn signed_server(keys: &[&str], store: Store) -> Server {
    let signer = signer(keys);
    Server::with(Config::default(), move |app| {
        app.with_signer(signer).with_store(store)
    })
    .await
}

/// Asks for the payment; returns the `providerMetadata` sent with the question.
async fn ask(server: &Server) -> Value {
    let reply = server.says("chat-pay", "Send 50 USD to Hanako").await;
    reply.of_type("tool-input-available")[0]["providerMetadata"].clone()
}

fn answer_with(metadata: Value) -> Value {
    let mut body = fixture("pay_hanako_approved.json");
    body["messages"][1]["parts"][1]["callProviderMetadata"] = metadata;
    body
}

fn rejection(reply: &common::Reply) -> String {
    reply
        .of_type("tool-output-error")
        .first()
        .map_or_else(String::new, |c| {
            c["errorText"].as_str().unwrap_or("").to_owned()
        })
}

const BAD_SIGNATURE: &str = "confirmation signature is missing or does not match";

#[tokio::test]
async fn a_signed_confirmation_runs_and_an_unsigned_or_tampered_one_does_not() {
    let server = signed_server(&["k1"], Store::memory()).await;
    let metadata = ask(&server).await;
    let signature = metadata["toolgate"]["signature"].as_str().unwrap_or("");
    // `<key id>-<hex HMAC>`: the seal names the key that made it.
    let (key, mac) = signature.split_once('-').unwrap_or_default();
    assert_eq!(key, toolgate::notify::key_id(b"k1"), "{metadata}");
    assert_eq!(mac.len(), 64, "{metadata}");
    assert!(metadata["toolgate"]["expiresAt"].is_u64());

    let unsigned = server.chat(&fixture("pay_hanako_approved.json")).await;
    assert_eq!(rejection(&unsigned), BAD_SIGNATURE);
    let mut tampered = metadata.clone();
    let flipped = if mac.starts_with("00") { "11" } else { "00" };
    tampered["toolgate"]["signature"] = json!(format!("{key}-{flipped}{}", &mac[2..]));
    assert_eq!(
        rejection(&server.chat(&answer_with(tampered.clone())).await),
        BAD_SIGNATURE
    );
    // The right MAC under another key's id is refused too.
    tampered["toolgate"]["signature"] = json!(format!("{}-{mac}", toolgate::notify::key_id(b"k2")));
    assert_eq!(
        rejection(&server.chat(&answer_with(tampered)).await),
        BAD_SIGNATURE
    );
    let mut later = metadata.clone();
    later["toolgate"]["expiresAt"] =
        json!(metadata["toolgate"]["expiresAt"].as_u64().unwrap_or(0) + 1);
    assert_eq!(
        rejection(&server.chat(&answer_with(later)).await),
        BAD_SIGNATURE
    );
    let mut forged = answer_with(metadata.clone());
    forged["messages"][1]["parts"][1]["input"]["originalFunctionCall"]["args"]["amount"] =
        json!(5000);
    assert_eq!(rejection(&server.chat(&forged).await), BAD_SIGNATURE);
    assert_eq!(server.payments(), 0);

    let paid = server.chat(&answer_with(metadata)).await;
    assert_eq!(rejection(&paid), "");
    assert_eq!(server.payments(), 1);
}

#[tokio::test]
async fn a_forged_answer_is_refused_before_any_lookup() {
    // The id was never issued; with signing on, the signature is what fails.
    let server = signed_server(&["k1"], Store::memory()).await;
    let reply = server.chat(&fixture("pay_unknown_confirmation.json")).await;
    assert_eq!(rejection(&reply), BAD_SIGNATURE);
}

#[tokio::test]
async fn keys_rotate_across_servers_sharing_a_store() {
    let store = Store::memory();
    let old = signed_server(&["old"], store.clone()).await;
    let metadata = ask(&old).await;
    let retired = signed_server(&["new"], store.clone()).await;
    assert_eq!(
        rejection(&retired.chat(&answer_with(metadata.clone())).await),
        BAD_SIGNATURE
    );
    let rotated = signed_server(&["new", "old"], store).await;
    let paid = rotated.chat(&answer_with(metadata)).await;
    assert_eq!(rejection(&paid), "");
    assert_eq!(rotated.payments(), 1);
}

/// A call the policy denies is never asked: the stream carries no seal
/// and no question in either protocol, so nothing approvable exists for
/// it; an approval of it carrying another question's seal runs nothing.
#[tokio::test]
async fn nothing_approvable_is_issued_for_a_call_the_policy_denies() {
    let store = Store::memory();
    let asking = signed_server(&["k1"], store.clone()).await;
    let sealed = ask(&asking).await;
    let deny = "toolConfirmation: {toolPolicies: {alwaysDeny: [internal--process_payment]}}";
    let config = Config::from_yaml(deny).unwrap_or_else(|e| panic!("{e}"));
    let denying_signer = signer(&["k1"]);
    let denying = Server::with(config, move |app| {
        app.with_signer(denying_signer).with_store(store)
    })
    .await;
    for protocol in ["adk", "ai-sdk"] {
        let mut body = common::user_says("chat-denied", "Send 50 USD to Hanako");
        body["toolgate"] = json!({"protocol": protocol});
        let reply = denying.chat(&body).await;
        assert!(
            !reply.body.contains("\"signature\""),
            "{protocol}: {}",
            reply.body
        );
        assert!(
            reply.of_type("tool-approval-request").is_empty()
                && !reply.body.contains("adk_request_confirmation"),
            "{protocol}: asked {}",
            reply.body
        );
        assert!(
            !reply.of_type("tool-output-error").is_empty(),
            "{protocol}: {}",
            reply.body
        );
    }
    // The denied call answered as approved, with the seal of the question
    // the other server asked: refused, nothing runs.
    let mut replay = answer_with(sealed);
    replay["id"] = json!("chat-denied");
    assert_eq!(rejection(&denying.chat(&replay).await), BAD_SIGNATURE);
    assert_eq!(denying.payments() + asking.payments(), 0);
}

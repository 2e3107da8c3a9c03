//! OIDC approvers (`auth.oidc`) against a real issuer in the test: keys
//! generated here, discovery and JWKS over HTTP. A token the issuer signed
//! for toolgate names its principal; every other is refused with one
//! fixed text; a rotated key is fetched, a flood of unknown key ids is not.

mod approvers;
mod issuer;

use std::time::Duration;

use serde_json::json;

use crate::common::{Must, Server, api_keys, user_says};
use issuer::{Issuer, Key, forged, hmac};

const BAD_TOKEN: &str = r#"{"error":"the bearer token is not valid"}"#;

fn bearer(token: &str) -> [(&'static str, String); 1] {
    [("authorization", format!("Bearer {token}"))]
}

/// GET `path` with `token`: the status and body.
async fn get(server: &Server, path: &str, token: &str) -> (u16, String) {
    let headers = bearer(token);
    let headers: Vec<_> = headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
    let reply = server.get_with(path, &headers).await;
    (reply.status, reply.body)
}

#[tokio::test]
async fn a_token_the_issuer_signed_names_its_principal() {
    let key = Key::ec("k1");
    let issuer = Issuer::start(&[&key]).await;
    let server = Server::from_yaml(&issuer.config("")).await;
    let token = key.sign(&issuer.claims("carol@example.com", &["fin-approvers"]));
    let (status, body) = get(&server, "/api/tools", &token).await;
    assert_eq!(status, 200, "{body}");
    // Her chat is hers: the audit log of the turn is under her email.
    let chat = user_says("chat-oidc", "Send 50 USD to Hanako").to_string();
    let headers = bearer(&token);
    let headers: Vec<_> = headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
    let reply = server.post_with("/stream", &headers, chat).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let (status, audit) = get(&server, "/api/audit", &token).await;
    assert_eq!(status, 200, "{audit}");
    let first: serde_json::Value =
        serde_json::from_str(audit.lines().next().unwrap_or_default()).must();
    assert_eq!(first["principal"], "carol@example.com", "{audit}");
    // Without a token, nobody: OIDC alone needs one.
    let reply = server.get("/api/tools").await;
    assert_eq!(reply.status, 401, "{}", reply.body);
    assert_eq!(
        reply.body,
        r#"{"error":"a bearer token is needed: Authorization: Bearer <token>"}"#
    );
    assert_eq!(issuer.fetches(), 1, "the key set is kept");
}

#[tokio::test]
async fn every_other_token_is_refused_with_one_fixed_text() {
    let key = Key::ec("k1");
    let rsa = Key::rsa("r1");
    let stranger = Key::ec("k1");
    let issuer = Issuer::start(&[&key, &rsa]).await;
    let server = Server::from_yaml(&issuer.config("")).await;
    let good = issuer.claims("carol@example.com", &[]);
    let with = |field: &str, value: serde_json::Value| {
        let mut claims = good.clone();
        claims[field] = value;
        claims
    };
    let now = jsonwebtoken::get_current_timestamp();
    let rsa_n = rsa.jwk["n"].as_str().unwrap_or_default().to_owned();
    let cases = [
        ("expired", key.sign(&with("exp", json!(now - 120)))),
        ("not yet valid", key.sign(&with("nbf", json!(now + 120)))),
        (
            "another audience",
            key.sign(&with("aud", json!("someone-else"))),
        ),
        (
            "another issuer",
            key.sign(&with("iss", json!("https://evil.example"))),
        ),
        ("no principal", key.sign(&with("email", json!(null)))),
        ("no expiry", key.sign(&with("exp", json!(null)))),
        // Same key id, another key.
        ("signed by another key", stranger.sign(&good)),
        ("an unknown key id", Key::ec("k9").sign(&good)),
        (
            "alg none",
            forged(&json!({"alg": "none", "kid": "k1"}), &good, ""),
        ),
        (
            "alg none, signed",
            forged(&json!({"alg": "none", "kid": "k1"}), &good, "c2ln"),
        ),
        // The public key as an HMAC secret: the classic confusion.
        (
            "HS256 with the RSA public key",
            hmac("r1", &rsa.public_der, &good),
        ),
        (
            "HS256 with the RSA modulus",
            hmac("r1", rsa_n.as_bytes(), &good),
        ),
        (
            "HS256 with the EC public key",
            hmac("k1", &key.public_der, &good),
        ),
        // An EC key's token claiming RSA.
        (
            "RS256 header on an EC key",
            forged(&json!({"alg": "RS256", "kid": "k1"}), &good, "c2ln"),
        ),
        ("a tampered payload", {
            let token = key.sign(&good);
            let parts: Vec<&str> = token.split('.').collect();
            let other = forged(&json!({}), &with("email", json!("mallory@example.com")), "");
            let claims = other.split('.').nth(1).unwrap_or_default();
            format!("{}.{claims}.{}", parts[0], parts[2])
        }),
    ];
    for (what, token) in &cases {
        let (status, body) = get(&server, "/api/tools", token).await;
        assert_eq!((status, body.as_str()), (401, BAD_TOKEN), "{what}");
    }
    // The RSA key itself verifies: the refusals above are the token's.
    let (status, body) = get(&server, "/api/tools", &rsa.sign(&good)).await;
    assert_eq!(status, 200, "{body}");
}

#[tokio::test]
async fn a_rotated_key_is_fetched_and_a_flood_of_unknown_key_ids_is_not() {
    let old = Key::ec("old");
    let issuer = Issuer::start(&[&old]).await;
    let server = Server::from_yaml(&issuer.config("")).await;
    let claims = issuer.claims("carol@example.com", &[]);
    assert_eq!(get(&server, "/api/tools", &old.sign(&claims)).await.0, 200);
    assert_eq!(issuer.fetches(), 1);
    // The issuer rotates after toolgate kept the old set.
    let new = Key::ec("new");
    issuer.publish(&[&new]);
    // Within the floor (1 s) of the last fetch, an unknown key id fetches nothing.
    for i in 0..20 {
        let token = Key::ec(&format!("made-up-{i}")).sign(&claims);
        assert_eq!(get(&server, "/api/tools", &token).await.0, 401);
    }
    assert_eq!(issuer.fetches(), 1, "a flood of unknown key ids fetched");
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    // Past it, the new key id fetches the set once, and verifies.
    let (status, body) = get(&server, "/api/tools", &new.sign(&claims)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(issuer.fetches(), 2);
    for _ in 0..5 {
        assert_eq!(get(&server, "/api/tools", &new.sign(&claims)).await.0, 200);
    }
    assert_eq!(issuer.fetches(), 2);
    // The retired key is gone with the old set.
    let (status, body) = get(&server, "/api/tools", &old.sign(&claims)).await;
    assert_eq!((status, body.as_str()), (401, BAD_TOKEN));
}

#[tokio::test]
async fn keys_and_the_principal_header_keep_working_beside_tokens() {
    let key = Key::ec("k1");
    let issuer = Issuer::start(&[&key]).await;
    let keys = api_keys(&[("alice", "alice-key")]);
    let keys = keys.trim_start_matches("auth:\n");
    let server = Server::from_yaml(&issuer.config(keys)).await;
    let token = key.sign(&issuer.claims("carol@example.com", &[]));
    assert_eq!(get(&server, "/api/tools", &token).await.0, 200);
    assert_eq!(get(&server, "/api/tools", "alice-key").await.0, 200);
    let (status, body) = get(&server, "/api/tools", "mallory-key").await;
    assert_eq!(
        (status, body.as_str()),
        (401, r#"{"error":"the API key is not valid"}"#)
    );
    let reply = server.get("/api/tools").await;
    assert_eq!(reply.status, 401, "{}", reply.body);

    let issuer_config = issuer.config("  principalHeader: X-User\n");
    let server = Server::from_yaml(&issuer_config).await;
    let reply = server.get_with("/api/tools", &[("x-user", "dave")]).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(get(&server, "/api/tools", &token).await.0, 200);
    let (status, body) = get(
        &server,
        "/api/tools",
        &Key::ec("k1").sign(&issuer.claims("x", &[])),
    )
    .await;
    assert_eq!((status, body.as_str()), (401, BAD_TOKEN));
}

#[tokio::test]
async fn an_issuer_that_cannot_be_reached_is_not_the_tokens_fault() {
    let key = Key::ec("k1");
    let issuer = Issuer::start(&[&key]).await;
    let (listener, gone) = crate::common::loopback().await;
    drop(listener);
    let config = issuer.config("").replace(
        &format!("issuer: {}", issuer.url),
        &format!("issuer: {gone}"),
    );
    let server = Server::from_yaml(&config).await;
    let mut claims = issuer.claims("carol@example.com", &[]);
    claims["iss"] = json!(gone);
    let (status, body) = get(&server, "/api/tools", &key.sign(&claims)).await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(
        body,
        r#"{"error":"the identity provider's keys cannot be fetched now; try again later"}"#
    );
}

#[test]
fn config_check_names_a_bad_oidc_key() {
    let base = "auth:\n  oidc:\n    issuer: https://idp.example\n    audience: toolgate\n";
    let cases = [
        (
            "auth:\n  oidc:\n    issuer: http://idp.example\n    audience: toolgate\n".to_owned(),
            "auth.oidc.issuer",
        ),
        (
            format!("{base}    jwksUri: ftp://idp.example/keys\n"),
            "auth.oidc.jwksUri",
        ),
        (
            "auth:\n  oidc:\n    issuer: https://idp.example\n    audience: ''\n".to_owned(),
            "auth.oidc.audience",
        ),
        (
            format!("{base}    leewaySecs: 3600\n"),
            "auth.oidc.leewaySecs",
        ),
        (
            format!("{base}    jwksRefetchSecs: 0\n"),
            "auth.oidc.jwksRefetchSecs",
        ),
        (
            format!("{base}    roles: {{finance: ['']}}\n"),
            "auth.oidc.roles.finance",
        ),
    ];
    for (yaml, key) in cases {
        let config = toolgate::Config::from_yaml(&yaml).must();
        let error = toolgate::config::Settings::new(config)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(error.contains(key), "{yaml}: {error}");
    }
    let typo = format!("{base}    audiences: toolgate\n");
    let error = toolgate::Config::from_yaml(&typo)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(error.contains("audiences"), "{error}");
}

#[tokio::test]
async fn a_tokens_groups_make_it_an_approver_through_the_api() {
    let key = Key::ec("k1");
    let issuer = Issuer::start(&[&key]).await;
    let rules = "toolConfirmation:\n  tools:\n    process_payment: {approvers: [role:finance]}\n";
    let server = Server::from_yaml(&format!("{}{rules}", issuer.config(""))).await;
    let token = |email: &str, groups: &[&str]| key.sign(&issuer.claims(email, groups));
    let post = |token: String, path: &'static str, body: String| {
        let server = &server;
        async move {
            let headers = bearer(&token);
            let headers: Vec<_> = headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
            server.post_with(path, &headers, body).await
        }
    };
    let chat = user_says("chat-pay", "Send 50 USD to Hanako").to_string();
    let asked = post(token("clerk@example.com", &[]), "/stream", chat).await;
    assert_eq!(asked.status, 200, "{}", asked.body);
    let approve = json!({"approved": true}).to_string();
    let path = "/api/confirmations/adk-3";
    // Someone whose groups hold no role may not approve.
    let other = post(token("dave@example.com", &["staff"]), path, approve.clone()).await;
    assert_eq!(other.status, 403, "{}", other.body);
    assert_eq!(server.payments(), 0);
    // A member of the finance group may: the role came with the token.
    let carol = post(
        token("carol@example.com", &["fin-approvers"]),
        path,
        approve,
    )
    .await;
    assert_eq!(carol.status, 200, "{}", carol.body);
    assert_eq!(server.payments(), 1);
}

//! A local OpenID Connect issuer for the tests: keys generated here,
//! discovery and the key set served over HTTP on 127.0.0.1, the set
//! swappable (rotation) and its fetches counted.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use aws_lc_rs::encoding::AsDer;
use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair};
use axum::Router;
use axum::extract::State;
use axum::routing::get;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::jwk::Jwk;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};

use crate::common::{Must, loopback};

/// Signs a token's `header.claims` with a key's private half.
type Signer = Box<dyn Fn(&[u8]) -> Vec<u8> + Send + Sync>;

/// A signing key of the issuer (or of someone else).
pub struct Key {
    pub kid: String,
    pub alg: Algorithm,
    signer: Signer,
    /// Its public half as a JWK, with `kid`.
    pub jwk: Value,
    /// The public key's bytes (DER), what an attacker knows.
    pub public_der: Vec<u8>,
}

impl Key {
    /// A new P-256 key.
    pub fn ec(kid: &str) -> Self {
        let pair = EcdsaKeyPair::generate(&ECDSA_P256_SHA256_FIXED_SIGNING).must();
        let pkcs8 = pair.to_pkcs8v1().must();
        let encoding = EncodingKey::from_ec_der(pkcs8.as_ref());
        let jwk = serde_json::to_value(Jwk::from_encoding_key(&encoding, Algorithm::ES256).must());
        let public_der = aws_lc_rs::signature::KeyPair::public_key(&pair)
            .as_ref()
            .to_vec();
        let signer: Signer = Box::new(move |message| {
            let rng = aws_lc_rs::rand::SystemRandom::new();
            pair.sign(&rng, message).must().as_ref().to_vec()
        });
        Self::made(kid, Algorithm::ES256, signer, public_der, jwk.must())
    }

    /// A new 2048-bit RSA key.
    pub fn rsa(kid: &str) -> Self {
        let pair = aws_lc_rs::rsa::KeyPair::generate(aws_lc_rs::rsa::KeySize::Rsa2048).must();
        let public = aws_lc_rs::signature::KeyPair::public_key(&pair);
        let public_der = public.as_der().must().as_ref().to_vec();
        let b64 = |bytes: &[u8]| URL_SAFE_NO_PAD.encode(bytes);
        let components = aws_lc_rs::rsa::PublicKeyComponents::<Vec<u8>>::from(public);
        let jwk = json!({"kty": "RSA", "n": b64(&components.n), "e": b64(&components.e)});
        let signer: Signer = Box::new(move |message| {
            let rng = aws_lc_rs::rand::SystemRandom::new();
            let mut signature = vec![0; pair.public_modulus_len()];
            let padding = &aws_lc_rs::signature::RSA_PKCS1_SHA256;
            pair.sign(padding, &rng, message, &mut signature).must();
            signature
        });
        Self::made(kid, Algorithm::RS256, signer, public_der, jwk)
    }

    fn made(kid: &str, alg: Algorithm, signer: Signer, public_der: Vec<u8>, jwk: Value) -> Self {
        let mut jwk = jwk;
        jwk["kid"] = json!(kid);
        jwk["use"] = json!("sig");
        Self {
            kid: kid.to_owned(),
            alg,
            signer,
            jwk,
            public_der,
        }
    }

    /// `claims` signed with this key, its `kid` in the header.
    pub fn sign(&self, claims: &Value) -> String {
        let alg = serde_json::to_value(self.alg).must();
        let unsigned = forged(
            &json!({"alg": alg, "typ": "JWT", "kid": self.kid}),
            claims,
            "",
        );
        let message = unsigned.trim_end_matches('.');
        let signature = URL_SAFE_NO_PAD.encode((self.signer)(message.as_bytes()));
        format!("{message}.{signature}")
    }
}

/// A token of `header` and `claims` with `signature` (base64url) as is.
pub fn forged(header: &Value, claims: &Value, signature: &str) -> String {
    let part = |v: &Value| URL_SAFE_NO_PAD.encode(v.to_string());
    format!("{}.{}.{signature}", part(header), part(claims))
}

/// `claims` signed HS256 with `secret`, under `kid`.
pub fn hmac(kid: &str, secret: &[u8], claims: &Value) -> String {
    let mut header = Header::new(Algorithm::HS256);
    header.kid = Some(kid.to_owned());
    jsonwebtoken::encode(&header, claims, &EncodingKey::from_secret(secret)).must()
}

#[derive(Clone)]
struct Served {
    url: String,
    keys: Arc<Mutex<Value>>,
    fetches: Arc<AtomicUsize>,
}

/// The issuer, serving until the test's runtime ends.
pub struct Issuer {
    pub url: String,
    served: Served,
}

impl Issuer {
    /// An issuer publishing `keys`.
    pub async fn start(keys: &[&Key]) -> Self {
        let (listener, url) = loopback().await;
        let served = Served {
            url: url.clone(),
            keys: Arc::new(Mutex::new(Value::Null)),
            fetches: Arc::default(),
        };
        let issuer = Self { url, served };
        issuer.publish(keys);
        let app = Router::new()
            .route("/.well-known/openid-configuration", get(discovery))
            .route("/jwks", get(jwks))
            .with_state(issuer.served.clone());
        // The issuer lives as long as the test's runtime.
        #[allow(clippy::disallowed_methods)]
        tokio::spawn(async move { axum::serve(listener, app).await });
        issuer
    }

    /// From now on the key set is `keys`.
    pub fn publish(&self, keys: &[&Key]) {
        let set = json!({"keys": keys.iter().map(|k| k.jwk.clone()).collect::<Vec<_>>()});
        *self.served.keys.lock().unwrap_or_else(|p| p.into_inner()) = set;
    }

    /// How many times the key set was fetched.
    pub fn fetches(&self) -> usize {
        self.served.fetches.load(Ordering::SeqCst)
    }

    /// Claims valid now for `audience`, naming `email` in `groups`.
    pub fn claims(&self, email: &str, groups: &[&str]) -> Value {
        let now = jsonwebtoken::get_current_timestamp();
        json!({
            "iss": self.url, "aud": "toolgate", "sub": format!("sub-{email}"),
            "email": email, "groups": groups,
            "iat": now, "nbf": now, "exp": now + 300,
        })
    }

    /// `auth.oidc` for this issuer, with `more` lines (indented under it).
    pub fn config(&self, more: &str) -> String {
        format!(
            "auth:\n  oidc:\n    issuer: {}\n    audience: toolgate\n    principalClaim: email\n    \
             jwksRefetchSecs: 1\n    roles: {{finance: [fin-approvers]}}\n{more}",
            self.url
        )
    }
}

async fn discovery(State(served): State<Served>) -> axum::Json<Value> {
    axum::Json(json!({
        "issuer": served.url,
        "jwks_uri": format!("{}/jwks", served.url),
    }))
}

async fn jwks(State(served): State<Served>) -> axum::Json<Value> {
    served.fetches.fetch_add(1, Ordering::SeqCst);
    let keys = served
        .keys
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    axum::Json(keys)
}

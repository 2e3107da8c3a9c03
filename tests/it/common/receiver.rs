//! A webhook receiver for the tests: an axum server on 127.0.0.1:0 that
//! answers with the statuses it is given, checks a delivery's signature
//! with its own HMAC code, and keeps what it got.

use super::Must;
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use hmac::{Hmac, Mac};
use serde_json::Value;
use sha2::Sha256;

use super::wait;

/// Tests may not set environment variables (`unsafe` is forbidden), so the
/// webhook's key is read from one cargo sets for every test it runs, and
/// long enough for a signing key (32 bytes at least).
pub const SECRET_ENV: &str = "CARGO_PKG_DESCRIPTION";

pub const PUBLIC_URL: &str = "https://toolgate.example";

pub fn secret() -> String {
    std::env::var(SECRET_ENV)
        .unwrap_or_else(|_| panic!("{SECRET_ENV} is not set: run the tests with cargo"))
}

/// One request the receiver got.
#[derive(Debug, Clone)]
pub struct Got {
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Got {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).must()
    }

    /// Whether the signature is right, checked as a receiver would.
    pub fn signed_with(&self, secret: &str) -> bool {
        let header = |name: &str| {
            self.headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
        };
        let Some(hex_mac) = header("x-toolgate-signature").strip_prefix("v1=") else {
            return false;
        };
        let Ok(given) = hex::decode(hex_mac) else {
            return false;
        };
        let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).must();
        mac.update(header("x-toolgate-timestamp").as_bytes());
        mac.update(b".");
        mac.update(&self.body);
        mac.verify_slice(&given).is_ok()
    }
}

/// A webhook receiver that answers with `statuses` in turn (the last repeats).
pub struct Receiver {
    pub url: String,
    got: Arc<Mutex<Vec<Got>>>,
}

impl Receiver {
    pub async fn start(statuses: &[u16]) -> Self {
        let got = Arc::new(Mutex::new(Vec::<Got>::new()));
        let statuses: Arc<Vec<u16>> = Arc::new(statuses.to_vec());
        let record = got.clone();
        let app = axum::Router::new().fallback(axum::routing::post(
            move |headers: HeaderMap, body: Bytes| {
                let (record, statuses) = (record.clone(), statuses.clone());
                async move {
                    let mut got = record.lock().unwrap_or_else(|e| e.into_inner());
                    let n = got.len().min(statuses.len() - 1);
                    got.push(Got { headers, body });
                    StatusCode::from_u16(statuses[n]).unwrap_or(StatusCode::OK)
                }
            },
        ));
        let (listener, url) = super::loopback().await;
        // A test's receiver: it lives as long as the test's runtime.
        #[allow(clippy::disallowed_methods)]
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self { url, got }
    }

    pub fn got(&self) -> Vec<Got> {
        self.got.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The host and port, as a target's name shows them.
    pub fn host(&self) -> &str {
        self.url.trim_start_matches("http://")
    }

    pub async fn until(&self, n: usize) -> Vec<Got> {
        wait::until_true(&format!("{n} deliveries"), || self.got().len() >= n).await;
        self.got()
    }
}

pub fn webhook(receiver: &Receiver) -> String {
    format!(
        "toolConfirmation:\n  publicUrl: {PUBLIC_URL}\n  notify:\n    - {{webhook: '{}/hook', secretEnv: {SECRET_ENV}}}\n",
        receiver.url
    )
}

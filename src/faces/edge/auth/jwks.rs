//! The issuer's signing keys: discovered (`{issuer}/.well-known/openid-configuration`)
//! or named (`auth.oidc.jwksUri`), fetched, kept, and fetched again when a
//! token names a key id the set lacks, at most once per
//! `jwksRefetchSecs`, so a rotation is picked up and a flood of made-up
//! key ids costs the issuer one request per interval. Concurrent lookups
//! share one fetch; no lock is held across an await.

use std::collections::HashMap;
use std::str::FromStr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::FutureExt;
use futures::future::{BoxFuture, Shared};
use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey};
use serde_json::Value;

/// The most bytes of a discovery document or a key set read.
const MAX_DOCUMENT_BYTES: usize = 256 * 1024;
/// How long one fetch (discovery and keys) may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);

/// One usable signing key: its verifier and the algorithms it may sign with.
pub(super) struct Key {
    pub decoding: DecodingKey,
    pub algorithms: Vec<Algorithm>,
}

/// The keys of one fetch, by key id (`""`: a key without one).
type KeySet = Arc<HashMap<String, Arc<Key>>>;

/// Why the keys could not be had; the log's words, never a client's.
#[derive(Debug, Clone, thiserror::Error)]
pub enum JwksError {
    #[error("fetching {url}: {why}")]
    Fetch { url: String, why: String },
    #[error("{url} is not a usable document: {why}")]
    Document { url: String, why: String },
}

type Fetch = Shared<BoxFuture<'static, Result<KeySet, JwksError>>>;

struct State {
    keys: KeySet,
    /// When the last fetch started (`None`: never).
    fetched: Option<Instant>,
    /// The fetch in flight, which every lookup joins.
    in_flight: Option<Fetch>,
}

/// The issuer's keys, fetched on demand and kept.
pub(super) struct Jwks {
    issuer: String,
    /// `jwksUri`, else found through discovery on each fetch.
    jwks_uri: Option<String>,
    floor: Duration,
    client: reqwest::Client,
    state: Arc<Mutex<State>>,
    /// Fetches started, for the tests and the log.
    fetches: Arc<std::sync::atomic::AtomicU64>,
}

/// What a lookup found.
pub(super) enum Found {
    Key(Arc<Key>),
    /// The set (fetched now or within the floor) has no such key.
    Unknown,
}

impl Jwks {
    pub(super) fn new(issuer: String, jwks_uri: Option<String>, floor: Duration) -> Self {
        let client = reqwest::Client::builder()
            .timeout(FETCH_TIMEOUT)
            .connect_timeout(FETCH_TIMEOUT)
            .build()
            .unwrap_or_default();
        Self {
            issuer,
            jwks_uri,
            floor,
            client,
            state: Arc::new(Mutex::new(State {
                keys: Arc::new(HashMap::new()),
                fetched: None,
                in_flight: None,
            })),
            fetches: Arc::default(),
        }
    }

    /// How many fetches started.
    pub(super) fn fetches(&self) -> u64 {
        self.fetches.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The key `kid` names (none: the set's only key), fetching the set
    /// again if it lacks it and the floor has passed since the last fetch.
    pub(super) async fn key(&self, kid: Option<&str>) -> Result<Found, JwksError> {
        let fetch = {
            let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(key) = find(&state.keys, kid) {
                return Ok(Found::Key(key));
            }
            match &state.in_flight {
                Some(fetch) => fetch.clone(),
                None => {
                    let now = Instant::now();
                    if state
                        .fetched
                        .is_some_and(|at| now.duration_since(at) < self.floor)
                    {
                        return Ok(Found::Unknown);
                    }
                    state.fetched = Some(now);
                    let fetch = self.fetch();
                    state.in_flight = Some(fetch.clone());
                    fetch
                }
            }
        };
        let keys = fetch.await?;
        Ok(find(&keys, kid).map_or(Found::Unknown, Found::Key))
    }

    /// One fetch, shared; it files its keys (or clears itself) when done.
    fn fetch(&self) -> Fetch {
        self.fetches
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let (client, issuer, uri) = (
            self.client.clone(),
            self.issuer.clone(),
            self.jwks_uri.clone(),
        );
        let state = self.state.clone();
        async move {
            let fetched = fetch_keys(&client, &issuer, uri).await;
            let mut state = state.lock().unwrap_or_else(|p| p.into_inner());
            state.in_flight = None;
            let keys = Arc::new(fetched?);
            state.keys = keys.clone();
            Ok(keys)
        }
        .boxed()
        .shared()
    }
}

/// Whether `url` may be fetched for keys: `https`, or `http` to this host
/// only (a local issuer, in tests and development).
pub fn checked_url(url: &str) -> Result<(), String> {
    let parsed = reqwest::Url::parse(url).map_err(|e| format!("not a URL: {e}"))?;
    let loopback = match parsed.host_str() {
        Some("localhost") => true,
        Some(host) => host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback()),
        None => false,
    };
    match parsed.scheme() {
        "https" if parsed.host_str().is_some() => Ok(()),
        "http" if loopback => Ok(()),
        _ => Err("must be https:// (or http:// on this host)".to_owned()),
    }
}

fn find(keys: &KeySet, kid: Option<&str>) -> Option<Arc<Key>> {
    match kid {
        Some(kid) => keys.get(kid).cloned(),
        None if keys.len() == 1 => keys.values().next().cloned(),
        None => None,
    }
}

/// Discovery (unless `jwks_uri` is given), then the key set.
async fn fetch_keys(
    client: &reqwest::Client,
    issuer: &str,
    jwks_uri: Option<String>,
) -> Result<HashMap<String, Arc<Key>>, JwksError> {
    let uri = match jwks_uri {
        Some(uri) => uri,
        None => {
            let url = format!(
                "{}/.well-known/openid-configuration",
                issuer.trim_end_matches('/')
            );
            let document = get_json(client, &url).await?;
            let bad = |why: &str| JwksError::Document {
                url: url.clone(),
                why: why.to_owned(),
            };
            // OpenID Connect Discovery 1.0, 4.3: the issuer it names is ours.
            if document.get("issuer").and_then(Value::as_str) != Some(issuer) {
                return Err(bad("its issuer is not the configured one"));
            }
            let uri = document
                .get("jwks_uri")
                .and_then(Value::as_str)
                .ok_or_else(|| bad("no jwks_uri"))?;
            checked_url(uri).map_err(|why| bad(&why))?;
            uri.to_owned()
        }
    };
    let set = get_json(client, &uri).await?;
    let keys = set
        .get("keys")
        .and_then(Value::as_array)
        .ok_or_else(|| JwksError::Document {
            url: uri.clone(),
            why: "no keys".to_owned(),
        })?;
    Ok(keys.iter().filter_map(usable).collect())
}

async fn get_json(client: &reqwest::Client, url: &str) -> Result<Value, JwksError> {
    let failed = |why: String| JwksError::Fetch {
        url: url.to_owned(),
        why,
    };
    let mut response = client
        .get(url)
        .header(reqwest::header::ACCEPT, "application/json")
        .send()
        .await
        .map_err(|e| failed(e.without_url().to_string()))?;
    if !response.status().is_success() {
        return Err(failed(format!("status {}", response.status())));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| failed(e.without_url().to_string()))?
    {
        if body.len() + chunk.len() > MAX_DOCUMENT_BYTES {
            return Err(failed(format!("larger than {MAX_DOCUMENT_BYTES} bytes")));
        }
        body.extend_from_slice(&chunk);
    }
    serde_json::from_slice(&body).map_err(|e| JwksError::Document {
        url: url.to_owned(),
        why: e.to_string(),
    })
}

/// A key of the set that may verify a token: a public signing key (never
/// a symmetric one, never one for encryption), with the algorithms it
/// names, or those of its type; any other is left out.
fn usable(jwk: &Value) -> Option<(String, Arc<Key>)> {
    let jwk: Jwk = serde_json::from_value(jwk.clone()).ok()?;
    if jwk
        .common
        .public_key_use
        .as_ref()
        .is_some_and(|u| *u != PublicKeyUse::Signature)
    {
        return None;
    }
    let algorithms = match jwk.common.key_algorithm {
        Some(named) => {
            let word = serde_json::to_value(named).ok()?;
            let algorithm = Algorithm::from_str(word.as_str()?).ok()?;
            vec![algorithm]
        }
        None => of_type(&jwk.algorithm),
    };
    // A key may sign only with algorithms of its own type and curve (a
    // symmetric key with none: never taken from a key set).
    let own = of_type(&jwk.algorithm);
    let algorithms: Vec<_> = algorithms.into_iter().filter(|a| own.contains(a)).collect();
    if algorithms.is_empty() {
        return None;
    }
    let decoding = DecodingKey::from_jwk(&jwk).ok()?;
    let kid = jwk.common.key_id.clone().unwrap_or_default();
    Some((
        kid,
        Arc::new(Key {
            decoding,
            algorithms,
        }),
    ))
}

/// The algorithms a key of this type and curve signs with.
fn of_type(parameters: &AlgorithmParameters) -> Vec<Algorithm> {
    use Algorithm::*;
    match parameters {
        AlgorithmParameters::RSA(_) => vec![RS256, RS384, RS512, PS256, PS384, PS512],
        AlgorithmParameters::EllipticCurve(ec) => match ec.curve {
            EllipticCurve::P256 => vec![ES256],
            EllipticCurve::P384 => vec![ES384],
            _ => vec![],
        },
        AlgorithmParameters::OctetKeyPair(okp) if okp.curve == EllipticCurve::Ed25519 => {
            vec![EdDSA]
        }
        // Symmetric keys, unknown types: nothing (the type is non-exhaustive).
        _ => vec![],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn which_keys_of_a_set_may_verify() {
        let ec = json!({"kty": "EC", "crv": "P-256", "kid": "e",
            "x": "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU",
            "y": "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"});
        let rsa = json!({"kty": "RSA", "kid": "r", "e": "AQAB",
            "n": "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw"});
        let cases = [
            (ec.clone(), Some(vec![Algorithm::ES256])),
            (
                rsa.clone(),
                Some(of_type(&AlgorithmParameters::RSA(Default::default()))),
            ),
            (
                {
                    let mut k = rsa.clone();
                    k["alg"] = json!("RS256");
                    k
                },
                Some(vec![Algorithm::RS256]),
            ),
            // An RSA key that claims an EC algorithm is no key.
            (
                {
                    let mut k = rsa.clone();
                    k["alg"] = json!("ES256");
                    k
                },
                None,
            ),
            (
                {
                    let mut k = rsa.clone();
                    k["alg"] = json!("HS256");
                    k
                },
                None,
            ),
            (
                {
                    let mut k = ec.clone();
                    k["use"] = json!("enc");
                    k
                },
                None,
            ),
            (json!({"kty": "oct", "k": "c2VjcmV0", "kid": "s"}), None),
            (json!({"kty": "EC", "crv": "P-256"}), None),
        ];
        for (jwk, algorithms) in cases {
            let got = usable(&jwk).map(|(_, key)| key.algorithms.clone());
            assert_eq!(got, algorithms, "{jwk}");
        }
    }

    #[test]
    fn where_keys_may_be_fetched() {
        for (url, ok) in [
            ("https://idp.example/keys", true),
            ("http://127.0.0.1:8080/keys", true),
            ("http://localhost/keys", true),
            ("http://[::1]/keys", true),
            ("http://idp.example/keys", false),
            ("ftp://idp.example/keys", false),
            ("not a url", false),
        ] {
            assert_eq!(checked_url(url).is_ok(), ok, "{url}");
        }
    }
}

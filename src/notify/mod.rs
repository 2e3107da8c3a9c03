//! Telling people outside the chat that a question waits. Each configured
//! target, a webhook (its body signed with HMAC-SHA256) or a Slack-compatible
//! incoming webhook, gets the question with two signed one-time links,
//! approve and deny, to toolgate's own page (`faces/decisions/links/`), where
//! a button decides.
//!
//! `body.rs` (pure): what each target is sent, and the webhook's signature.
//! `link.rs` (pure): the links' tokens. `deliver.rs`: one delivery, retried
//! with backoff, never past the question's expiry. The gate (`confirm`)
//! decides when to announce, runs each delivery on its tracked tasks and
//! records its end in the audit log: nothing here touches the store.
//!
//! A target's URL may hold a secret (a Slack webhook's always does): it is
//! never logged or recorded; a target is named by kind and position.

mod body;
mod deliver;
mod fair;
mod keys;
mod link;

pub use body::Pair;
pub use deliver::{Delivery, SIGNATURE_HEADER, TIMESTAMP_HEADER};
pub use fair::{Job, MAX_IN_FLIGHT, PER_PRINCIPAL, Pushed, QUEUE_PER_PRINCIPAL};
pub use keys::{Keys, key_id};
pub use link::{Link, LinkDecision, LinkError, Links};

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use hmac::{Hmac, Mac};
use reqwest::Url;
use sha2::Sha256;

use crate::call::QualifiedName;
use crate::ids::Clock;
use crate::policy::{NotifyTarget, ToolInfo, ToolRule};
use crate::store::Issued;

/// How long connecting to a target may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The fewest bytes a signing key may have: a webhook's `secretEnv` key,
/// and `toolConfirmation.signingKeys` (links and confirmations). HMAC
/// with SHA-256 takes any length, but a short key is guessed.
pub const MIN_KEY_BYTES: usize = 32;

/// The path under `publicUrl` where a link's page lives.
pub const LINK_PATH: &str = "/confirmations/link/";

/// A notification setting that cannot work. The texts name the setting and
/// the environment variable, never a URL or a secret.
#[derive(Debug, thiserror::Error)]
pub enum NotifyError {
    #[error("{place}: {why}")]
    Target { place: String, why: String },
    #[error("toolConfirmation.publicUrl: {0}")]
    PublicUrl(String),
    #[error("the HTTP client for notifications cannot be built: {0}")]
    Client(String),
    #[error("no random key for the notification links: {0}")]
    Random(String),
}

/// One place questions are announced, its secrets read.
pub struct Target {
    /// How logs and the audit log name it: `webhook 1 (host)`, `slack 2`.
    name: String,
    url: Url,
    kind: Kind,
}

enum Kind {
    /// Signed with this key.
    Webhook(Hmac<Sha256>),
    Slack,
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name)
    }
}

impl Target {
    /// The name logs and the audit log use; no secret in it.
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// Who is told about which question, and where the links lead: the
/// notification config, checked and with its secrets read.
#[derive(Debug)]
pub struct Plan {
    /// `toolConfirmation.notify`.
    default: Vec<Arc<Target>>,
    /// `toolConfirmation.tools.<tool>.notify`, keyed as those rules are.
    tools: BTreeMap<String, Vec<Arc<Target>>>,
    /// Without a trailing `/`.
    public_url: String,
}

/// The plan for `toolConfirmation.notify`, `.tools.<tool>.notify` and
/// `.publicUrl`; `None` when no target is configured. Each webhook's
/// `secretEnv` is read now.
pub fn plan(
    default: &[NotifyTarget],
    tools: &BTreeMap<String, ToolRule>,
    public_url: Option<&str>,
) -> Result<Option<Plan>, NotifyError> {
    let default = targets(default, "toolConfirmation.notify", "")?;
    let mut per_tool = BTreeMap::new();
    for (tool, rule) in tools {
        if let Some(list) = &rule.notify {
            let place = format!("toolConfirmation.tools.{tool}.notify");
            per_tool.insert(
                tool.clone(),
                targets(list, &place, &format!(" for {tool}"))?,
            );
        }
    }
    if default.is_empty() && per_tool.values().all(Vec::is_empty) {
        return Ok(None);
    }
    let public_url = public_url
        .ok_or_else(|| {
            NotifyError::PublicUrl(
                "required when notification targets are configured: the links lead there".into(),
            )
        })
        .and_then(checked_public_url)?;
    Ok(Some(Plan {
        default,
        tools: per_tool,
        public_url,
    }))
}

/// `https://…` (or `http://` to this machine), with no query or fragment;
/// without its trailing `/`.
fn checked_public_url(text: &str) -> Result<String, NotifyError> {
    let bad = |why: &str| NotifyError::PublicUrl(format!("`{text}` {why}"));
    let url = Url::parse(text).map_err(|_| bad("is not a URL"))?;
    let local = matches!(url.host_str(), Some("localhost" | "127.0.0.1" | "[::1]"));
    match url.scheme() {
        "https" => {}
        "http" if local => {}
        _ => return Err(bad("must be an https:// URL (http:// only to localhost)")),
    }
    if url.host_str().is_none() || !url.username().is_empty() || url.password().is_some() {
        return Err(bad("must name a host, and no user"));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(bad("must have no query or fragment"));
    }
    Ok(url.as_str().trim_end_matches('/').to_owned())
}

fn targets(
    list: &[NotifyTarget],
    place: &str,
    suffix: &str,
) -> Result<Vec<Arc<Target>>, NotifyError> {
    let (mut webhooks, mut slacks) = (0, 0);
    let mut out = Vec::with_capacity(list.len());
    for (i, target) in list.iter().enumerate() {
        let place = format!("{place}[{}]", i + 1);
        let bad = |why: String| NotifyError::Target {
            place: place.clone(),
            why,
        };
        let target = match (&target.webhook, &target.secret_env, &target.slack) {
            (Some(url), Some(var), None) => {
                let url = target_url(url).map_err(|why| bad(format!("webhook {why}")))?;
                let secret = match std::env::var(var) {
                    Ok(secret) if secret.len() >= MIN_KEY_BYTES => secret,
                    Ok(secret) if secret.is_empty() => {
                        return Err(bad(format!(
                            "environment variable {var} (secretEnv) is empty"
                        )));
                    }
                    Ok(_) => {
                        return Err(bad(format!(
                            "environment variable {var} (secretEnv) is too short: a signing key needs at least {MIN_KEY_BYTES} bytes"
                        )));
                    }
                    Err(_) => {
                        return Err(bad(format!(
                            "environment variable {var} (secretEnv) is not set"
                        )));
                    }
                };
                let key = Hmac::<Sha256>::new_from_slice(secret.as_bytes())
                    .map_err(|e| bad(e.to_string()))?;
                webhooks += 1;
                let host = match (url.host_str(), url.port()) {
                    (Some(host), Some(port)) => format!("{host}:{port}"),
                    (host, None) => host.unwrap_or_default().to_owned(),
                    (None, Some(_)) => String::new(),
                };
                Target {
                    name: format!("webhook {webhooks} ({host}){suffix}"),
                    url,
                    kind: Kind::Webhook(key),
                }
            }
            (Some(_), None, None) => {
                return Err(bad(
                    "a webhook needs secretEnv: the environment variable holding its signing key"
                        .into(),
                ));
            }
            (None, None, Some(url)) => {
                // The URL is the secret: not even a bad one is repeated.
                let url = target_url(url).map_err(|why| bad(format!("slack {why}")))?;
                slacks += 1;
                Target {
                    name: format!("slack {slacks}{suffix}"),
                    url,
                    kind: Kind::Slack,
                }
            }
            (None, Some(_), Some(_)) => {
                return Err(bad(
                    "secretEnv is for a webhook; a Slack URL is its own secret".into(),
                ));
            }
            _ => {
                return Err(bad("give either webhook (with secretEnv) or slack".into()));
            }
        };
        out.push(Arc::new(target));
    }
    Ok(out)
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// A target's URL: `https://`, or `http://` to this machine only (a
/// receiver on loopback, which nothing off the machine can read); the
/// body carries live approve links, so it never crosses a network in
/// clear. The error never repeats the URL (a Slack URL is a secret).
fn target_url(text: &str) -> Result<Url, &'static str> {
    let url = Url::parse(text).map_err(|_| "is not an http(s) URL")?;
    if url.host_str().is_none_or(str::is_empty) {
        return Err("is not an http(s) URL");
    }
    match url.scheme() {
        "https" => Ok(url),
        "http" if is_loopback(&url) => Ok(url),
        "http" => Err("must be an https:// URL (http:// only to a loopback host)"),
        _ => Err("is not an http(s) URL"),
    }
}

/// `localhost`, `127.0.0.0/8` or `[::1]`.
fn is_loopback(url: &Url) -> bool {
    url.host_str().is_some_and(|host| {
        host.eq_ignore_ascii_case("localhost")
            || host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback())
    })
}

/// Delivers questions to the targets a plan names; cheap to clone.
#[derive(Clone)]
pub struct Notifier {
    plan: Arc<Plan>,
    links: Links,
    client: reqwest::Client,
    /// The deliveries waiting, per principal, and those in flight.
    fair: Arc<Mutex<fair::Fair>>,
    /// The gate's clock: expiries and the webhook's timestamp.
    clock: Clock,
}

impl std::fmt::Debug for Notifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Notifier")
            .field("plan", &self.plan)
            .field("links", &self.links)
            .finish()
    }
}

/// A place among the deliveries in flight, held until the delivery ends.
pub struct Slot {
    fair: Arc<Mutex<fair::Fair>>,
    principal: String,
}

impl Drop for Slot {
    fn drop(&mut self) {
        lock(&self.fair).done(&self.principal);
    }
}

fn lock(fair: &Mutex<fair::Fair>) -> std::sync::MutexGuard<'_, fair::Fair> {
    fair.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Notifier {
    pub fn new(plan: Plan, links: Links, clock: Clock) -> Result<Self, NotifyError> {
        let client = crate::provider::http::client(CONNECT_TIMEOUT)
            .map_err(|e| NotifyError::Client(e.without_url().to_string()))?;
        Ok(Self {
            plan: Arc::new(plan),
            links,
            client,
            fair: Arc::default(),
            clock,
        })
    }

    /// Who is told when `tool` asks: its own list if it has one, else the default.
    pub fn targets(&self, tool: &str) -> Vec<Arc<Target>> {
        let qualified = QualifiedName::of(tool);
        let info = ToolInfo {
            name: tool,
            qualified: &qualified,
            tool_may_ask: true,
        };
        crate::policy::for_tool(&self.plan.tools, &info)
            .unwrap_or(&self.plan.default)
            .clone()
    }

    /// Queues the delivery of `issued` to `target` behind its principal's
    /// others (or coalesces it, past the queue's bound).
    pub fn push(&self, issued: &Issued, target: Arc<Target>) -> Pushed {
        lock(&self.fair).push(Job {
            issued: issued.clone(),
            target,
            more: Vec::new(),
        })
    }

    /// The next delivery to start, with its slot, if a slot is free for a
    /// principal with one waiting (see `fair.rs`).
    pub fn next(&self) -> Option<(Job, Slot)> {
        let job = lock(&self.fair).next()?;
        let slot = Slot {
            fair: self.fair.clone(),
            principal: job.issued.principal.clone(),
        };
        Some((job, slot))
    }

    /// The key links are signed and verified with.
    pub fn links(&self) -> &Links {
        &self.links
    }

    /// The approve and deny links of `issued`, as sent to `target`.
    pub fn pair(&self, issued: &Issued, target: &Target) -> Pair {
        let url = |decision| {
            let token = self.links.token(&Link {
                confirmation_id: issued.id.clone(),
                decision,
                expires_at_ms: issued.expires_at_ms,
                target: target.name.clone(),
            });
            format!("{}{LINK_PATH}{token}", self.plan.public_url)
        };
        Pair {
            approve: url(LinkDecision::Approve),
            deny: url(LinkDecision::Deny),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(yaml: &str) -> NotifyTarget {
        yaml_serde::from_str(yaml).unwrap_or_else(|e| panic!("{e}"))
    }

    fn error(list: &[&str], public_url: Option<&str>) -> String {
        let list: Vec<NotifyTarget> = list.iter().map(|y| target(y)).collect();
        match plan(&list, &BTreeMap::new(), public_url) {
            Ok(_) => "ok".into(),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn targets_are_checked_and_named_without_secrets() {
        let url = Some("https://toolgate.example/");
        // Variables cargo sets for every test it runs: tests may not set any.
        let path = "{webhook: 'https://h.example/x', secretEnv: CARGO_PKG_DESCRIPTION}";
        let slack = "{slack: 'https://hooks.slack.com/services/T/B/SECRET'}";
        #[rustfmt::skip]
        let cases: &[(&[&str], Option<&str>, &str)] = &[
            (&[path, slack], url, "ok"),
            (&[], None, "ok"),
            (&[path], None, "toolConfirmation.publicUrl: required when notification targets are configured: the links lead there"),
            (&[path], Some("http://toolgate.example"), "toolConfirmation.publicUrl: `http://toolgate.example` must be an https:// URL (http:// only to localhost)"),
            (&[path], Some("http://localhost:8080"), "ok"),
            (&[path], Some("https://t.example/?a=1"), "toolConfirmation.publicUrl: `https://t.example/?a=1` must have no query or fragment"),
            (&["{webhook: 'https://h.example/x'}"], url, "toolConfirmation.notify[1]: a webhook needs secretEnv: the environment variable holding its signing key"),
            (&[path, "{webhook: 'https://h.example', secretEnv: TOOLGATE_SURELY_UNSET}"], url, "toolConfirmation.notify[2]: environment variable TOOLGATE_SURELY_UNSET (secretEnv) is not set"),
            (&["{slack: 'not a url SECRET'}"], url, "toolConfirmation.notify[1]: slack is not an http(s) URL"),
            (&["{webhook: 'https://h.example/x', secretEnv: CARGO_PKG_NAME}"], url, "toolConfirmation.notify[1]: environment variable CARGO_PKG_NAME (secretEnv) is too short: a signing key needs at least 32 bytes"),
            (&["{webhook: 'http://h.example/x', secretEnv: CARGO_PKG_DESCRIPTION}"], url, "toolConfirmation.notify[1]: webhook must be an https:// URL (http:// only to a loopback host)"),
            (&["{slack: 'http://hooks.slack.com/services/T/B/SECRET'}"], url, "toolConfirmation.notify[1]: slack must be an https:// URL (http:// only to a loopback host)"),
            (&["{slack: 'https://h.example', secretEnv: CARGO_PKG_DESCRIPTION}"], url, "toolConfirmation.notify[1]: secretEnv is for a webhook; a Slack URL is its own secret"),
            (&["{}"], url, "toolConfirmation.notify[1]: give either webhook (with secretEnv) or slack"),
        ];
        for (list, public_url, expected) in cases {
            assert_eq!(&error(list, *public_url), expected, "{list:?}");
        }
        let list = [target(path), target(slack), target(slack)];
        let Ok(Some(plan)) = plan(&list, &BTreeMap::new(), url) else {
            panic!("no plan")
        };
        let names: Vec<&str> = plan.default.iter().map(|t| t.name()).collect();
        assert_eq!(names, ["webhook 1 (h.example)", "slack 1", "slack 2"]);
        assert!(!format!("{plan:?}").contains("SECRET"));
        assert_eq!(plan.public_url, "https://toolgate.example");
    }

    #[test]
    fn a_target_url_is_https_or_loopback_http() {
        let insecure = "must be an https:// URL (http:// only to a loopback host)";
        let not_url = "is not an http(s) URL";
        #[rustfmt::skip]
        let cases: &[(&str, Result<(), &str>)] = &[
            ("https://hooks.example/x", Ok(())),
            ("https://127.0.0.1:8443/x", Ok(())),
            ("http://127.0.0.1:9000/hook", Ok(())),
            ("http://127.8.9.10/hook", Ok(())),
            ("http://[::1]:9000/hook", Ok(())),
            ("http://localhost:9000/hook", Ok(())),
            ("http://LOCALHOST/hook", Ok(())),
            ("http://hooks.example/x", Err(insecure)),
            ("http://10.0.0.1/x", Err(insecure)),
            ("http://[::2]/x", Err(insecure)),
            ("http://localhost.example/x", Err(insecure)),
            ("http://127.0.0.1.example/x", Err(insecure)),
            ("http://0.0.0.0/x", Err(insecure)),
            ("ftp://hooks.example/x", Err(not_url)),
            ("file:///etc/passwd", Err(not_url)),
            ("not a url", Err(not_url)),
        ];
        for (text, expected) in cases {
            assert_eq!(&target_url(text).map(|_| ()), expected, "{text}");
        }
    }

    #[test]
    fn a_tools_own_list_replaces_the_default() {
        let rules: BTreeMap<String, ToolRule> = yaml_serde::from_str(
            "process_payment: {notify: [{slack: 'https://s.example/a'}]}\nmcp--fs--rm: {notify: []}\n",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let default = [target("{slack: 'https://s.example/d'}")];
        let Ok(Some(plan)) = plan(&default, &rules, Some("https://t.example")) else {
            panic!("no plan")
        };
        let links = Links::new(["k".to_owned()]).unwrap_or_else(|| panic!("no key"));
        let notifier =
            Notifier::new(plan, links, Clock::manual(0)).unwrap_or_else(|e| panic!("{e}"));
        let names = |tool: &str| -> Vec<String> {
            notifier
                .targets(tool)
                .iter()
                .map(|t| t.name().to_owned())
                .collect()
        };
        assert_eq!(names("process_payment"), ["slack 1 for process_payment"]);
        assert_eq!(names("mcp--fs--rm"), Vec::<String>::new());
        assert_eq!(names("get_weather"), ["slack 1"]);
        let only_empty: BTreeMap<String, ToolRule> =
            yaml_serde::from_str("x: {notify: []}\n").unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(super::plan(&[], &only_empty, None), Ok(None)));
    }

    /// Deliveries in flight are bounded per principal and in all: beyond,
    /// a delivery waits, and a slot given back lets the next one start.
    #[test]
    fn deliveries_in_flight_are_bounded() {
        let default = [target("{slack: 'https://s.example/d'}")];
        let Ok(Some(plan)) = plan(&default, &BTreeMap::new(), Some("https://t.example")) else {
            panic!("no plan")
        };
        let links = Links::new(["k".to_owned()]).unwrap_or_else(|| panic!("no key"));
        let notifier =
            Notifier::new(plan, links, Clock::manual(0)).unwrap_or_else(|e| panic!("{e}"));
        let issued = |who: &str, n: usize| Issued {
            id: format!("{who}-{n}"),
            chat_id: "chat".into(),
            principal: who.into(),
            call: crate::call::ToolCall {
                id: "call".into(),
                name: "process_payment".into(),
                args: serde_json::json!({}),
            },
            hint: String::new(),
            protocol: crate::protocol::ConfirmationProtocol::Adk,
            issued_at_ms: 0,
            expires_at_ms: 1,
            kind: crate::store::RecordKind::Question,
            fingerprint: None,
        };
        let mut held = Vec::new();
        for n in 0..MAX_IN_FLIGHT {
            // As many principals as it takes to fill every slot.
            let who = format!("user{}", n / PER_PRINCIPAL);
            for target in notifier.targets("process_payment") {
                assert_eq!(notifier.push(&issued(&who, n), target), Pushed::Queued);
            }
            held.extend(notifier.next());
        }
        assert_eq!(held.len(), MAX_IN_FLIGHT);
        for target in notifier.targets("process_payment") {
            assert_eq!(notifier.push(&issued("late", 0), target), Pushed::Queued);
        }
        assert!(notifier.next().is_none(), "one more than the bound waits");
        held.pop();
        let next = notifier.next().map(|(job, _)| job.issued.id);
        assert_eq!(next.as_deref(), Some("late-0"), "room again");
    }
}

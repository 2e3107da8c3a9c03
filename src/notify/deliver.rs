//! One delivery: the target's body, sent and retried with exponential
//! backoff on what may pass (no connection, no answer in time, 5xx, 429),
//! never past the question's expiry nor past shutdown. Its end is told in
//! fixed words: a status code at most, never the URL.

use std::time::Duration;

use reqwest::header::CONTENT_TYPE;
use tokio_util::sync::CancellationToken;

use super::{Job, Kind, Notifier, Target, body};
use crate::store::Issued;

/// Tries per delivery, the first included.
const ATTEMPTS: u32 = 3;
/// How long one try may take, connecting included.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);
/// The wait before the second try; each later one doubles it.
const FIRST_BACKOFF: Duration = Duration::from_millis(250);

pub const SIGNATURE_HEADER: &str = "x-toolgate-signature";
pub const TIMESTAMP_HEADER: &str = "x-toolgate-timestamp";

/// How a delivery ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivery {
    /// The target answered 2xx.
    Delivered { status: u16, attempts: u32 },
    /// Why not, in fixed words (e.g. `status 500 after 3 attempts`).
    Failed(String),
}

impl Delivery {
    /// The audit log's reason: `None` when delivered.
    pub fn failure(&self) -> Option<String> {
        match self {
            Delivery::Delivered { .. } => None,
            Delivery::Failed(why) => Some(why.clone()),
        }
    }
}

impl Notifier {
    /// Sends the job's question (and how many more coalesced into it) to
    /// its target, retrying until it is delivered, fails for good, the
    /// question expires or `stop` is cancelled.
    pub async fn deliver(&self, job: &Job, stop: &CancellationToken) -> Delivery {
        let (target, issued) = (&*job.target, &job.issued);
        let delivery = tokio::select! {
            delivery = self.attempts(target, issued, job.more.len()) => delivery,
            () = stop.cancelled() => Delivery::Failed("stopped: toolgate is shutting down".into()),
        };
        let to = target.name();
        match &delivery {
            Delivery::Delivered { status, attempts } => {
                tracing::info!(to, confirmation = %issued.id, status, attempts, "question delivered");
            }
            Delivery::Failed(why) => {
                tracing::warn!(to, confirmation = %issued.id, "question not delivered: {why}");
            }
        }
        delivery
    }

    async fn attempts(&self, target: &Target, issued: &Issued, more: usize) -> Delivery {
        let pair = self.pair(issued, target);
        let body = match &target.kind {
            Kind::Webhook(_) => body::webhook(issued, &pair, more),
            Kind::Slack => body::slack(issued, &pair, more),
        };
        let mut attempt = 0;
        loop {
            attempt += 1;
            let now_ms = self.clock.now_ms();
            let left = Duration::from_millis(issued.expires_at_ms.saturating_sub(now_ms));
            if left.is_zero() {
                return Delivery::Failed("stopped: the question expired".into());
            }
            let mut request = self
                .client
                .post(target.url.clone())
                .header(CONTENT_TYPE, "application/json")
                .timeout(ATTEMPT_TIMEOUT.min(left))
                .body(body.clone());
            if let Kind::Webhook(key) = &target.kind {
                // Signed at each try: the timestamp is when it was sent.
                let timestamp = now_ms / 1_000;
                request = request
                    .header(TIMESTAMP_HEADER, timestamp.to_string())
                    .header(SIGNATURE_HEADER, body::signature(key, timestamp, &body));
            }
            let failure = match request.send().await {
                Ok(response) if response.status().is_success() => {
                    return Delivery::Delivered {
                        status: response.status().as_u16(),
                        attempts: attempt,
                    };
                }
                Ok(response) => {
                    let status = response.status();
                    let why = format!("status {}", status.as_u16());
                    if !(status.is_server_error() || status.as_u16() == 429) {
                        return Delivery::Failed(why);
                    }
                    why
                }
                Err(e) if e.is_connect() => "connection failed".to_owned(),
                Err(e) if e.is_timeout() => "no answer in time".to_owned(),
                // Its words may hold the URL: none of them is kept.
                Err(_) => return Delivery::Failed("request failed".into()),
            };
            let times = if attempt == 1 { "attempt" } else { "attempts" };
            if attempt >= ATTEMPTS {
                return Delivery::Failed(format!("{failure} after {attempt} {times}"));
            }
            let wait = FIRST_BACKOFF * 2u32.pow(attempt - 1);
            if self.clock.now_ms().saturating_add(super::millis(wait)) >= issued.expires_at_ms {
                return Delivery::Failed(format!(
                    "{failure} after {attempt} {times}; the question expires before another"
                ));
            }
            tokio::time::sleep(wait).await;
        }
    }
}

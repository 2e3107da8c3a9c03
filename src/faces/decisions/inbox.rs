//! Open questions: `GET /api/confirmations?chatId=` (the caller's own in
//! a chat, for a page that reloads), the inbox, `GET /api/confirmations`
//! without `chatId` (every open question the caller may decide, in every
//! chat), and `GET /api/confirmations/events`, the inbox again over SSE
//! each time it may have changed.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};

use crate::faces::auth::Caller;
use crate::faces::error::STORAGE_UNAVAILABLE;
use crate::faces::feeds::Publisher;
use crate::faces::{ApiError, HttpState};
use crate::identity::Identity;
use crate::protocol::sse::Event;
use crate::protocol::{ConfirmationProtocol, RequestError};
use crate::run::{Card, GateError, InboxFilter, Questions};

/// Questions listed when the request does not say.
const DEFAULT_LIMIT: usize = 100;
/// The most one listing gives.
const MAX_LIMIT: usize = 1_000;

/// How long a stream waits after a change before listing again, so that
/// what changes together goes out once: at most four listings a second.
const SETTLE: Duration = Duration::from_millis(250);

/// How long a stream whose listing failed waits before trying again,
/// unless something changes first.
const RETRY: Duration = Duration::from_secs(5);

/// `?tool=&principal=&mine=&limit=`.
#[derive(Debug, Default, serde::Deserialize)]
pub(in crate::faces) struct InboxQuery {
    tool: Option<String>,
    principal: Option<String>,
    #[serde(default)]
    mine: bool,
    limit: Option<usize>,
}

impl InboxQuery {
    fn filter(&self) -> InboxFilter {
        InboxFilter {
            tool: self.tool.clone(),
            principal: self.principal.clone(),
            mine: self.mine,
            limit: self.limit.unwrap_or(DEFAULT_LIMIT).clamp(1, MAX_LIMIT),
        }
    }
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub(in crate::faces) struct ChatQuery {
    /// One chat's: the caller's own open questions there. Without it,
    /// the inbox, whose filter is the rest of the query.
    chat_id: Option<String>,
}

/// The caller's open questions in a chat, for a page that reloads; or,
/// without `chatId`, their inbox.
pub(in crate::faces) async fn open(
    State(state): State<HttpState>,
    caller: Caller,
    Query(chat): Query<ChatQuery>,
    // Read only for the inbox: a chat's listing takes no other key, as before.
    inbox: Result<Query<InboxQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let Some(chat_id) = chat.chat_id else {
        let Query(inbox) =
            inbox.map_err(|rejection| RequestError::Invalid(rejection.body_text()))?;
        return list(&state, &caller, &inbox).await;
    };
    crate::protocol::message::check_id("chatId", &chat_id)?;
    let who = caller.into_identity();
    let open = state.questions.in_chat(&who, chat_id).await?;
    let open: Vec<serde_json::Value> = open.iter().map(item).collect();
    Ok(axum::Json(open).into_response())
}

/// An open question as a card shows it.
fn item(card: &Card) -> serde_json::Value {
    let issued = &card.issued;
    serde_json::json!({
        "id": issued.id,
        "chatId": issued.chat_id,
        "protocol": match issued.protocol {
            ConfirmationProtocol::Adk => "adk",
            ConfirmationProtocol::AiSdk => "ai-sdk",
        },
        "originalFunctionCall": {"id": issued.call.id, "name": issued.call.name, "args": issued.call.args},
        "hint": issued.hint,
        "expiresAtMs": issued.expires_at_ms,
        // A browser's clock may differ from the server's.
        "expiresInMs": card.expires_in_ms,
        "editable": card.editable,
        // Who must approve, and whether the caller may: a card shows
        // "waiting for …" instead of an Approve button.
        "approvers": card.approvers,
        "requireDistinctApprover": card.distinct,
        // As the decision pipeline judges it: the roles and source of
        // the caller's identity count.
        "mayApprove": card.may_approve,
        // What the approver is shown, as digests an auditor recomputes:
        // `null` for a question from before toolgate kept them.
        "fingerprint": issued.fingerprint,
    })
}

/// The caller's inbox, oldest first.
async fn list(
    state: &HttpState,
    caller: &Caller,
    query: &InboxQuery,
) -> Result<Response, ApiError> {
    let listed = listing(&state.questions, &caller.identity(), &query.filter()).await?;
    Ok(axum::Json(listed).into_response())
}

/// Each open question with who asked and the qualified tool.
async fn listing(
    questions: &Questions,
    who: &Identity,
    filter: &InboxFilter,
) -> Result<Vec<serde_json::Value>, GateError> {
    Ok(questions
        .inbox(who, filter)
        .await?
        .into_iter()
        .map(|card| {
            let mut item = item(&card);
            let issued = card.issued;
            item["principal"] = issued.principal.into();
            item["tool"] = crate::call::QualifiedName::of(&issued.call.name)
                .into_string()
                .into();
            item
        })
        .collect())
}

/// A listing as a feed carries it: the frame's text and, for a stream
/// that reads it later, what it was made of and when.
pub struct Listed {
    text: Arc<str>,
    value: serde_json::Value,
    /// The gate's clock when it was listed.
    at_ms: u64,
}

impl Listed {
    /// The frame as sent at `now_ms`: the shared text, unless it was
    /// listed a while ago (a stream opened on a quiet inbox), when each
    /// question's `expiresInMs` has to count the time since.
    fn frame(&self, now_ms: u64) -> Event {
        let since = now_ms.saturating_sub(self.at_ms);
        if since < FRESH_MS {
            return Event::framing(self.text.as_bytes());
        }
        let mut value = self.value.clone();
        if let Some(list) = value["confirmations"].as_array_mut() {
            for question in list {
                if let Some(ms) = question["expiresInMs"].as_u64() {
                    question["expiresInMs"] = ms.saturating_sub(since).into();
                }
            }
        }
        Event::framing(value.to_string().as_bytes())
    }
}

/// How old a listing may be (ms) and still go out as it was made.
const FRESH_MS: u64 = 500;

/// Who reads an inbox feed and what it keeps: streams with the same key
/// (one identity: principal, source, roles, token) share one listing per
/// change.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct InboxKey {
    who: Identity,
    filter: InboxFilter,
}

/// The inbox as an SSE stream: `data: {"confirmations": [...]}` at once,
/// then again after each change (a question asked or taken, here or on
/// an instance sharing the store) and when a listed question expires, at
/// most four times a second; a keep-alive comment when idle. A listing
/// that fails sends `data: {"error": "storage unavailable"}` and is tried
/// again. Streams are capped per principal and in total (429 beyond);
/// the streams of one caller with one filter share one listing.
pub(in crate::faces) async fn events(
    State(state): State<HttpState>,
    caller: Caller,
    query: Result<Query<InboxQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(query) = query.map_err(|rejection| RequestError::Invalid(rejection.body_text()))?;
    let questions = state.questions.clone();
    let who = caller.into_identity();
    let (principal, filter) = (who.principal.clone(), query.filter());
    let key = InboxKey { who, filter };
    let (subscription, publisher) = state.inbox_feeds.join(&principal, key.clone())?;
    if let Some(publisher) = publisher {
        state
            .tasks
            .spawn(publish(questions.clone(), key, publisher));
    }
    let mut subscription = subscription;
    // What the feed holds now, if it has a listing yet, goes out at once.
    subscription.frames.mark_changed();
    let listings = async_stream::stream! {
        // The whole subscription is moved in, not only its receiver: it
        // counts against the caps as long as the stream lives.
        let mut subscription = subscription;
        // Ends when the feed does (shutdown).
        while subscription.frames.changed().await.is_ok() {
            let frame = subscription.frames.borrow_and_update().clone();
            if let Some(listed) = frame {
                yield listed.frame(questions.now_ms());
            }
        }
    };
    let mut response = crate::faces::sse::response(listings, state.keep_alive);
    // Not a UI message stream: no client should read it as one.
    response
        .headers_mut()
        .remove("x-vercel-ai-ui-message-stream");
    Ok(response)
}

/// Lists `key`'s inbox and publishes it, then again after each change,
/// until no stream reads it (or the gate is gone).
async fn publish(questions: Arc<Questions>, key: InboxKey, publisher: Publisher<InboxKey, Listed>) {
    // One pending change at most, however many come: nothing queues.
    let mut changes = questions.inbox_changes();
    loop {
        // What changes from here on lists again.
        changes.borrow_and_update();
        let listed = tokio::select! {
            () = publisher.unread() => return,
            listed = listing(&questions, &key.who, &key.filter) => listed,
        };
        let (frame, wait) = match listed {
            Ok(list) => {
                // A question leaves when its window closes, swept or not.
                let closes = list
                    .iter()
                    .filter_map(|q| q["expiresInMs"].as_u64())
                    .min()
                    .map(|ms| Duration::from_millis(ms.saturating_add(1)));
                (serde_json::json!({"confirmations": list}), closes)
            }
            Err(e) => {
                tracing::warn!("listing an inbox failed: {}", e.detail());
                (
                    serde_json::json!({"error": STORAGE_UNAVAILABLE}),
                    Some(RETRY),
                )
            }
        };
        publisher.publish(Arc::new(Listed {
            text: frame.to_string().into(),
            value: frame,
            at_ms: questions.now_ms(),
        }));
        let changed = async {
            match wait {
                None => changes.changed().await.is_ok(),
                Some(wait) => !matches!(
                    tokio::time::timeout(wait, changes.changed()).await,
                    Ok(Err(_))
                ),
            }
        };
        // Ends only if the gate is gone (it never is while serving).
        let go_on = tokio::select! {
            () = publisher.unread() => return,
            go_on = changed => go_on,
        };
        if !go_on {
            return;
        }
        tokio::select! {
            () = publisher.unread() => return,
            () = tokio::time::sleep(SETTLE) => {}
        }
    }
}

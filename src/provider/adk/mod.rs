//! An existing Google ADK agent (`adk api_server`) as the upstream: ADK
//! runs the agent, its model and its tools; toolgate keeps the session per
//! chat and user, sends the user's message or the answers to ADK's
//! questions, and reads the agent's events (`decode.rs`).
//!
//! A chat is one ADK session per user, with an id derived from the chat's
//! (found again after a restart of either side, never shared by two
//! users: ADK keys sessions by app, user and id).

mod decode;

pub use decode::{AdkEvent, Confirmation, Decode};

use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use hyper::Method;
use reqwest::Url;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::http::Upstream;
use super::{ProviderError, UserContent};

/// Names ADK in errors and logs.
pub const PROVIDER: &str = "ADK";

/// Where `adk api_server` listens unless told otherwise.
pub const DEFAULT_BASE_URL: &str = "http://127.0.0.1:8000";

/// The longest chat id used verbatim as a session id.
const MAX_VERBATIM_ID: usize = 128;

/// What goes back to ADK for one of its questions: only `confirmed` and
/// `payload` (ADK refuses any other key, and never shows a reason to the
/// model).
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    pub confirmation_id: String,
    pub confirmed: bool,
    pub payload: Option<Value>,
}

/// A message to the agent: the user's, or answers to its questions (ADK
/// takes no text beside answers).
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    User(Vec<UserContent>),
    Replies(Vec<Reply>),
}

/// One ADK app on one server.
#[derive(Debug, Clone)]
pub struct Adk {
    upstream: Upstream,
    app: String,
}

impl Adk {
    pub fn new(upstream: Upstream, app: String) -> Self {
        Self { upstream, app }
    }

    /// The session of `chat_id` for `user`, created on its first turn.
    pub async fn session(&self, user: &str, chat_id: &str) -> Result<String, ProviderError> {
        let id = session_id(chat_id);
        let one = self.sessions_url(user, Some(&id))?;
        if self
            .upstream
            .json(Method::GET, &one, None)
            .await
            .map_err(public)?
            .is_some()
        {
            return Ok(id);
        }
        let all = self.sessions_url(user, None)?;
        let body = json!({"session_id": id});
        let created = match self.upstream.json(Method::POST, &all, Some(&body)).await {
            Ok(Some(_)) => Ok(()),
            Ok(None) => Err(not_found()),
            // Created by a request racing this one?
            Err(e) => match self.upstream.json(Method::GET, &one, None).await {
                Ok(Some(_)) => Ok(()),
                _ => Err(e),
            },
        };
        created.map(|()| id).map_err(public)
    }

    /// Runs the agent on `message` and streams its events. Dropping the
    /// stream drops the connection, which stops the agent.
    pub fn run(
        &self,
        user: &str,
        session: &str,
        message: &Message,
    ) -> BoxStream<'static, Result<AdkEvent, ProviderError>> {
        let body = run_body(&self.app, user, session, message);
        let url = self.upstream.url("run_sse").into();
        self.upstream
            .stream(url, body, Decode::new())
            .map_err(public)
            .boxed()
    }

    /// `/apps/{app}/users/{user}/sessions[/{id}]`, each segment escaped.
    fn sessions_url(&self, user: &str, id: Option<&str>) -> Result<String, ProviderError> {
        let mut url = Url::parse(&self.upstream.url(""))
            .map_err(|e| ProviderError::Request(format!("{PROVIDER}'s base URL: {e}")))?;
        {
            let mut path = url
                .path_segments_mut()
                .map_err(|()| ProviderError::Request(format!("{PROVIDER}'s base URL")))?;
            path.pop_if_empty();
            path.extend(["apps", &self.app, "users", user, "sessions"]);
            if let Some(id) = id {
                path.push(id);
            }
        }
        Ok(url.into())
    }
}

/// A chat id as ADK's session id: verbatim when it is plain, otherwise its
/// digest (the same every time, so a restart finds the session).
pub fn session_id(chat_id: &str) -> String {
    let plain = !chat_id.is_empty()
        && chat_id.len() <= MAX_VERBATIM_ID
        && !chat_id.starts_with("tg-")
        && chat_id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    match plain {
        true => chat_id.to_owned(),
        false => format!("tg-{}", hex::encode(Sha256::digest(chat_id.as_bytes()))),
    }
}

/// The `/run_sse` body: streaming on, the message as a genai `Content`.
pub fn run_body(
    app: &str,
    user: &str,
    session: &str,
    message: &Message,
) -> Result<Vec<u8>, ProviderError> {
    let parts: Vec<Value> = match message {
        Message::User(contents) => contents.iter().map(user_part).collect::<Result<_, _>>()?,
        Message::Replies(replies) => replies.iter().map(reply_part).collect(),
    };
    let body = json!({
        "app_name": app,
        "user_id": user,
        "session_id": session,
        "new_message": {"role": "user", "parts": parts},
        "streaming": true,
    });
    serde_json::to_vec(&body).map_err(|e| ProviderError::Request(e.to_string()))
}

fn user_part(content: &UserContent) -> Result<Value, ProviderError> {
    match content {
        UserContent::Text(text) => Ok(json!({"text": text})),
        UserContent::File { media_type, url } => match super::inline_data(url)? {
            Some((media_type, data)) => {
                Ok(json!({"inline_data": {"mime_type": media_type, "data": data}}))
            }
            None => Ok(json!({"file_data": {"mime_type": media_type, "file_uri": url}})),
        },
    }
}

fn reply_part(reply: &Reply) -> Value {
    let mut response = json!({"confirmed": reply.confirmed});
    if let Some(payload) = &reply.payload {
        response["payload"] = payload.clone();
    }
    json!({"function_response": {
        "id": reply.confirmation_id,
        "name": crate::protocol::message::CONFIRMATION_TOOL,
        "response": response,
    }})
}

fn not_found() -> ProviderError {
    ProviderError::Status {
        provider: PROVIDER,
        status: 404,
        message: String::new(),
        retry_after: None,
    }
}

/// ADK's own words before a stream may name its files (a 404 for an
/// unknown app gives the agents' absolute path): the client reads a fixed
/// text per status; the words go to the log.
fn public(error: ProviderError) -> ProviderError {
    let ProviderError::Status {
        status, message, ..
    } = &error
    else {
        return error;
    };
    tracing::warn!(provider = PROVIDER, status, "ADK refused: {message}");
    let message = match status {
        404 => "the ADK app or session was not found (check model.app)",
        422 => "ADK refused the request as malformed",
        _ => "ADK refused the request",
    };
    ProviderError::Status {
        provider: PROVIDER,
        status: *status,
        message: message.to_owned(),
        retry_after: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_ids() {
        let cases = [
            ("chat-1", "chat-1"),
            ("a_B-9", "a_B-9"),
            // Not plain: a digest, the same each time.
            (
                "a/b",
                "tg-c3ab8ff13720e8ad9047dd39466b3c8974e592c2fa383d4a3960714caef0c4f2",
            ),
        ];
        for (chat, session) in cases {
            let got = session_id(chat);
            if session.starts_with("tg-") {
                assert!(got.starts_with("tg-") && got.len() == 67, "{chat}: {got}");
            } else {
                assert_eq!(got, session, "{chat}");
            }
        }
        // A chat id that looks like a digest cannot take another chat's session.
        assert_ne!(session_id(&session_id("a/b")), session_id("a/b"));
        assert_eq!(session_id(""), session_id(""));
        assert!(session_id(&"x".repeat(129)).starts_with("tg-"));
    }

    #[test]
    fn replies_carry_only_what_adk_takes() {
        let message = Message::Replies(vec![
            Reply {
                confirmation_id: "adk-1".into(),
                confirmed: true,
                payload: Some(json!({"approved_days": 3})),
            },
            Reply {
                confirmation_id: "adk-2".into(),
                confirmed: false,
                payload: None,
            },
        ]);
        let body = run_body("payments", "u 1", "s", &message).unwrap_or_default();
        let body: Value = serde_json::from_slice(&body).unwrap_or_default();
        assert_eq!(
            body,
            json!({
                "app_name": "payments",
                "user_id": "u 1",
                "session_id": "s",
                "new_message": {"role": "user", "parts": [
                    {"function_response": {"id": "adk-1", "name": "adk_request_confirmation",
                        "response": {"confirmed": true, "payload": {"approved_days": 3}}}},
                    {"function_response": {"id": "adk-2", "name": "adk_request_confirmation",
                        "response": {"confirmed": false}}},
                ]},
                "streaming": true,
            })
        );
    }

    #[test]
    fn statuses_read_as_fixed_texts() {
        let leaked = ProviderError::Status {
            provider: PROVIDER,
            status: 404,
            message: "Agent not found: 'x'. No matching directory in '/srv/agents/x'.".into(),
            retry_after: None,
        };
        let shown = public(leaked).to_string();
        assert!(!shown.contains("/srv"), "{shown}");
        assert!(shown.contains("not found"), "{shown}");
    }
}

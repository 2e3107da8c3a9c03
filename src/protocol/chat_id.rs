//! A chat's id, checked once. Every face hands the run API a [`ChatId`],
//! and only [`ChatId::parse`] makes one, so one rule holds wherever a chat
//! id comes in (a `/stream` body, a `/live` frame, AG-UI's `threadId`, a
//! resume's path).
//!
//! The rule is what the id travels through: it is a response header
//! (`x-workflow-run-id`, which clients read as Latin-1, so anything beyond
//! ASCII comes back as another id) and a URL path segment (the resume
//! routes, `…/{chatId}/stream`). RFC 3986's unreserved characters
//! (`A-Z a-z 0-9 - . _ ~`) travel unchanged in both, and hold every id the
//! clients generate: `useChat`'s nanoid-like ids, UUIDs (AG-UI's, ADK's
//! sessions), toolgate's own `live-…`.

use std::fmt;

use super::message::{MAX_ID_BYTES, RequestError};

/// What a client reads when its chat id breaks the rule: a fixed text,
/// never the id (which may hold anything).
pub const BAD_CHAT_ID: &str = "the chat id (`id`, or AG-UI's `threadId`) must be 1 to 256 of A-Z a-z 0-9 - . _ ~ (not `.` or `..`): it travels in a header and a URL path";

/// A chat id that can travel in a header and a URL path segment.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ChatId(String);

impl ChatId {
    /// The id, if it is 1 to [`MAX_ID_BYTES`] unreserved characters and
    /// not a dot segment (`.` or `..`, which a URL resolves away).
    pub fn parse(id: impl Into<String>) -> Result<Self, RequestError> {
        let id = id.into();
        let unreserved = id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~'));
        match unreserved && !id.is_empty() && id.len() <= MAX_ID_BYTES && id != "." && id != ".." {
            true => Ok(Self(id)),
            false => Err(RequestError::Invalid(BAD_CHAT_ID.to_owned())),
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn into_string(self) -> String {
        self.0
    }
}

impl fmt::Display for ChatId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for ChatId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ids_clients_make_are_chat_ids() {
        for id in [
            "default",
            // `useChat`'s generateId, and nanoid's alphabet.
            "V1StGXR8_Z5jdHi6B-myT",
            "6f1c2f9e-3d4b-4a5e-9c7d-0e1f2a3b4c5d",
            "live-0a1b2c3d4e5f60718293a4b5c6d7e8f9",
            "thread-1",
            "chat.v2~draft",
            &"a".repeat(MAX_ID_BYTES),
        ] {
            assert_eq!(
                ChatId::parse(id).map(ChatId::into_string),
                Ok(id.to_owned())
            );
        }
    }

    #[test]
    fn what_cannot_travel_in_a_header_or_a_path_is_refused_without_the_id() {
        for id in [
            "",
            "café",
            "チャット",
            "chat with spaces",
            "a/b",
            "a?b",
            "a#b",
            "a%2Fb",
            "x\nFAKE",
            "x\ty",
            "\u{7f}",
            ".",
            "..",
            &"a".repeat(MAX_ID_BYTES + 1),
        ] {
            let refused = ChatId::parse(id).map_err(|e| e.to_string());
            assert_eq!(
                refused,
                Err(format!("invalid request: {BAD_CHAT_ID}")),
                "{id:?}"
            );
        }
    }

    /// Every byte a chat id may hold is a header's visible ASCII, read
    /// back the same by a client that reads headers as Latin-1.
    #[test]
    fn a_chat_id_is_a_header_unchanged() {
        for b in 0..=u8::MAX {
            let Ok(id) = ChatId::parse(char::from(b).to_string()) else {
                continue;
            };
            let header = axum::http::HeaderValue::from_str(id.as_str());
            assert_eq!(
                header.ok().and_then(|h| h.to_str().ok().map(str::to_owned)),
                Some(id.into_string())
            );
        }
    }
}

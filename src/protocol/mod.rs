//! The AI SDK UI message stream: chunks, SSE framing and request bodies.
//! Pure data and encoding; nothing here does I/O.

pub mod adk;
pub mod answer;
pub mod chat_id;
pub mod chunk;
pub mod compat;
pub mod grant;
pub mod message;
pub mod native;
pub mod request;
pub mod sink;
pub mod sse;

pub use chat_id::{BAD_CHAT_ID, ChatId};
pub use chunk::{BlockId, DeltaText, FinishReason, UiChunk};
pub use compat::{ClientVersion, ConfirmationFlow, ConfirmationProtocol, DeniedAs};
pub use message::{Part, RequestError, Role, ToolPart, ToolState, UiMessage};
pub use request::{ChatRequest, RequestOptions};

use answer::Answer;

impl Answer {
    /// The answer in a tool part, in either protocol, or `None` when the
    /// part holds none. Anything but an explicit yes is a denial (fail
    /// closed); a malformed key ([`message::AnswerKeys`]) is an error: the request
    /// that carries it is refused.
    pub fn from_part(part: &ToolPart) -> Result<Option<Self>, RequestError> {
        match adk::answer(part)? {
            Some(answer) => Ok(Some(answer)),
            None => native::answer(part),
        }
    }

    /// Whether `part` is a question still waiting for its answer.
    pub fn is_pending(part: &ToolPart) -> bool {
        adk::is_pending(part) || native::is_pending(part)
    }
}

//! The AI SDK UI message stream: chunks, SSE framing and request bodies.
//! Pure data and encoding; nothing here does I/O.

pub mod adk;
pub mod answer;
pub mod chunk;
pub mod compat;
pub mod message;
pub mod native;
pub mod request;
pub mod sse;

pub use chunk::{FinishReason, UiChunk};
pub use compat::{ClientVersion, ConfirmationFlow, ConfirmationProtocol};
pub use message::{Part, RequestError, Role, ToolPart, ToolState, UiMessage};
pub use request::{ChatRequest, RequestOptions};

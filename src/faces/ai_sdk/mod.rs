//! The AI SDK's UI message stream: over SSE (`http.rs`: `POST /stream`,
//! `/api/chat`, and the resumes `GET …/{chatId}/stream`) and over a
//! WebSocket (`live/`: `/live`, in the AI SDK's frames and the seed
//! dialect). The turn's chunks are framed for this wire as they are made.

pub(super) mod http;
pub(super) mod live;

//! Text and reasoning deltas → `*-start` / `*-delta` / `*-end` chunks, with
//! at most one open block at a time. Pure: chunks go into a caller's buffer,
//! finished blocks into the message being built.

use serde_json::Value;

use crate::ids::Ids;
use crate::protocol::sink::ChunkSink;
use crate::protocol::sse::Delta as Kind;
use crate::protocol::{BlockId, DeltaText, Part, UiChunk};

/// Room a block's text starts with.
const BLOCK_CAPACITY: usize = 128;

#[derive(Debug)]
struct Open {
    kind: Kind,
    id: BlockId,
    content: String,
    metadata: Option<Value>,
}

#[derive(Debug)]
pub struct Blocks {
    ids: Ids,
    open: Option<Open>,
}

impl Blocks {
    pub fn new(ids: Ids) -> Self {
        Self { ids, open: None }
    }

    pub fn text(&mut self, delta: DeltaText, out: &mut impl ChunkSink, parts: &mut Vec<Part>) {
        self.delta(Kind::Text, delta, out, parts);
    }

    pub fn reasoning(&mut self, delta: DeltaText, out: &mut impl ChunkSink, parts: &mut Vec<Part>) {
        self.delta(Kind::Reasoning, delta, out, parts);
    }

    fn delta(
        &mut self,
        kind: Kind,
        delta: DeltaText,
        out: &mut impl ChunkSink,
        parts: &mut Vec<Part>,
    ) {
        if self.open.as_ref().is_some_and(|o| o.kind != kind) {
            self.close(out, parts);
        }
        let open = self.open.get_or_insert_with(|| {
            let (prefix, start): (_, fn(BlockId) -> UiChunk) = match kind {
                Kind::Text => ("txt", |id| UiChunk::TextStart {
                    id,
                    provider_metadata: None,
                }),
                Kind::Reasoning => ("rsn", |id| UiChunk::ReasoningStart {
                    id,
                    provider_metadata: None,
                }),
            };
            let id = BlockId::from(self.ids.next(prefix));
            out.push(start(id.clone()));
            Open {
                kind,
                id,
                // Grown from nothing, a few hundred bytes of deltas would
                // take seven allocations.
                content: String::with_capacity(BLOCK_CAPACITY),
                metadata: None,
            }
        });
        open.content.push_str(&delta);
        out.delta(kind, &open.id, delta);
    }

    /// Ends the reasoning block being streamed with the metadata its
    /// provider needs back; a block with no text yet (a redacted one) is
    /// started for it.
    pub fn reasoning_end(
        &mut self,
        metadata: Value,
        out: &mut impl ChunkSink,
        parts: &mut Vec<Part>,
    ) {
        if self.open.as_ref().is_none_or(|o| o.kind != Kind::Reasoning) {
            self.close(out, parts);
            let id = BlockId::from(self.ids.next("rsn"));
            out.push(UiChunk::ReasoningStart {
                id: id.clone(),
                provider_metadata: None,
            });
            self.open = Some(Open {
                kind: Kind::Reasoning,
                id,
                content: String::new(),
                metadata: None,
            });
        }
        if let Some(open) = &mut self.open {
            open.metadata = Some(metadata);
        }
        self.close(out, parts);
    }

    /// Ends the open block, if any.
    pub fn close(&mut self, out: &mut impl ChunkSink, parts: &mut Vec<Part>) {
        let Some(Open {
            kind,
            id,
            content,
            metadata,
        }) = self.open.take()
        else {
            return;
        };
        match kind {
            Kind::Text => {
                out.push(UiChunk::TextEnd {
                    id,
                    provider_metadata: None,
                });
                parts.push(Part::Text(content));
            }
            Kind::Reasoning => {
                out.push(UiChunk::ReasoningEnd {
                    id,
                    provider_metadata: metadata.clone().map(Box::new),
                });
                parts.push(Part::Reasoning {
                    text: content,
                    provider_metadata: metadata,
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_open_block_at_a_time() {
        let mut blocks = Blocks::new(Ids::sequential());
        let (mut out, mut parts) = (Vec::new(), Vec::new());
        blocks.reasoning("think".into(), &mut out, &mut parts);
        blocks.text("a".into(), &mut out, &mut parts);
        blocks.text("b".into(), &mut out, &mut parts);
        blocks.close(&mut out, &mut parts);
        blocks.close(&mut out, &mut parts);
        let wire: Vec<String> = out
            .iter()
            .map(|c| serde_json::to_string(c).unwrap_or_default())
            .collect();
        assert_eq!(
            wire,
            [
                r#"{"type":"reasoning-start","id":"rsn-1"}"#,
                r#"{"type":"reasoning-delta","id":"rsn-1","delta":"think"}"#,
                r#"{"type":"reasoning-end","id":"rsn-1"}"#,
                r#"{"type":"text-start","id":"txt-2"}"#,
                r#"{"type":"text-delta","id":"txt-2","delta":"a"}"#,
                r#"{"type":"text-delta","id":"txt-2","delta":"b"}"#,
                r#"{"type":"text-end","id":"txt-2"}"#,
            ]
        );
        assert_eq!(
            parts,
            [
                Part::Reasoning {
                    text: "think".into(),
                    provider_metadata: None
                },
                Part::Text("ab".into())
            ]
        );
    }
}

use serde_json::json;

use super::*;
use crate::protocol::sink::End;
use crate::protocol::sse::Event;

/// Each chunk goes out at once as its events; a chunk AG-UI has no
/// words for still counts; the tail comes when the turn lets go.
#[test]
fn frames_each_chunk_as_its_events_and_hands_the_tail_over_at_the_end() {
    let (mut writer, mut tail) = AgUiWriter::new("r");
    let id = BlockId::from("t");
    writer.push(UiChunk::TextStart {
        id: id.clone(),
        provider_metadata: None,
    });
    writer.delta(Delta::Text, &id, "Hi".into());
    let Some(batch) = writer.take() else {
        panic!("nothing framed")
    };
    let events: Vec<Value> = Event::cut(batch.bytes, batch.ends)
        .map(|event| serde_json::from_slice(&event.json()).unwrap_or_default())
        .collect();
    assert_eq!(
        events,
        [
            json!({"type": "TEXT_MESSAGE_START", "messageId": "r.t", "role": "assistant"}),
            json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "r.t", "delta": "Hi"}),
        ]
    );
    assert!(batch.seen.content);
    writer.push(UiChunk::Abort { reason: None });
    let Some(ended) = writer.take() else {
        panic!("an end said with no event is still taken")
    };
    assert!(ended.ends.is_empty());
    assert_eq!(ended.seen.end, Some(End::Aborted));
    assert!(tail.try_recv().is_err(), "no tail while the turn writes");
    drop(writer);
    let Ok(tail) = tail.try_recv() else {
        panic!("no tail")
    };
    assert_eq!(tail.ended, crate::faces::ag_ui::wire::Ended::Aborted);
    assert_eq!(tail.messages.len(), 1);
}

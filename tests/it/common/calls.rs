//! A model for tests of tool sources: the user's text names the call.

use futures::StreamExt;
use futures::stream::BoxStream;
use toolgate::provider::{
    ModelMessage, ModelProvider, ModelRequest, ProviderError, ProviderEvent, StopReason, Usage,
    UserContent,
};

/// The id of the call [`Calls`] makes.
pub const CALL_ID: &str = "call-m";

/// The user's text is `<tool> <json arguments>`: the model calls that tool,
/// then says what came back.
pub struct Calls;

impl ModelProvider for Calls {
    fn stream(
        &self,
        request: ModelRequest,
    ) -> BoxStream<'static, Result<ProviderEvent, ProviderError>> {
        let finish = |reason| ProviderEvent::Finish {
            reason,
            usage: Usage::default(),
        };
        let events = match request.messages.last() {
            Some(ModelMessage::Tool(results)) => vec![
                ProviderEvent::TextDelta(results[0].outcome.text().into()),
                finish(StopReason::Stop),
            ],
            Some(ModelMessage::User(content)) => {
                let text = match content.first() {
                    Some(UserContent::Text(text)) => text.clone(),
                    _ => String::new(),
                };
                let (name, args) = text.split_once(' ').unwrap_or((&text, "{}"));
                vec![
                    ProviderEvent::ToolCallStart {
                        id: CALL_ID.into(),
                        name: name.into(),
                        metadata: None,
                    },
                    ProviderEvent::ToolCallDelta {
                        id: CALL_ID.into(),
                        delta: args.into(),
                    },
                    ProviderEvent::ToolCallEnd { id: CALL_ID.into() },
                    finish(StopReason::ToolCalls),
                ]
            }
            _ => vec![finish(StopReason::Stop)],
        };
        futures::stream::iter(events.into_iter().map(Ok)).boxed()
    }
}

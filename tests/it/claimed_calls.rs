//! A confirmed call, once its claim is won, runs to the end and records its
//! outcome, whatever happens to the request that approved it.

use crate::common;
use crate::common::Must;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::{Counting, fixture};
use futures::StreamExt;
use futures::stream::BoxStream;
use serde_json::Value;
use toolgate::agent::Agent;
use toolgate::confirm::Gate;
use toolgate::identity::{Identity, Source};
use toolgate::ids::{Clock, Ids};
use toolgate::protocol::sink::{ChunkWriter, Out};
use toolgate::protocol::sse::Event;
use toolgate::protocol::{
    ChatRequest, ClientVersion, ConfirmationFlow, ConfirmationProtocol, DeniedAs,
};
use toolgate::provider::ScriptedModel;
use toolgate::store::Store;
use toolgate::tools::{ProcessPayment, Registry};

fn agent(payments: Arc<AtomicUsize>) -> Arc<Agent> {
    let ids = Ids::sequential();
    let mut registry = Registry::new();
    registry.register(Counting {
        inner: ProcessPayment::new(1000.0),
        count: payments,
    });
    let gate = Gate::new(
        registry,
        Store::memory(),
        Clock::manual(0),
        ids.clone(),
        Duration::from_secs(60),
        Duration::from_secs(5),
    );
    Arc::new(Agent {
        gate,
        provider: Arc::new(ScriptedModel::new(ids.clone())),
        ids,
        max_steps: 8,
        denied_as: DeniedAs::default(),
        upstream: None,
        turn_logs: None,
    })
}

/// `anonymous`'s turn for `request`, in ADK's protocol and the finish
/// flow, a chunk's JSON at a time.
fn turn(agent: &Arc<Agent>, request: ChatRequest) -> BoxStream<'static, Value> {
    agent
        .clone()
        .turn(
            request,
            Identity::new("anonymous", Source::Anonymous),
            ConfirmationProtocol::Adk,
            ConfirmationFlow::Finish,
            Out::AiSdk(ChunkWriter::new(ClientVersion::LATEST)),
            tokio::sync::watch::channel(false).0,
        )
        .flat_map(|batch| {
            let chunks: Vec<Value> = Event::cut(batch.bytes, batch.ends)
                .map(|event| serde_json::from_slice(&event.json()).must())
                .collect();
            futures::stream::iter(chunks)
        })
        .boxed()
}

fn request(body: serde_json::Value) -> ChatRequest {
    ChatRequest::from_slice(body.to_string().as_bytes()).must()
}

#[tokio::test]
async fn dropping_the_stream_right_after_the_claim_still_runs_the_call_once() {
    let payments = Arc::new(AtomicUsize::new(0));
    let agent = agent(payments.clone());
    let first = turn(
        &agent,
        request(common::user_says("chat-pay", "Send 50 USD to Hanako")),
    )
    .collect::<Vec<_>>()
    .await;
    assert!(
        first
            .iter()
            .any(|c| c["type"] == "tool-input-available" && c["toolCallId"] == "adk-3")
    );

    // Read up to the echo of the answer (the first chunk after the claim), then go away.
    let approved = request(fixture("pay_hanako_approved.json"));
    let mut stream = turn(&agent, approved.clone());
    let kind = |chunk: Option<Value>| chunk.map(|c| c["type"].clone());
    assert_eq!(kind(stream.next().await), Some("start".into()));
    assert_eq!(
        kind(stream.next().await),
        Some("tool-output-available".into())
    );
    drop(stream);

    // The call ran anyway, and a retry reports its outcome instead of running it again.
    let replay = turn(&agent, approved).collect::<Vec<_>>().await;
    assert_eq!(payments.load(Ordering::SeqCst), 1);
    let paid = replay.iter().any(|c| {
        c["type"] == "tool-output-available"
            && c["toolCallId"] == "call-2"
            && c["output"]["status"] == "completed"
    });
    assert!(paid, "{replay:?}");
}

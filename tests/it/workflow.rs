//! `WorkflowChatTransport`'s wire (`@ai-sdk/workflow`): every streamed
//! turn names its run (`x-workflow-run-id`, the chat id), and
//! `GET …/{runId}/stream?startIndex=N` reads the turn on from chunk N
//! (negative: back from the tail, `x-workflow-stream-tail-index`), on this
//! instance or, with Redis, on another; 204 when nothing is left.

use crate::common;

use common::body::{Body, Streaming, chunks_of, read_to_end, read_until};
use common::{Server, user_says};
use serde_json::{Value, json};

/// A turn in `chat` that pays Hanako in the hold flow (the stream stays
/// open while it asks).
fn held(chat: &str) -> Value {
    let mut body = user_says(chat, "Send 50 USD to Hanako");
    body["toolgate"] = json!({"flow": "hold"});
    body
}

/// The question has come, and the write it came in is whole.
fn asked_whole(sse: &str) -> bool {
    common::body::asked(sse) && sse.ends_with("\n\n")
}

/// A GET of `path` on `url`, its status, headers and body as it streams.
async fn get_streaming(url: &str, path: &str) -> (u16, reqwest::header::HeaderMap, Streaming) {
    let response = reqwest::get(format!("{url}{path}"))
        .await
        .unwrap_or_else(|e| panic!("GET {path}: {e}"));
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    (status, headers, Box::pin(response.bytes_stream()))
}

fn header(headers: &reqwest::header::HeaderMap, name: &str) -> Option<String> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

/// Reads a held turn of `chat` on `server` up to its question, then
/// cuts it: what was read.
async fn cut_at_the_question(server: &Server, chat: &str) -> String {
    let (body, seen) = server.open_until(&held(chat), asked_whole).await;
    drop(body);
    seen
}

/// Reads `body` to its end; what it said.
async fn rest(body: &mut impl Body) -> String {
    let mut seen = String::new();
    assert!(read_to_end(body, &mut seen).await, "cut: {seen}");
    seen
}

#[tokio::test]
async fn every_streamed_turn_names_its_run() {
    let server = Server::start().await;
    for path in ["/stream", "/api/chat"] {
        let reply = server
            .post(path, user_says("chat-run-7", "hello").to_string())
            .await;
        assert_eq!(reply.status, 200, "{}", reply.body);
        assert_eq!(
            header(&reply.headers, "x-workflow-run-id").as_deref(),
            Some("chat-run-7"),
            "{path}"
        );
    }
}

/// The client read the turn to its question, then a proxy cut it; it
/// reads on from the chunk after the last it had, the approval (made
/// through the API) completes there, and together it saw every chunk of
/// the turn once, in order.
#[tokio::test]
async fn a_cut_held_turn_is_read_on_from_where_it_was() {
    let server = Server::start().await;
    let seen = cut_at_the_question(&server, "chat-cut").await;
    let had = chunks_of(&seen);
    let question = common::body::question(&seen);

    for api in ["/stream", "/api/chat"] {
        let path = format!("{api}/chat-cut/stream?startIndex={}", had.len());
        let (status, headers, mut body) = get_streaming(&server.url, &path).await;
        assert_eq!(status, 200, "{path}");
        let tail = (had.len() - 1).to_string();
        assert_eq!(
            header(&headers, "x-workflow-stream-tail-index").as_deref(),
            Some(tail.as_str())
        );
        if api == "/stream" {
            // Nothing new yet: a second reader that leaves keeps nothing back.
            drop(body);
            continue;
        }
        let (_, _, mut whole) =
            get_streaming(&server.url, "/api/chat/chat-cut/stream?startIndex=0").await;
        let decided = server.approve(&question).await;
        assert_eq!(decided.status, 200, "{}", decided.body);
        let after = rest(&mut body).await;
        let whole = chunks_of(&rest(&mut whole).await);

        assert_eq!(server.payments(), 1);
        let after = chunks_of(&after);
        assert_eq!(
            after.last().map(|c| c["type"].clone()),
            Some(json!("finish"))
        );
        let together: Vec<Value> = had.iter().chain(&after).cloned().collect();
        assert_eq!(together, whole, "every chunk once, in order");
    }
}

/// A negative index reads that many chunks back from the tail, and says
/// where the tail is; an index past the tail reads what comes next.
#[tokio::test]
async fn a_negative_index_counts_back_from_the_tail() {
    let server = Server::start().await;
    let seen = cut_at_the_question(&server, "chat-tail").await;
    let had = chunks_of(&seen);

    let (status, headers, body) =
        get_streaming(&server.url, "/stream/chat-tail/stream?startIndex=-2").await;
    assert_eq!(status, 200);
    let tail = (had.len() - 1).to_string();
    assert_eq!(
        header(&headers, "x-workflow-stream-tail-index").as_deref(),
        Some(tail.as_str())
    );
    let mut body = body;
    let mut read = String::new();
    read_until(&mut body, &mut read, |s| chunks_of(s).len() >= 2).await;
    assert_eq!(chunks_of(&read), had[had.len() - 2..].to_vec());

    // More back than there is: from the start.
    let (_, _, mut all) =
        get_streaming(&server.url, "/stream/chat-tail/stream?startIndex=-100000").await;
    let mut read = String::new();
    read_until(&mut all, &mut read, |s| chunks_of(s).len() >= had.len()).await;
    assert_eq!(chunks_of(&read), had);
}

/// No run in the chat, or a run over: 204, as the transport expects; a
/// start index that is no number: a clear 400.
#[tokio::test]
async fn nothing_left_is_204_and_a_bad_index_is_400() {
    let server = Server::start().await;
    let none = server.get("/api/chat/chat-none/stream?startIndex=3").await;
    assert_eq!(none.status, 204, "{}", none.body);

    let reply = server.says("chat-over", "hello").await;
    assert_eq!(reply.status, 200);
    let over = server.get("/stream/chat-over/stream?startIndex=-1").await;
    assert_eq!(over.status, 204, "{}", over.body);

    for bad in ["abc", "1.5", "99999999999999999999999"] {
        let reply = server
            .get(&format!("/stream/chat-over/stream?startIndex={bad}"))
            .await;
        assert_eq!(reply.status, 400, "{bad}: {}", reply.body);
        assert_eq!(
            reply.json()["error"],
            "invalid request: startIndex must be a whole number of chunks"
        );
    }
}

/// With Redis, another instance reads the turn on from the same chunk
/// number: the numbers are the turn log's, the same everywhere.
#[cfg(feature = "redis-server")]
#[tokio::test]
async fn another_instance_reads_on_from_the_same_chunk() {
    use common::Must;
    let url = common::redis_url();
    let prefix = format!("test-{}:", uuid::Uuid::new_v4().simple());
    let server = || async {
        let store = toolgate::store::Store::redis(&url, &prefix).await.must();
        Server::with(toolgate::Config::default(), move |app| {
            app.with_store(store)
        })
        .await
    };
    let (a, b) = (server().await, server().await);
    let (cut, seen) = a.open_until(&held("chat-far"), asked_whole).await;
    // Cut once the turn is marked waiting (a turn cut before that, with
    // nobody reading, stops).
    let redis = redis::Client::open(url.as_str())
        .must()
        .get_multiplexed_async_connection()
        .await
        .must();
    let chat = format!("{prefix}turn:anonymous\u{1f}chat-far");
    common::wait::until("the turn waits", || {
        let (mut redis, chat) = (redis.clone(), chat.clone());
        async move {
            let waiting: Option<String> = redis::cmd("HGET")
                .arg(&chat)
                .arg("waiting")
                .query_async(&mut redis)
                .await
                .ok()
                .flatten();
            waiting.as_deref() == Some("1")
        }
    })
    .await;
    drop(cut);
    let had = chunks_of(&seen);
    let question = common::body::question(&seen);

    let (_, _, mut whole) = get_streaming(&b.url, "/api/chat/chat-far/stream").await;
    let mut replayed = String::new();
    read_until(&mut whole, &mut replayed, asked_whole).await;
    let (status, headers, mut body) = get_streaming(
        &b.url,
        &format!("/api/chat/chat-far/stream?startIndex={}", had.len()),
    )
    .await;
    assert_eq!(status, 200);
    let tail = (had.len() - 1).to_string();
    assert_eq!(
        header(&headers, "x-workflow-stream-tail-index").as_deref(),
        Some(tail.as_str())
    );
    let decided = b.approve(&question).await;
    assert_eq!(decided.status, 200, "{}", decided.body);
    let after = chunks_of(&rest(&mut body).await);
    replayed.push_str(&rest(&mut whole).await);

    assert_eq!(a.payments() + b.payments(), 1);
    let together: Vec<Value> = had.iter().chain(&after).cloned().collect();
    assert_eq!(together, chunks_of(&replayed), "every chunk once, in order");

    // Over: the ended turn's rest is still read from where it was, and
    // once nothing is left after the index, 204.
    let end = together.len();
    let last = b
        .get(&format!("/api/chat/chat-far/stream?startIndex={}", end - 1))
        .await;
    assert_eq!(last.status, 200, "{}", last.body);
    assert_eq!(chunks_of(&last.body), together[end - 1..].to_vec());
    let past = b
        .get(&format!("/api/chat/chat-far/stream?startIndex={end}"))
        .await;
    assert_eq!(past.status, 204, "{}", past.body);
}
